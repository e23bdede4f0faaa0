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

from apis.client.backend import ObjectRef, ResourceType
from apis.client.rbac import PolicyRule
from apis.core import Node
from apis.extension.priority import PRIORITY_PROD
from apis.slo.nodemetric import NodeMetric
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
from scheduler.framework.status import Status
from scheduler.plugins.helper.warnings import ObjectWarnings
from scheduler.plugins.load_aware.args import LoadAwareSchedulingArgs
from scheduler.plugins.load_aware.assigned import AssignedPods
from scheduler.plugins.load_aware.estimator import Estimator, is_daemonset_pod, priority_class
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


@dataclass(frozen=True, slots=True)
class _Allocatable:
    amounts: IntArray
    """rows x tracked resources."""
    nonzero: IntArray
    """``amounts`` with 0 replaced by 1 (a divisor)."""
    divisor: FloatArray
    """``amounts`` as floats with 0 replaced by infinity."""


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
        self._warnings = ObjectWarnings(handle.backend)
        self.loads = LoadTable(args, self.resources, self._report_node)
        self._weights = np.array([args.resource_weights.get(r, 0) for r in self.resources], dtype=np.int64)
        self._total_weight = int(self._weights.sum()) + args.dominant_resource_weight
        self._assigned: AssignedPods | None = None
        self._alloc: tuple[tuple[int, int], _Allocatable] | None = None
        handle.subscribe(NODEMETRICS, self.loads.on_metric_event)

    @property
    def name(self) -> str:
        return NAME

    def _report_node(self, node: Node, problem: str) -> None:
        """A log line and a Warning event on the Node, once per problem."""
        regarding = ObjectRef(kind="Node", name=node.metadata.name or "", uid=node.metadata.uid)
        self._warnings.warn(regarding, problem)

    def events_to_register(self) -> ClusterEvent:
        """A NodeMetric changed (usage fell, a fresh report), a pod left a node, or a node came or
        changed (its thresholds annotation)."""
        return (
            ClusterEvent.CUSTOM_RESOURCE
            | ClusterEvent.POD_DELETE
            | ClusterEvent.NODE_ADD
            | ClusterEvent.NODE_UPDATE
        )

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
        klass = priority_class(pod.pod)
        computed = _PodState(
            skip_filter=is_daemonset_pod(pod.pod),
            prod=klass == PRIORITY_PROD,
            estimate=self.estimator.estimate(pod, klass),
            now=self.clock(),
        )
        state.write(PRE_FILTER_KEY, computed)
        return computed

    def _allocatable(self, snapshot: Snapshot) -> _Allocatable:
        """Every row's allocatable of the tracked resources, kept until a node changes."""
        table = snapshot.table
        key = (snapshot.generation, table.row_count)
        if self._alloc is None or self._alloc[0] != key:
            cols = [table.column_of(r) for r in self.resources]
            amounts = np.ascontiguousarray(table.allocatable[: table.row_count][:, cols])
            self._alloc = (
                key,
                _Allocatable(
                    amounts=amounts,
                    nonzero=np.where(amounts > 0, amounts, 1),
                    divisor=np.where(amounts > 0, amounts.astype(np.float64), np.inf),
                ),
            )
        return self._alloc[1]

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
        evaluated = loads.has_metric[rows]
        rejections: list[tuple[str, BoolArray]] = []
        if self.args.filter_expired_node_metrics:
            expired = evaluated & self._expired(rows, st.now)
            evaluated = evaluated & ~expired
            if not self.args.enable_schedule_when_node_metrics_expired and expired.any():
                rejections.append((REASON_NODE_METRIC_EXPIRED, expired))
        use_prod = loads.uses_prod_thresholds[rows] if st.prod else None
        if use_prod is not None and use_prod.any():
            prod = use_prod[:, None]
            used = np.where(prod, loads.prod_used[rows], loads.filter_used[rows])
            limits = np.where(prod, loads.prod_limits[rows], loads.usage_limits[rows])
        else:
            use_prod = None
            used = loads.filter_used[rows]
            limits = loads.usage_limits[rows]
        # Go's round(used / allocatable * 100) > threshold is exactly this comparison; a resource
        # the node lacks divides by infinity (never over), a threshold of 0 is an infinite limit.
        percent = (used + st.estimate) / self._allocatable(snapshot).divisor[rows] * 100
        over = (percent >= limits) & evaluated[:, None]
        exceeded = over.any(axis=1)
        if exceeded.any():
            first = over.argmax(axis=1)  # one reason per node: the first resource over, in order
            aggregated = loads.aggregated_filter[rows]
            if use_prod is not None:
                aggregated = aggregated & ~use_prod
            for i, resource in enumerate(self.resources):
                at = exceeded & (first == i)
                for reason, mask in (
                    (REASON_USAGE_EXCEED_THRESHOLD, at & ~aggregated),
                    (REASON_AGGREGATED_USAGE_EXCEED_THRESHOLD, at & aggregated),
                ):
                    if mask.any():
                        rejections.append((reason.format(resource), mask))
        if not rejections:
            return FilterResult.all_feasible(rows.size)
        rejected = rejections[0][1]
        for _, mask in rejections[1:]:
            rejected = rejected | mask
        return FilterResult(feasible=~rejected, rejections=rejections)

    # ---- Score -------------------------------------------------------------------------------

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        st = self._state(state, pod, snapshot)
        dominant = self.args.dominant_resource_weight
        if self._total_weight == 0:
            return np.zeros(rows.size, dtype=np.int64)
        loads = self.loads
        prod = st.prod and self.args.score_according_prod_usage
        used = (loads.prod_used if prod else loads.score_used)[rows] + st.estimate
        allocatable = self._allocatable(snapshot)
        alloc = allocatable.amounts[rows]
        # A resource the node lacks (allocatable 0) scores 0 either way.
        least = np.where(used <= alloc, (alloc - used) * MAX_NODE_SCORE // allocatable.nonzero[rows], 0)
        weighted = least @ self._weights
        if dominant:
            weighted = weighted + dominant * least.min(axis=1)
        scores: IntArray = weighted // self._total_weight
        fresh = loads.has_metric[rows] & ~self._expired(rows, st.now)
        scores[~fresh] = 0
        return scores

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
