"""Node selectors (``apis.nodeselector``'s compiled terms) as row masks over the cache's label index.

NodeAffinity filters and scores with them; PodTopologySpread limits its domains to the nodes a
pod's required node affinity selects (``nodeAffinityPolicy: Honor``); the volume plugins match a
PersistentVolume's ``nodeAffinity`` with them. Semantics and error texts
are ``k8s.io/component-helpers``' node selectors, described in ``scheduler.plugins.node_affinity``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.core import Pod
from apis.meta import NodeSelectorTerm
from apis.nodeselector import OBJECT_NAME_FIELD, CompiledRequirement, CompiledTerm, compile_term, go_int
from scheduler.cache.node_table import BoolArray
from scheduler.cache.snapshot import Snapshot

__all__ = [
    "NodeSelectorMatcher",
    "fit_mask",
    "required_node_mask",
    "term_mask",
]


def fit_mask(mask: BoolArray, size: int) -> BoolArray:
    """A cached mask padded (with False) to the table's current row count."""
    if mask.size >= size:
        return mask[:size]
    padded = np.zeros(size, dtype=np.bool_)
    padded[: mask.size] = mask
    return padded


def _requirement_mask(req: CompiledRequirement, snapshot: Snapshot, size: int) -> BoolArray:
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
