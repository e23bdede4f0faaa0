"""Node selectors (``nodeSelectorTerms``) compiled once and matched against one node's name and
labels. Semantics and error texts are ``k8s.io/component-helpers``' node selectors; the scheduler
matches the compiled terms against its whole label index at once (``scheduler.plugins.helper``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from apis.core import Node, Pod
from apis.meta import NodeSelectorRequirement, NodeSelectorTerm

__all__ = [
    "OBJECT_NAME_FIELD",
    "CompiledRequirement",
    "CompiledTerm",
    "compile_term",
    "go_int",
    "node_affinity_matches",
    "term_matches",
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


@dataclass(frozen=True, slots=True)
class CompiledRequirement:
    key: str
    operator: str
    values: frozenset[str]
    number: int | None = None
    """The integer of ``Gt`` / ``Lt``."""
    field: bool = False
    """A ``matchFields`` requirement (on the node's name) rather than a label one."""


@dataclass(frozen=True, slots=True)
class CompiledTerm:
    requirements: tuple[CompiledRequirement, ...]
    error: str | None = None
    """Why the term is malformed; such a term matches no node."""


def _compile_label(req: NodeSelectorRequirement, path: str) -> tuple[CompiledRequirement | None, str | None]:
    values = req.values or []
    op = req.operator
    if op in ("In", "NotIn"):
        if not values:
            return (
                None,
                f"{path}.values: Required value: for 'in', 'notin' operators, values set can't be empty",
            )
        return CompiledRequirement(req.key, op, frozenset(values)), None
    if op in ("Exists", "DoesNotExist"):
        if values:
            return (
                None,
                f"{path}.values: Invalid value: values set must be empty for exists and does not exist",
            )
        return CompiledRequirement(req.key, op, frozenset()), None
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
        return CompiledRequirement(req.key, op, frozenset(values), number), None
    return None, f"{path}.operator: Unsupported value: {op!r}"


def _compile_field(req: NodeSelectorRequirement, path: str) -> tuple[CompiledRequirement | None, str | None]:
    values = req.values or []
    if req.operator not in ("In", "NotIn"):
        return None, f'{path}.operator: Unsupported value: {req.operator!r}: supported values: "In", "NotIn"'
    if len(values) != 1:
        return None, f"{path}.values: Invalid value: must have one element"
    return CompiledRequirement(req.key, req.operator, frozenset(values), field=True), None


def compile_term(term: NodeSelectorTerm, path: str = "nodeSelectorTerms[0]") -> CompiledTerm | None:
    """The term's requirements, or None for an empty term (which selects no node)."""
    expressions, fields = term.match_expressions or [], term.match_fields or []
    if not expressions and not fields:
        return None
    requirements: list[CompiledRequirement] = []
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


def term_matches(term: CompiledTerm, name: str, labels: Mapping[str, str]) -> bool:
    if term.error is not None:
        return False
    for req in term.requirements:
        if req.field:
            value: str | None = name if req.key == OBJECT_NAME_FIELD else ""
        else:
            value = labels.get(req.key)
        if req.operator == "In":
            ok = value is not None and value in req.values
        elif req.operator == "NotIn":
            ok = value is None or value not in req.values
        elif req.operator == "Exists":
            ok = value is not None
        elif req.operator == "DoesNotExist":
            ok = value is None
        else:  # Gt / Lt
            number = go_int(value) if value is not None else None
            assert req.number is not None
            ok = number is not None and (number > req.number if req.operator == "Gt" else number < req.number)
        if not ok:
            return False
    return True


def node_affinity_matches(pod: Pod, node: Node) -> bool:
    """The pod's ``nodeSelector`` and required node affinity hold on ``node`` (component-helpers'
    ``GetRequiredNodeAffinity(pod).Match``; malformed or empty terms match nothing)."""
    labels = node.metadata.labels or {}
    for key, value in (pod.spec.node_selector or {}).items():
        if labels.get(key) != value:
            return False
    affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    if required is None:
        return True
    name = node.metadata.name or ""
    for i, term in enumerate(required.node_selector_terms):
        compiled = compile_term(term, f"nodeSelectorTerms[{i}]")
        if compiled is not None and term_matches(compiled, name, labels):
            return True
    return False
