"""InterPodAffinity: podAffinity and podAntiAffinity with kube-scheduler v1.35's semantics.

Filter, in upstream's order (a node carries the first reason that rejects it):

1. required affinity: the node has every term's topology key, and in the node's domain of each
   key runs a pod matching *all* the terms ("node(s) didn't match pod affinity rules",
   unresolvable). Exception: when no pod anywhere matches all the terms and the pod matches its
   own terms, any node with every key passes (the first pod of a self-affine group).
2. required anti-affinity: no pod matching a term runs in the node's domain of the term's key;
   a node without the key passes ("node(s) didn't match pod anti-affinity rules").
3. symmetry: no assigned pod whose required anti-affinity term selects the incoming pod runs in
   the node's domain of that term's key ("node(s) didn't satisfy existing pods anti-affinity
   rules").

Score (PreScore prepares it): per topology domain, + weight for each pod matching a preferred
affinity term, - weight for each pod matching a preferred anti-affinity term, and for symmetry
+ ``hardPodAffinityWeight`` per assigned pod whose required affinity selects the incoming pod,
+/- weight per assigned pod whose preferred (anti-)affinity selects it; a node scores the sum over
its domains, normalized min..max to 0..100. ``ignorePreferredTermsOfExistingPods`` skips scoring
for a pod without preferred terms of its own.

Everything is counted per node row by the cache (``Snapshot.matching_pod_counts`` for the
incoming pod's terms, the ``ExistingTerms`` index for assigned pods' terms) and per domain by
``np.bincount`` over ``Snapshot.label_domains``: a cycle costs a few array operations per distinct
term, whatever the number of pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, field_validator

from apis.base import KoordModel
from apis.client.rbac import PolicyRule
from apis.core import Affinity
from apis.types import Int32
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.pod_selector import PodMatcher
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.status import Status
from scheduler.plugins.helper.pod_affinity import (
    AffinityTerm,
    WeightedTerm,
    all_of,
    required_terms,
    topology_keys,
    weighted_terms,
)
from scheduler.plugins.inter_pod_affinity.existing import ExistingTerms, Kind
from scheduler.plugins.inter_pod_affinity.namespaces import NAMESPACES, NamespaceLabels

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "NAME",
    "RBAC",
    "InterPodAffinity",
    "InterPodAffinityArgs",
    "new",
]

NAME = "InterPodAffinity"
RBAC = (
    PolicyRule.watching(NAMESPACES, why="Namespace labels, which pod affinity namespaceSelectors select."),
)

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

FloatArray = npt.NDArray[np.float64]


class InterPodAffinityArgs(KoordModel):
    """kube-scheduler's ``InterPodAffinityArgs``."""

    model_config = ConfigDict(extra="forbid")

    hard_pod_affinity_weight: Int32 = 1
    """Score weight of an assigned pod's required affinity term that selects the incoming pod."""
    ignore_preferred_terms_of_existing_pods: bool = False
    """Score nothing for a pod without preferred terms of its own (assigned pods' terms ignored)."""

    @field_validator("hard_pod_affinity_weight")
    @classmethod
    def _in_range(cls, value: int) -> int:
        if not 0 <= value <= 100:
            raise ValueError(f"Invalid value: {value}: not in valid range [0, 100]")
        return value


# ---- per-domain counting ------------------------------------------------------------------------


class _Domains:
    """A cycle's topology domains per key, padded to the table's row count."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self.size = snapshot.table.row_count
        self._ids: dict[str, tuple[IntArray, int]] = {}

    def ids(self, key: str) -> tuple[IntArray, int]:
        """(domain id per row, -1 without the key; number of domains)."""
        found = self._ids.get(key)
        if found is None:
            ids, values = self._snapshot.label_domains(key)
            if ids.size < self.size:
                ids = np.concatenate([ids, np.full(self.size - ids.size, -1, dtype=np.int64)])
            found = (ids[: self.size], len(values))
            self._ids[key] = found
        return found

    def per_row(self, key: str, weights: npt.NDArray[np.generic]) -> FloatArray:
        """The sum of ``weights`` over each row's domain of ``key`` (0 where the node lacks it)."""
        ids, count = self.ids(key)
        has = ids >= 0
        totals = np.bincount(ids[has], weights=weights[has], minlength=count)
        out = np.zeros(self.size, dtype=np.float64)
        out[has] = totals[ids[has]]
        return out


# ---- cycle state --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FilterState:
    affinity: tuple[AffinityTerm, ...]
    affinity_matcher: PodMatcher | None
    """Pods matching every required affinity term."""
    first_of_group: bool
    """No pod matches all the affinity terms in any domain, and the pod matches them itself."""
    anti_affinity: tuple[tuple[PodMatcher, str], ...]
    forbidden_by_existing: BoolArray | None
    """Rows in a domain where an assigned pod's required anti-affinity selects the pod."""


