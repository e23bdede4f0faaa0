"""NodeAffinity: ``spec.nodeSelector`` and node affinity, evaluated on label masks.

Filter: a node fits when it has every ``nodeSelector`` label and matches one of the required
``nodeSelectorTerms`` (terms ORed, a term's expressions and fields ANDed). Score: the sum of the weights
of the preferred terms a node matches, normalized to 0..100 by the highest sum, as kube-scheduler does.
``NodeAffinityArgs.addedAffinity`` adds scheduler-enforced terms to every pod.

Each expression becomes a full-length row mask built from the cache's label index
(``Snapshot.label_mask``), which caches masks per (key, values) until a node changes, so pods with the
same selector share them, and combining a pod's terms is a few numpy operations whatever the number of
nodes.

Operators, as ``k8s.io/apimachinery`` labels selectors: ``In`` (the label has one of the values),
``NotIn`` (it has none of them, or the node lacks the label), ``Exists``, ``DoesNotExist``, ``Gt`` /
``Lt`` (the label, parsed as an integer, is greater / less than the single integer value). ``matchFields``
supports ``metadata.name`` with ``In`` / ``NotIn`` and exactly one value.

Malformed terms (an unknown operator, a wrong number of values, a ``Gt``/``Lt`` value that is not an
integer) match no node, as kube-scheduler treats them; when every required term is malformed, PreFilter
rejects the pod as unresolvable with the parse error as its reason, and a malformed preferred term is
ignored (and logged).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import ConfigDict, model_validator

from apis.base import KoordModel
from apis.core import NodeAffinity as NodeAffinitySpec
from apis.core import PreferredSchedulingTerm
from apis.meta import NodeSelectorTerm
from apis.nodeselector import OBJECT_NAME_FIELD, CompiledTerm, compile_term
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import RowInputs, SkipReads
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    ClusterEvent,
    FilterPlugin,
    FilterResult,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status
from scheduler.plugins.helper.node_selector import NodeSelectorMatcher, fit_mask, term_mask
from scheduler.plugins.helper.normalize import default_normalize

__all__ = [
    "ERR_REASON_CONFLICT",
    "ERR_REASON_ENFORCED",
    "ERR_REASON_POD",
    "NAME",
    "PLUGIN",
    "NodeAffinity",
    "NodeAffinityArgs",
    "NodeSelectorMatcher",
    "compile_term",
    "new",
]

log = logging.getLogger(__name__)

NAME = "NodeAffinity"

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"


@dataclass(frozen=True, slots=True)
class _WeightedTerm:
    weight: int
    term: CompiledTerm


def _compile_preferred(terms: Sequence[PreferredSchedulingTerm], owner: str) -> tuple[_WeightedTerm, ...]:
    result = []
    for i, preferred in enumerate(terms):
        if preferred.weight == 0:
            continue
        compiled = compile_term(preferred.preference, f"preferredDuringSchedulingIgnoredDuringExecution[{i}]")
        if compiled is None:
            continue
        if compiled.error is not None:
            log.warning("%s: ignoring a malformed preferred node affinity term: %s", owner, compiled.error)
            continue
        result.append(_WeightedTerm(preferred.weight, compiled))
    return tuple(result)


@dataclass(frozen=True, slots=True)
class _FilterState:
    node_selector: dict[str, str] | None
    required: NodeSelectorMatcher | None
    raw_terms: tuple[NodeSelectorTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class _ScoreState:
    preferred: tuple[_WeightedTerm, ...]


PRE_FILTER_KEY = StateKey[_FilterState]("PreFilterNodeAffinity")
PRE_SCORE_KEY = StateKey[_ScoreState]("PreScoreNodeAffinity")


# ---- args -------------------------------------------------------------------------------------------


class NodeAffinityArgs(KoordModel):
    """kube-scheduler's ``NodeAffinityArgs``."""

    model_config = ConfigDict(extra="forbid")

    added_affinity: NodeAffinitySpec | None = None
    """Node affinity every pod of the profile must also satisfy (required) or prefers (preferred)."""

    @model_validator(mode="after")
    def _check_added(self) -> NodeAffinityArgs:
        added = self.added_affinity
        if added is None:
            return self
        required = added.required_during_scheduling_ignored_during_execution
        if required is not None:
            errors = NodeSelectorMatcher.of(required.node_selector_terms).errors
            if errors:
                raise ValueError(f"addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: {errors[0]}")
        for i, term in enumerate(added.preferred_during_scheduling_ignored_during_execution or ()):
            compiled = compile_term(term.preference)
            if compiled is not None and compiled.error is not None:
                raise ValueError(
                    f"addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]: {compiled.error}"
                )
        return self


