"""Node selectors (``nodeSelectorTerms``) compiled into row masks over the cache's label index.

NodeAffinity filters and scores with them; PodTopologySpread limits its domains to the nodes a
pod's required node affinity selects (``nodeAffinityPolicy: Honor``); the volume plugins match a
PersistentVolume's ``nodeAffinity`` with them. Semantics and error texts
are ``k8s.io/component-helpers``' node selectors, described in ``scheduler.plugins.node_affinity``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.core import Pod
from apis.meta import NodeSelectorRequirement, NodeSelectorTerm
from scheduler.cache.node_table import BoolArray
from scheduler.cache.snapshot import Snapshot

__all__ = [
    "OBJECT_NAME_FIELD",
    "CompiledTerm",
    "NodeSelectorMatcher",
    "compile_term",
    "fit_mask",
    "go_int",
    "required_node_mask",
    "term_mask",
]

OBJECT_NAME_FIELD = "metadata.name"
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def go_int(value: str) -> int | None:
    """Go's ``strconv.ParseInt(value, 10, 64)``: an optional sign, decimal digits, in int64 range."""
    if not _GO_INT.fullmatch(value):
        return None
    number = int(value)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


# ---- compiled selectors --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    operator: str
    values: frozenset[str]
    number: int | None = None
    """The integer of ``Gt`` / ``Lt``."""
    field: bool = False
    """A ``matchFields`` requirement (on the node's name) rather than a label one."""


@dataclass(frozen=True, slots=True)
class CompiledTerm:
    requirements: tuple[_Requirement, ...]
    error: str | None = None
    """Why the term is malformed; such a term matches no node."""


def _compile_label(req: NodeSelectorRequirement, path: str) -> tuple[_Requirement | None, str | None]:
    values = req.values or []
    op = req.operator
    if op in ("In", "NotIn"):
        if not values:
            return (
                None,
                f"{path}.values: Required value: for 'in', 'notin' operators, values set can't be empty",
            )
        return _Requirement(req.key, op, frozenset(values)), None
    if op in ("Exists", "DoesNotExist"):
        if values:
            return (
                None,
                f"{path}.values: Invalid value: values set must be empty for exists and does not exist",
            )
        return _Requirement(req.key, op, frozenset()), None
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            return (
                None,
                f"{path}.values: Invalid value: for 'Gt', 'Lt' operators, exactly one value is required",
            )
        number = go_int(values[0])
        if number is None:
            return None, (
                f"{path}.values[0]: Invalid value: {values[0]!r}: "
                "for 'Gt', 'Lt' operators, the value must be an integer"
            )
        return _Requirement(req.key, op, frozenset(values), number), None
    return None, f"{path}.operator: Unsupported value: {op!r}"


def _compile_field(req: NodeSelectorRequirement, path: str) -> tuple[_Requirement | None, str | None]:
    values = req.values or []
    if req.operator not in ("In", "NotIn"):
        return None, f'{path}.operator: Unsupported value: {req.operator!r}: supported values: "In", "NotIn"'
    if len(values) != 1:
        return None, f"{path}.values: Invalid value: must have one element"
    return _Requirement(req.key, req.operator, frozenset(values), field=True), None


def compile_term(term: NodeSelectorTerm, path: str = "nodeSelectorTerms[0]") -> CompiledTerm | None:
    """The term's requirements, or None for an empty term (which selects no node)."""
    expressions, fields = term.match_expressions or [], term.match_fields or []
    if not expressions and not fields:
        return None
    requirements: list[_Requirement] = []
    errors: list[str] = []
    for reqs, kind, compile_one in (
        (expressions, "matchExpressions", _compile_label),
        (fields, "matchFields", _compile_field),
    ):
        for i, req in enumerate(reqs):
            compiled, error = compile_one(req, f"{path}.{kind}[{i}]")
            if error is not None:
                errors.append(error)
            elif compiled is not None:
                requirements.append(compiled)
    return CompiledTerm(tuple(requirements), "; ".join(errors) if errors else None)


def fit_mask(mask: BoolArray, size: int) -> BoolArray:
    """A cached mask padded (with False) to the table's current row count."""
    if mask.size >= size:
        return mask[:size]
    padded = np.zeros(size, dtype=np.bool_)
    padded[: mask.size] = mask
    return padded


def _requirement_mask(req: _Requirement, snapshot: Snapshot, size: int) -> BoolArray:
    if req.field:
        if req.key == OBJECT_NAME_FIELD:
            (value,) = req.values
            mask = np.zeros(size, dtype=np.bool_)
            row = snapshot.table.row.get(value)
            if row is not None and row < size:
                mask[row] = True
        else:  # an unknown field reads as "" on every node
            mask = np.full(size, "" in req.values, dtype=np.bool_)
        return mask if req.operator == "In" else ~mask
    if req.operator in ("In", "NotIn"):
        mask = fit_mask(snapshot.label_mask(req.key, req.values), size)
        return mask if req.operator == "In" else ~mask
    if req.operator in ("Exists", "DoesNotExist"):
        mask = fit_mask(snapshot.label_mask(req.key, None), size)
        return mask if req.operator == "Exists" else ~mask
    assert req.number is not None
    wanted = req.number
    chosen = []
    for value in snapshot.label_values(req.key):
        number = go_int(value)
        if number is not None and (number > wanted if req.operator == "Gt" else number < wanted):
            chosen.append(value)
    return fit_mask(snapshot.label_mask(req.key, frozenset(chosen)), size)


def term_mask(term: CompiledTerm, snapshot: Snapshot, size: int) -> BoolArray:
    if term.error is not None:
        return np.zeros(size, dtype=np.bool_)
    mask = np.ones(size, dtype=np.bool_)
    for req in term.requirements:
        mask &= _requirement_mask(req, snapshot, size)
    return mask


@dataclass(frozen=True, slots=True)
class NodeSelectorMatcher:
    """Required terms (ORed); ``terms`` excludes empty terms, which select nothing."""

    terms: tuple[CompiledTerm, ...]

    @staticmethod
    def of(terms: Sequence[NodeSelectorTerm]) -> NodeSelectorMatcher:
        compiled = (compile_term(t, f"nodeSelectorTerms[{i}]") for i, t in enumerate(terms))
        return NodeSelectorMatcher(tuple(t for t in compiled if t is not None))

    @property
    def errors(self) -> list[str]:
        return [t.error for t in self.terms if t.error is not None]

    def mask(self, snapshot: Snapshot, size: int) -> BoolArray:
        mask = np.zeros(size, dtype=np.bool_)
        for term in self.terms:
            mask |= term_mask(term, snapshot, size)
        return mask


def required_node_mask(pod: Pod, snapshot: Snapshot, size: int) -> BoolArray | None:
    """Rows matching the pod's ``nodeSelector`` and required node affinity (component-helpers'
    ``GetRequiredNodeAffinity(pod).Match``; malformed terms match nothing); None: no requirement."""
    spec = pod.spec
    node_affinity = spec.affinity.node_affinity if spec.affinity else None
    required = node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    if not spec.node_selector and required is None:
        return None
    mask = np.ones(size, dtype=np.bool_)
    for key, value in (spec.node_selector or {}).items():
        mask &= fit_mask(snapshot.label_mask(key, frozenset((value,))), size)
    if required is not None:
        mask &= NodeSelectorMatcher.of(required.node_selector_terms).mask(snapshot, size)
    return mask
