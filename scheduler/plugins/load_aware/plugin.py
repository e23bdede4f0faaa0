"""LoadAwareScheduling: keep pods off nodes whose measured usage (NodeMetric, written by koordlet)
plus the estimate of pods placed since would exceed a threshold, and prefer the least used nodes
(Koordinator's plugin of that name; algorithms 7).

Filter: DaemonSet pods pass. A node without a NodeMetric passes (koordlet is not installed
there). An expired NodeMetric (no ``updateTime``, or older than ``nodeMetricExpirationSeconds``)
rejects the pod with ``filterExpiredNodeMetrics`` and without
``enableScheduleWhenNodeMetricsExpired`` (the defaults), and passes otherwise. Else, per
resource with a threshold, ``round(estimated / allocatable * 100) > threshold`` rejects: prod
pods against ``prodUsageThresholds`` (prod usage), other pods against the aggregated thresholds
when configured, else ``usageThresholds``.

Score (no normalization): ``(sum_r w_r * least_r + D * min_r least_r) / (sum_r w_r + D)`` over
the estimated usage, with ``least = (allocatable - used) * 100 / allocatable``; 0 without a fresh
NodeMetric.

Pods placed by this scheduler are seen at once (the cache's assume tells the plugin's pod
index), so a burst of pods within one report interval is estimated rather than all sent to the
node that looked idle (Koordinator's podAssignCache).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from apis.slo.nodemetric import NodeMetric
from scheduler.backend.base import ResourceType
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
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
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.rbac import PolicyRule
from scheduler.framework.status import Status
from scheduler.plugins.load_aware.args import LoadAwareSchedulingArgs
from scheduler.plugins.load_aware.assigned import AssignedPods
from scheduler.plugins.load_aware.estimator import Estimator, is_daemonset_pod, is_prod
from scheduler.plugins.load_aware.load_table import FloatArray, LoadTable

__all__ = [
    "NAME",
    "NODEMETRICS",
    "RBAC",
    "REASON_AGGREGATED_USAGE_EXCEED_THRESHOLD",
    "REASON_NODE_METRIC_EXPIRED",
    "REASON_USAGE_EXCEED_THRESHOLD",
    "LoadAwareScheduling",
    "new",
]

NAME = "LoadAwareScheduling"
NODEMETRICS = ResourceType.of(NodeMetric)
RBAC = (PolicyRule.watching(NODEMETRICS, why="Node and pod usage reported by koordlet."),)

REASON_NODE_METRIC_EXPIRED = "node(s) nodeMetric expired"
REASON_USAGE_EXCEED_THRESHOLD = "node(s) {} usage exceed threshold"
REASON_AGGREGATED_USAGE_EXCEED_THRESHOLD = "node(s) {} aggregated usage exceed threshold"


@dataclass(frozen=True, slots=True)
class _PodState:
    """Koordinator v1.7's PreFilter cache: what a cycle needs about its pod, computed once."""

    skip_filter: bool
    """A DaemonSet pod: the filter lets it pass everywhere."""
    prod: bool
    estimate: IntArray
    now: float


PRE_FILTER_KEY = StateKey[_PodState]("LoadAwareScheduling/preFilter")


def _go_round(values: FloatArray) -> FloatArray:
    """Go's ``math.Round`` of non-negative floats (half away from zero)."""
    floor = np.floor(values)
    rounded: FloatArray = floor + (values - floor >= 0.5)
    return rounded