# ---- plugin -----------------------------------------------------------------------------------------


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ScoreExtensions):
    def __init__(self, args: NodeAffinityArgs) -> None:
        added = args.added_affinity
        required = added.required_during_scheduling_ignored_during_execution if added else None
        self._added_required = NodeSelectorMatcher.of(required.node_selector_terms) if required else None
        preferred = added.preferred_during_scheduling_ignored_during_execution if added else None
        self._added_preferred = _compile_preferred(preferred or (), "addedAffinity")

    @property
    def name(self) -> str:
        return NAME

    pre_filter_skip_reads = SkipReads.SPEC
    """``SkipByClass``: PreFilter's SKIP reads only the pod's spec and the added affinity."""

    def row_inputs(self, pod: PodInfo) -> RowInputs:
        """``RowLocal``: it reads the pod and the node's labels."""
        return RowInputs.NODE

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.NODE_ADD | ClusterEvent.NODE_UPDATE

    # ---- PreFilter / Filter ----

    @staticmethod
    def _filter_state(pod: PodInfo) -> _FilterState:
        spec = pod.pod.spec
        node_affinity = spec.affinity.node_affinity if spec.affinity else None
        required = (
            node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
        )
        return _FilterState(
            node_selector=spec.node_selector,
            required=NodeSelectorMatcher.of(required.node_selector_terms) if required is not None else None,
            raw_terms=tuple(required.node_selector_terms) if required is not None else (),
        )

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        fs = self._filter_state(pod)
        if fs.required is None and fs.node_selector is None and self._added_required is None:
            return PreFilterResult(Status.skip())
        state.write(PRE_FILTER_KEY, fs)
        if fs.required is None:
            return PreFilterResult()
        errors = fs.required.errors
        if fs.required.terms and len(errors) == len(fs.required.terms):
            return PreFilterResult(Status.unresolvable(f"invalid node affinity: {'; '.join(errors)}"))
        node_names = self._required_node_names(fs.raw_terms)
        if node_names is not None and not node_names:
            return PreFilterResult(Status.unresolvable(ERR_REASON_CONFLICT))
        return PreFilterResult(node_names=node_names)

    @staticmethod
    def _required_node_names(terms: Sequence[NodeSelectorTerm]) -> frozenset[str] | None:
        """The node names the required terms allow through ``metadata.name In``, when every term
        names some (None: some term allows any node)."""
        if not terms:
            return None
        names: set[str] = set()
        for term in terms:
            term_names: set[str] | None = None
            for req in term.match_fields or ():
                if req.key == OBJECT_NAME_FIELD and req.operator == "In":
                    values = set(req.values or ())
                    term_names = values if term_names is None else term_names & values
            if term_names is None:
                return None
            names |= term_names
        return frozenset(names)

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        fs = state.get(PRE_FILTER_KEY)
        if fs is None:
            fs = self._filter_state(pod)
        size = snapshot.table.row_count
        rejections: list[tuple[str, BoolArray]] = []
        feasible = np.ones(rows.size, dtype=np.bool_)
        if self._added_required is not None:
            enforced = self._added_required.mask(snapshot, size)[rows]
            if not enforced.all():
                rejections.append((ERR_REASON_ENFORCED, ~enforced))
                feasible &= enforced
        pod_mask: BoolArray | None = None
        if fs.node_selector:
            pod_mask = np.ones(size, dtype=np.bool_)
            for key, value in fs.node_selector.items():
                pod_mask &= fit_mask(snapshot.label_mask(key, frozenset((value,))), size)
        if fs.required is not None:
            required = fs.required.mask(snapshot, size)
            pod_mask = required if pod_mask is None else pod_mask & required
        if pod_mask is not None:
            matched = pod_mask[rows]
            failed = feasible & ~matched
            if failed.any():
                rejections.append((ERR_REASON_POD, failed))
                feasible &= matched
        if not rejections:
            return FilterResult.all_feasible(rows.size)
        return FilterResult(feasible=feasible, rejections=rejections, unresolvable=~feasible)

    # ---- PreScore / Score ----

    def _score_state(self, pod: PodInfo) -> _ScoreState:
        spec = pod.pod.spec
        node_affinity = spec.affinity.node_affinity if spec.affinity else None
        preferred = (
            node_affinity.preferred_during_scheduling_ignored_during_execution if node_affinity else None
        )
        return _ScoreState(_compile_preferred(preferred or (), f"pod {pod.key}"))

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status:
        scored = self._score_state(pod)
        if not scored.preferred and not self._added_preferred:
            return Status.skip()
        state.write(PRE_SCORE_KEY, scored)
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        scored = state.get(PRE_SCORE_KEY)
        if scored is None:
            scored = self._score_state(pod)
            state.write(PRE_SCORE_KEY, scored)
        total = np.zeros(rows.size, dtype=np.int64)
        size = snapshot.table.row_count
        for weighted in (*self._added_preferred, *scored.preferred):
            total += np.where(term_mask(weighted.term, snapshot, size)[rows], weighted.weight, 0)
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=False)


def new(args: NodeAffinityArgs | None, handle: Handle) -> NodeAffinity:
    return NodeAffinity(args or NodeAffinityArgs())


PLUGIN = PluginSpec(NAME, new, NodeAffinityArgs)