@dataclass(frozen=True, slots=True)
class _ScoreState:
    scores: FloatArray
    """The raw score of every row."""


PRE_FILTER_KEY = StateKey[_FilterState]("PreFilterInterPodAffinity")
PRE_SCORE_KEY = StateKey[_ScoreState]("PreScoreInterPodAffinity")


def _pod_affinity(pod: PodInfo) -> Affinity | None:
    return pod.pod.spec.affinity


class InterPodAffinity(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ScoreExtensions, EnqueueExtensions
):
    def __init__(self, args: InterPodAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.namespaces = NamespaceLabels()
        handle.subscribe(NAMESPACES, self.namespaces.on_event)

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        # a matching pod going away frees anti-affinity, one arriving satisfies affinity; a node
        # gaining a topology label changes its domain
        return (
            ClusterEvent.POD_ADD
            | ClusterEvent.POD_UPDATE
            | ClusterEvent.POD_DELETE
            | ClusterEvent.NODE_ADD
            | ClusterEvent.NODE_UPDATE
        )

    @staticmethod
    def existing_terms(snapshot: Snapshot) -> ExistingTerms:
        return snapshot.observer(NAME, ExistingTerms)

    def _matcher(self, term: AffinityTerm) -> PodMatcher:
        return term.matcher(self.namespaces.selected(term.namespace_selector))

    def _existing_matching(
        self, snapshot: Snapshot, kind: Kind, pod: PodInfo, size: int
    ) -> Iterable[tuple[AffinityTerm, int, IntArray]]:
        """Assigned pods' distinct terms of ``kind`` that select ``pod``: (term, weight, carriers)."""
        labels = self.namespaces.labels(pod.namespace)
        index = self.existing_terms(snapshot)
        for carried, counts in index.matching(kind, lambda c: c.term.matches(pod, labels), size):
            yield carried.term, carried.weight, counts

    # ---- PreFilter / Filter ----

    def _filter_state(self, pod: PodInfo, snapshot: Snapshot) -> _FilterState:
        affinity = _pod_affinity(pod)
        domains = _Domains(snapshot)
        size = domains.size
        required = required_terms(affinity.pod_affinity if affinity else None, pod)
        anti = required_terms(affinity.pod_anti_affinity if affinity else None, pod)

        matcher: PodMatcher | None = None
        first_of_group = False
        if required:
            matcher = all_of([self._matcher(t) for t in required])
            counts = snapshot.matching_pod_counts(matcher)
            anywhere = np.zeros(size, dtype=np.bool_)
            for key in topology_keys(required):
                anywhere |= domains.ids(key)[0] >= 0
            labels = self.namespaces.labels(pod.namespace)
            first_of_group = not counts[anywhere].any() and all(t.matches(pod, labels) for t in required)

        forbidden: BoolArray | None = None
        carriers: dict[str, npt.NDArray[np.int64]] = {}
        for term, _, counts in self._existing_matching(snapshot, Kind.REQUIRED_ANTI_AFFINITY, pod, size):
            carriers[term.topology_key] = carriers.get(term.topology_key, 0) + counts.astype(np.int64)
        for key, per_row in carriers.items():
            hit = domains.per_row(key, per_row) > 0
            forbidden = hit if forbidden is None else forbidden | hit
        if forbidden is not None and not forbidden.any():
            forbidden = None
        return _FilterState(
            affinity=required,
            affinity_matcher=matcher,
            first_of_group=first_of_group,
            anti_affinity=tuple((self._matcher(t), t.topology_key) for t in anti),
            forbidden_by_existing=forbidden,
        )

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        if _pod_affinity(pod) is None and not self.existing_terms(snapshot).carries(
            Kind.REQUIRED_ANTI_AFFINITY
        ):
            return PreFilterResult(Status.skip())  # what _filter_state would find, without its arrays
        fs = self._filter_state(pod, snapshot)
        if not fs.affinity and not fs.anti_affinity and fs.forbidden_by_existing is None:
            return PreFilterResult(Status.skip())
        state.write(PRE_FILTER_KEY, fs)
        return PreFilterResult()

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        fs = state.get(PRE_FILTER_KEY)
        if fs is None:
            fs = self._filter_state(pod, snapshot)
        domains = _Domains(snapshot)
        feasible = np.ones(rows.size, dtype=np.bool_)
        rejections: list[tuple[str, BoolArray]] = []
        unresolvable: BoolArray | None = None

        if fs.affinity_matcher is not None:
            counts = snapshot.matching_pod_counts(fs.affinity_matcher)
            has_keys = np.ones(rows.size, dtype=np.bool_)
            pods_exist = np.ones(rows.size, dtype=np.bool_)
            for key in topology_keys(fs.affinity):
                has_keys &= domains.ids(key)[0][rows] >= 0
                pods_exist &= domains.per_row(key, counts)[rows] > 0
            satisfied = has_keys if fs.first_of_group else has_keys & pods_exist
            if not satisfied.all():
                unresolvable = ~satisfied
                rejections.append((ERR_REASON_AFFINITY_RULES_NOT_MATCH, unresolvable))
                feasible &= satisfied

        if fs.anti_affinity:
            clash = np.zeros(rows.size, dtype=np.bool_)
            for matcher, key in fs.anti_affinity:
                clash |= domains.per_row(key, snapshot.matching_pod_counts(matcher))[rows] > 0
            clash &= feasible
            if clash.any():
                rejections.append((ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, clash))
                feasible &= ~clash

        if fs.forbidden_by_existing is not None:
            clash = fs.forbidden_by_existing[rows] & feasible
            if clash.any():
                rejections.append((ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, clash))
                feasible &= ~clash

        if not rejections:
            return FilterResult.all_feasible(rows.size)
        return FilterResult(feasible=feasible, rejections=rejections, unresolvable=unresolvable)

    # ---- PreScore / Score ----

    def _scores(self, pod: PodInfo, snapshot: Snapshot) -> FloatArray | None:
        """Every row's raw score, or None when no term counts anywhere (upstream's Skip)."""
        affinity = _pod_affinity(pod)
        preferred = weighted_terms(affinity.pod_affinity if affinity else None, pod)
        preferred_anti = weighted_terms(affinity.pod_anti_affinity if affinity else None, pod)
        if not preferred and not preferred_anti:
            if self.args.ignore_preferred_terms_of_existing_pods:
                return None
            index = self.existing_terms(snapshot)
            hard = self.args.hard_pod_affinity_weight > 0 and index.carries(Kind.REQUIRED_AFFINITY)
            if not (
                hard or index.carries(Kind.PREFERRED_AFFINITY) or index.carries(Kind.PREFERRED_ANTI_AFFINITY)
            ):
                return None  # no term counts anywhere, known without the per-domain arrays
        return self._counted_scores(pod, snapshot, preferred, preferred_anti)

    def _counted_scores(
        self,
        pod: PodInfo,
        snapshot: Snapshot,
        preferred: Sequence[WeightedTerm],
        preferred_anti: Sequence[WeightedTerm],
    ) -> FloatArray | None:
        """``_scores`` from the terms that select ``pod`` (its own preferred ones given)."""
        domains = _Domains(snapshot)
        size = domains.size
        per_key: dict[str, FloatArray] = {}

        def add(key: str, weight: int, counts: IntArray) -> None:
            per_key[key] = per_key.get(key, np.zeros(size, dtype=np.float64)) + weight * counts.astype(
                np.float64
            )

        own: list[tuple[WeightedTerm, int]] = [(w, 1) for w in preferred] + [(w, -1) for w in preferred_anti]
        for weighted, sign in own:
            counts = snapshot.matching_pod_counts(self._matcher(weighted.term))
            if counts.any():
                add(weighted.term.topology_key, sign * weighted.weight, counts)
        hard = self.args.hard_pod_affinity_weight
        if hard > 0:
            for term, _, carriers in self._existing_matching(snapshot, Kind.REQUIRED_AFFINITY, pod, size):
                add(term.topology_key, hard, carriers)
        for kind, sign in ((Kind.PREFERRED_AFFINITY, 1), (Kind.PREFERRED_ANTI_AFFINITY, -1)):
            for term, weight, carriers in self._existing_matching(snapshot, kind, pod, size):
                add(term.topology_key, sign * weight, carriers)
        if not per_key:
            return None
        scores = np.zeros(size, dtype=np.float64)
        for key, weights in per_key.items():
            scores += domains.per_row(key, weights)
        return scores

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status:
        scores = self._scores(pod, snapshot)
        if scores is None:
            return Status.skip()
        state.write(PRE_SCORE_KEY, _ScoreState(scores))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        scored = state.get(PRE_SCORE_KEY)
        if scored is None:
            scores = self._scores(pod, snapshot)
            if scores is None:
                return np.zeros(rows.size, dtype=np.int64)
            scored = _ScoreState(scores)
            state.write(PRE_SCORE_KEY, scored)
        return np.asarray(np.rint(scored.scores[rows]), dtype=np.int64)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        """Upstream's min-max: ``int64(100 * float64(s - min) / float64(max - min))``."""
        if scores.size == 0:
            return scores
        low, high = int(scores.min()), int(scores.max())
        if high == low:
            return np.zeros(scores.size, dtype=np.int64)
        ratio = (scores - low).astype(np.float64) / float(high - low)
        return np.asarray(np.trunc(MAX_NODE_SCORE * ratio), dtype=np.int64)


def new(args: InterPodAffinityArgs | None, handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(args or InterPodAffinityArgs(), handle)