class LoadAwareScheduling(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin, EnqueueExtensions):
    def __init__(
        self, args: LoadAwareSchedulingArgs, handle: Handle, wall_clock: Callable[[], float] = time.time
    ) -> None:
        self.args = args
        self.handle = handle
        self.clock = wall_clock
        """Wall time: NodeMetric update times and pod conditions are wall-clock timestamps."""
        self.resources = args.tracked_resources()
        self.estimator = Estimator(args, self.resources)
        self.loads = LoadTable(args, self.resources)
        self._weights = np.array([args.resource_weights.get(r, 0) for r in self.resources], dtype=np.int64)
        self._assigned: AssignedPods | None = None
        handle.subscribe(NODEMETRICS, self.loads.on_metric_event)

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        """A NodeMetric changed (usage fell, a fresh report), or a pod left a node."""
        return ClusterEvent.CUSTOM_RESOURCE | ClusterEvent.POD_DELETE | ClusterEvent.NODE_ADD

    def assigned(self, snapshot: Snapshot) -> AssignedPods:
        """This plugin's index of assigned pods, fed by the cache from its first use on."""
        if self._assigned is None:
            table = snapshot.table
            self._assigned = snapshot.observer(
                f"{NAME}@{id(self)}",
                lambda: AssignedPods(table, self.estimator, self.clock, self.loads.changed),
            )
        return self._assigned

    def _state(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> _PodState:
        found = state.get(PRE_FILTER_KEY)
        if found is not None:
            return found
        self.loads.refresh(snapshot, self.assigned(snapshot))
        computed = _PodState(
            skip_filter=is_daemonset_pod(pod.pod),
            prod=is_prod(pod.pod),
            estimate=self.estimator.estimate(pod),
            now=self.clock(),
        )
        state.write(PRE_FILTER_KEY, computed)
        return computed

    def _columns(self, snapshot: Snapshot) -> IntArray:
        table = snapshot.table
        return np.fromiter(
            (table.column_of(r) for r in self.resources), dtype=np.int64, count=len(self.resources)
        )

    def _expired(self, rows: IntArray, now: float) -> BoolArray:
        age = now - self.loads.update_time[rows]
        expired: BoolArray = age >= self.args.node_metric_expiration_seconds
        return expired

    # ---- PreFilter / Filter ------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        self._state(state, pod, snapshot)
        return PreFilterResult()

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        st = self._state(state, pod, snapshot)
        if st.skip_filter:
            return FilterResult.all_feasible(rows.size)
        loads = self.loads
        has = loads.has_metric[rows]
        evaluated = has.copy()
        rejections: list[tuple[str, BoolArray]] = []
        if self.args.filter_expired_node_metrics:
            expired = has & self._expired(rows, st.now)
            evaluated &= ~expired
            if not self.args.enable_schedule_when_node_metrics_expired and expired.any():
                rejections.append((REASON_NODE_METRIC_EXPIRED, expired))
        prod_thresholds = loads.prod_thresholds[rows]
        use_prod = np.zeros(rows.size, dtype=np.bool_)
        if st.prod:
            use_prod |= (prod_thresholds > 0).any(axis=1)
        thresholds = np.where(use_prod[:, None], prod_thresholds, loads.usage_thresholds[rows])
        used = np.where(use_prod[:, None], loads.prod_used[rows], loads.filter_used[rows]) + st.estimate
        allocatable = snapshot.table.allocatable[:, self._columns(snapshot)][rows]
        with np.errstate(divide="ignore", invalid="ignore"):
            percent = _go_round(used / np.where(allocatable > 0, allocatable, 1) * 100)
        over = evaluated[:, None] & (thresholds > 0) & (allocatable > 0) & (percent > thresholds)
        exceeded = over.any(axis=1)
        if exceeded.any():
            first = over.argmax(axis=1)  # one reason per node: the first resource over, in order
            aggregated = ~use_prod & loads.aggregated_filter[rows]
            for i, resource in enumerate(self.resources):
                at = exceeded & (first == i)
                for reason, mask in (
                    (REASON_USAGE_EXCEED_THRESHOLD, at & ~aggregated),
                    (REASON_AGGREGATED_USAGE_EXCEED_THRESHOLD, at & aggregated),
                ):
                    if mask.any():
                        rejections.append((reason.format(resource), mask))
        rejected = np.zeros(rows.size, dtype=np.bool_)
        for _, mask in rejections:
            rejected |= mask
        return FilterResult(feasible=~rejected, rejections=rejections)

    # ---- Score -------------------------------------------------------------------------------

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        st = self._state(state, pod, snapshot)
        dominant = self.args.dominant_resource_weight
        total_weight = int(self._weights.sum()) + dominant
        if total_weight == 0:
            return np.zeros(rows.size, dtype=np.int64)
        loads = self.loads
        prod = st.prod and self.args.score_according_prod_usage
        used = (loads.prod_used if prod else loads.score_used)[rows] + st.estimate
        allocatable = snapshot.table.allocatable[:, self._columns(snapshot)][rows]
        fits = (allocatable > 0) & (used <= allocatable)
        least = np.where(fits, (allocatable - used) * MAX_NODE_SCORE // np.where(fits, allocatable, 1), 0)
        weighted = least @ self._weights
        if dominant:
            weighted = weighted + dominant * least.min(axis=1)
        scores: IntArray = weighted // total_weight
        fresh = loads.has_metric[rows] & ~self._expired(rows, st.now)
        return np.where(fresh, scores, 0).astype(np.int64)

    # ---- Reserve -----------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """The cache's assume has told the pod index already; this keeps the assignment when a
        profile reserves without it (and is where Koordinator's configuration enables us)."""
        self.assigned(self.handle.snapshot()).assign(pod, node)
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.assigned(self.handle.snapshot()).unassign(pod.uid, node)


def new(args: LoadAwareSchedulingArgs | None, handle: Handle) -> LoadAwareScheduling:
    return LoadAwareScheduling(args or LoadAwareSchedulingArgs(), handle)
