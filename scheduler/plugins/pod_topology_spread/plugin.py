"""PodTopologySpread: kube-scheduler v1.35's plugin of that name.

PreFilter/Filter (``whenUnsatisfiable: DoNotSchedule``): per constraint, matching pods are counted
per domain over the nodes that take part (every constraint's topology key present, then the
constraint's node inclusion policies); a node fits when, for every constraint, its domain's count
plus one if the pod itself matches, minus the global minimum (0 when fewer domains take part than
``minDomains``), is at most ``maxSkew``. A node lacking a topology key is rejected as unresolvable.

PreScore/Score (``ScheduleAnyway``, and the default constraints of a pod without any): a node's
score is, per constraint, the matching pods of its domain (of the node itself for
``kubernetes.io/hostname``) weighted by ``log(domains + 2)`` plus ``maxSkew - 1``, rounded;
NormalizeScore reverses it to 0..100 (fewest matching pods: 100). Nodes lacking a topology key
score 0, except under the system defaults, where a node without a zone still spreads by hostname.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from apis.client.rbac import PolicyRule
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.per_pod_version import PerPodVersion
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import GANG_PLAN, GangSpreadSource, SkipReads
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    ClusterEvent,
    FilterPlugin,
    FilterResult,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.status import Status
from scheduler.plugins.pod_topology_spread.args import (
    DO_NOT_SCHEDULE,
    HOSTNAME_KEY,
    SCHEDULE_ANYWAY,
    PodTopologySpreadArgs,
)
from scheduler.plugins.pod_topology_spread.constraints import (
    Constraint,
    InvalidConstraint,
    compile_constraints,
)
from scheduler.plugins.pod_topology_spread.counting import DomainCounts, NodeMasks, domain_counts
from scheduler.plugins.pod_topology_spread.defaults_memo import DefaultsMemo
from scheduler.plugins.pod_topology_spread.workloads import WORKLOADS_RBAC, Workloads
from scheduler.solver.problem import SpreadConstraint

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "NAME",
    "RBAC",
    "PodTopologySpread",
    "new",
]

NAME = "PodTopologySpread"
RBAC: tuple[PolicyRule, ...] = WORKLOADS_RBAC

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"


@dataclass(frozen=True, slots=True)
class _HardConstraint:
    constraint: Constraint
    domains: DomainCounts
    min_match: int
    self_match: int


@dataclass(frozen=True, slots=True)
class _FilterState:
    constraints: tuple[_HardConstraint, ...]


@dataclass(slots=True)
class _ScoreState:
    constraints: tuple[Constraint, ...]
    domains: tuple[DomainCounts | None, ...]
    """Per constraint: counts per domain (None for hostname: counted per node in Score)."""
    weights: tuple[float, ...]
    ignored: BoolArray
    """Full-length: rows that lack a required topology key (score 0)."""
    namespace: str
    scored_ignored: BoolArray | None = None
    """``ignored`` for the rows of the last Score call (NormalizeScore reads it)."""


PRE_FILTER_KEY = StateKey[_FilterState]("PreFilterPodTopologySpread")
PRE_SCORE_KEY = StateKey[_ScoreState]("PreScorePodTopologySpread")


class PodTopologySpread(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ScoreExtensions, GangSpreadSource
):
    def __init__(self, args: PodTopologySpreadArgs, handle: Handle) -> None:
        self._defaults = args.defaults()
        self._system_defaulted = args.defaulting_type == "System"
        self._workloads = Workloads()
        self._kept_defaults = DefaultsMemo(self._default_constraints, lambda: self._workloads.version)
        if self._defaults:  # only default constraints need the owners' selectors
            for resource in self._workloads.resources():
                handle.subscribe(resource, self._workloads.listener(resource))

    @property
    def name(self) -> str:
        return NAME

    @property
    def pre_filter_skip_reads(self) -> SkipReads | None:
        """``SkipByClass``: without DoNotSchedule defaults, PreFilter skips exactly the pods whose
        spec has no spread constraints; a DoNotSchedule default's selector reads the pod's owners."""
        if any(c.when_unsatisfiable == DO_NOT_SCHEDULE for c in self._defaults):
            return None
        return SkipReads.SPEC

    def events_to_register(self) -> ClusterEvent:
        return (
            ClusterEvent.POD_ADD
            | ClusterEvent.POD_UPDATE
            | ClusterEvent.POD_DELETE
            | ClusterEvent.NODE_ADD
            | ClusterEvent.NODE_UPDATE
            | ClusterEvent.NODE_DELETE
        )

    def constraints(self, pod: PodInfo, action: str) -> tuple[Constraint, ...]:
        """The pod's own constraints for ``action``, else the defaults with the pod's default
        selector (none when that selector is empty). Raises ``InvalidConstraint``."""
        own = pod.pod.spec.topology_spread_constraints
        if own:
            return compile_constraints(own, pod, action)
        if not any(c.when_unsatisfiable == action for c in self._defaults):
            return ()
        return self._kept_defaults.constraints(pod, action)

    def _default_constraints(self, pod: PodInfo, action: str) -> tuple[Constraint, ...]:
        """The defaults with the pod's default selector (none when that selector is empty)."""
        selector = self._workloads.default_selector(pod)
        if not selector.requirements:
            return ()
        return compile_constraints(self._defaults, pod, action, selector)

    # ---- PreFilter / Filter ----

    def filter_state(self, pod: PodInfo, snapshot: Snapshot) -> _FilterState:
        """Per DoNotSchedule constraint: counts per domain, global minimum, self match."""
        constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        if not constraints:
            return _FilterState(())
        masks = NodeMasks(snapshot, pod, snapshot.table.row_count)
        base = masks.exists & masks.has_keys(constraints)
        hard = []
        for c in constraints:
            domains = domain_counts(snapshot, c, pod.namespace, masks.included(c, base), masks.size)
            self_match = int(c.selector.matches(pod.labels))
            hard.append(_HardConstraint(c, domains, _global_min(domains, c), self_match))
        return _FilterState(tuple(hard))

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        try:
            fs = self.filter_state(pod, snapshot)
        except InvalidConstraint as exc:
            return PreFilterResult(Status.error(f"get constraints from pod: {exc}"))
        if not fs.constraints:
            return PreFilterResult(Status.skip())
        state.write(PRE_FILTER_KEY, fs)
        return PreFilterResult()

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        fs = state.get(PRE_FILTER_KEY)
        if fs is None:
            try:
                fs = self.filter_state(pod, snapshot)
            except InvalidConstraint as exc:
                return FilterResult(feasible=np.zeros(rows.size, dtype=np.bool_), error=str(exc))
        if not fs.constraints:
            return FilterResult.all_feasible(rows.size)
        rest_of_plan = state.get(GANG_PLAN)
        if rest_of_plan is not None:
            fs = _with_planned(fs, rest_of_plan(), pod, snapshot)
        missing = np.zeros(rows.size, dtype=np.bool_)
        skewed = np.zeros(rows.size, dtype=np.bool_)
        for hard in fs.constraints:
            undecided = ~(missing | skewed)
            domain = hard.domains.domain_of[rows]
            missing |= undecided & (domain < 0)
            matched = hard.domains.counts[np.maximum(domain, 0)] if hard.domains.counts.size else 0
            skew = matched + hard.self_match - hard.min_match
            skewed |= undecided & (domain >= 0) & (skew > hard.constraint.max_skew)
        feasible = ~(missing | skewed)
        return FilterResult(
            feasible=feasible,
            rejections=[
                (ERR_REASON_NODE_LABEL_NOT_MATCH, missing),
                (ERR_REASON_CONSTRAINTS_NOT_MATCH, skewed),
            ],
            unresolvable=missing,
        )

    # ---- gangs ----

    def gang_spread(self, members: Sequence[PodInfo], snapshot: Snapshot) -> tuple[SpreadConstraint, ...]:
        """Each distinct DoNotSchedule constraint of ``members``: the members that carry it (alike
        in what decides its domains), the members its selector counts, and the domains with the
        pods already in them, as Filter counts them."""
        states: dict[str, tuple[_FilterState, list[str]]] = {}
        for member in members:
            signature = _spread_signature_of(member)
            if signature not in states:
                try:
                    states[signature] = (self.filter_state(member, snapshot), [])
                except InvalidConstraint:
                    continue  # PreFilter rejects the member itself
            states[signature][1].append(member.uid)
        names = snapshot.table.names
        result: list[SpreadConstraint] = []
        for fs, carriers in states.values():
            namespace = next(m.namespace for m in members if m.uid == carriers[0])
            for hard in fs.constraints:
                domains = hard.domains
                taking = domains.taking.tolist()
                result.append(
                    SpreadConstraint(
                        name=f"{len(result)}:{hard.constraint.topology_key}",
                        max_skew=hard.constraint.max_skew,
                        domains={names[r]: domains.values[domains.domain_of[r]] for r in taking},
                        existing={
                            domains.values[d]: int(domains.counts[d]) for d in np.flatnonzero(domains.present)
                        },
                        constrained=frozenset(carriers),
                        matching=frozenset(
                            m.uid
                            for m in members
                            if m.namespace == namespace and hard.constraint.selector.matches(m.labels)
                        ),
                        min_domains=hard.constraint.min_domains,
                    )
                )
        return tuple(result)

    # ---- PreScore / Score ----

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status:
        if snapshot.node_count() == 0:
            return Status.skip()
        try:
            constraints = self.constraints(pod, SCHEDULE_ANYWAY)
        except InvalidConstraint as exc:
            return Status.error(f"calculating preScoreState: {exc}")
        if not constraints:
            return Status.skip()
        # Only the pod's own constraints and List defaults require every key: under the system
        # defaults a node without a zone label still spreads by hostname.
        require_all = bool(pod.pod.spec.topology_spread_constraints) or not self._system_defaulted
        masks = NodeMasks(snapshot, pod, snapshot.table.row_count)
        has_keys = masks.has_keys(constraints)
        ignored = np.zeros(masks.size, dtype=np.bool_)
        if require_all:
            ignored[rows] = ~has_keys[rows]
        scored_rows = rows[~ignored[rows]]
        base = masks.exists & has_keys if require_all else masks.exists
        domains: list[DomainCounts | None] = []
        weights: list[float] = []
        for c in constraints:
            if c.topology_key == HOSTNAME_KEY:
                domains.append(None)
                weights.append(math.log(scored_rows.size + 2))
                continue
            counted = domain_counts(snapshot, c, pod.namespace, masks.included(c, base), masks.size)
            weights.append(math.log(_domains_among(snapshot, c.topology_key, scored_rows) + 2))
            domains.append(counted)
        state.write(
            PRE_SCORE_KEY, _ScoreState(constraints, tuple(domains), tuple(weights), ignored, pod.namespace)
        )
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        ss = state.get(PRE_SCORE_KEY)
        if ss is None:  # Score enabled without PreScore
            if not self.pre_score(state, pod, snapshot, rows).ok:
                return np.zeros(rows.size, dtype=np.int64)
            ss = state.read(PRE_SCORE_KEY)
        total = np.zeros(rows.size, dtype=np.float64)
        for c, counted, weight in zip(ss.constraints, ss.domains, ss.weights, strict=True):
            if counted is None:  # hostname: the node's own matching pods
                has_key = snapshot.label_mask(c.topology_key)[rows]
                per_node = snapshot.matching_pod_counts(c.matcher(ss.namespace))[rows]
                total += np.where(has_key, per_node * weight + (c.max_skew - 1), 0.0)
                continue
            domain = counted.domain_of[rows]
            cnt = counted.counts[np.maximum(domain, 0)] if counted.counts.size else np.zeros(rows.size)
            total += np.where(domain >= 0, cnt * weight + (c.max_skew - 1), 0.0)
        ignored = ss.ignored[rows]
        ss.scored_ignored = ignored
        scores: IntArray = np.where(ignored, 0, np.floor(total + 0.5)).astype(np.int64)  # Go's math.Round
        return scores

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        ss = state.get(PRE_SCORE_KEY)
        ignored = ss.scored_ignored if ss is not None and ss.scored_ignored is not None else None
        if ignored is None or ignored.size != scores.size:
            ignored = np.zeros(scores.size, dtype=np.bool_)
        valid = scores[~ignored]
        if valid.size == 0:
            return np.zeros(scores.size, dtype=np.int64)
        low, high = int(valid.min()), int(valid.max())
        if high == 0:
            result: IntArray = np.where(ignored, 0, MAX_NODE_SCORE).astype(np.int64)
            return result
        result = np.where(ignored, 0, MAX_NODE_SCORE * (high + low - scores) // high).astype(np.int64)
        return result


def _global_min(domains: DomainCounts, constraint: Constraint) -> int:
    """The smallest count over the domains that take part; 0 while they are fewer than minDomains."""
    present = int(np.count_nonzero(domains.present))
    return int(domains.counts[domains.present].min()) if present >= max(constraint.min_domains, 1) else 0


def _with_planned(
    fs: _FilterState, plan: Mapping[str, tuple[PodInfo, str]], pod: PodInfo, snapshot: Snapshot
) -> _FilterState:
    """``fs`` with the gang's other planned members counted where the plan puts them: the Filter
    then checks the state after the whole gang, the rule the placement solver kept."""
    rows = snapshot.table.row
    hard = []
    for h in fs.constraints:
        domains = h.domains
        counts = domains.counts.copy()
        for member, node in plan.values():
            row = rows.get(node)
            if (
                row is None
                or row >= domains.included.size
                or not domains.included[row]
                or member.namespace != pod.namespace
                or not h.constraint.selector.matches(member.labels)
            ):
                continue
            counts[domains.domain_of[row]] += 1
        planned = dataclasses.replace(domains, counts=counts)
        hard.append(_HardConstraint(h.constraint, planned, _global_min(planned, h.constraint), h.self_match))
    return _FilterState(tuple(hard))


def _spread_signature(pod: PodInfo) -> str:
    """What decides a pod's DoNotSchedule constraints and their domains (not whether the pod
    matches them): namespace, constraints, the labels ``matchLabelKeys`` read (all labels and the
    owners for default constraints, whose selector comes from the Services and controllers), node
    selector, affinity and tolerations. Members alike in these share one constraint."""
    spec = pod.pod.spec
    constraints = spec.topology_spread_constraints or ()
    if constraints:
        keys = {k for c in constraints for k in c.match_label_keys or ()}
        labels = {k: v for k, v in pod.labels.items() if k in keys}
        owners = ""
    else:
        labels = pod.labels
        owners = json.dumps([o.model_dump() for o in pod.pod.metadata.owner_references or ()], sort_keys=True)
    parts = [
        pod.namespace,
        json.dumps(labels, sort_keys=True),
        owners,
        json.dumps([c.model_dump(exclude_none=True) for c in constraints], sort_keys=True),
        json.dumps(spec.node_selector or {}, sort_keys=True),
        spec.affinity.model_dump_json(exclude_none=True) if spec.affinity else "",
        json.dumps([t.model_dump(exclude_none=True) for t in spec.tolerations or ()], sort_keys=True),
    ]
    return "\x00".join(parts)


_spread_signature_of = PerPodVersion(_spread_signature)


def _domains_among(snapshot: Snapshot, key: str, rows: IntArray) -> int:
    """Distinct values of ``key`` over ``rows``; a node lacking it counts as the value "" (as
    upstream's map lookup reads it)."""
    ids, values = snapshot.label_domains(key)
    domain = np.full(rows.size, -1, dtype=np.int64)
    inside = rows < ids.size
    domain[inside] = ids[rows[inside]]
    if "" in values:
        domain[domain < 0] = values.index("")
    return int(np.unique(domain).size)


def new(args: PodTopologySpreadArgs | None, handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(args or PodTopologySpreadArgs(), handle)
