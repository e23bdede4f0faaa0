"""NodeResourcesFit: kube-scheduler's resource fit, vectorized over the node table.

PreFilter turns the pod's requests into a (columns, amounts) vector once; Filter compares it with
``allocatable - requested`` of every candidate row in one numpy expression; Score applies one of
kube-scheduler's three strategies (``pkg/scheduler/framework/plugins/noderesources``):

- ``LeastAllocated``: per resource ``(allocatable - requested) * 100 / allocatable`` (0 when over);
- ``MostAllocated``: per resource ``min(requested, allocatable) * 100 / allocatable``;
- ``RequestedToCapacityRatio``: per resource the broken-linear ``shape`` at the utilization
  ``requested * 100 / allocatable``; only positive resource scores count, the average is rounded;

each averaged with the configured weights over the resources the node has (allocatable > 0), in
integers as Go does. ``requested`` is what the node already holds plus the pod's request. For cpu
and memory both sides use kube-scheduler's non-zero defaults (100m, 200Mi per container that sets
none), so that request-less pods still spread: the pod's ``PodInfo.non_zero`` and the node's
``NodeTable.non_zero`` (``NodeInfo.NonZeroRequested``, the assigned pods only). Other resources use
the real requests. An extended resource the pod does not request is not scored.

The resource-name helpers here (``is_scalar_resource`` ...) are shared with the other resource
plugins.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from apis.base import KoordModel
from scheduler.cache.node_table import NON_ZERO_CPU, NON_ZERO_MEMORY, BoolArray, IntArray, NodeTable
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import RowInputs
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    ClusterEvent,
    FilterPlugin,
    FilterResult,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status
from scheduler.plugins.helper.resources import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    EPHEMERAL_STORAGE,
    FEW_ROWS,
    MEMORY,
    PODS,
    ResourceSpec,
    broken_linear,
    default_resources,
    insufficient_reason,
    is_accounted,
    is_extended_resource,
    is_scalar_resource,
    least_requested_score,
    most_requested_score,
    mul_div,
    non_zero_requests,
    scored_columns,
    scored_request,
)

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "NAME",
    "PLUGIN",
    "NodeResourcesFit",
    "NodeResourcesFitArgs",
    "ResourceSpec",
    "ScoringStrategy",
    "UtilizationShapePoint",
    "is_accounted",
    "is_extended_resource",
    "is_scalar_resource",
    "least_requested_score",
    "most_requested_score",
    "new",
    "non_zero_requests",
    "scored_request",
]

NAME = "NodeResourcesFit"

_NON_ZERO_COLUMN = {CPU: NON_ZERO_CPU, MEMORY: NON_ZERO_MEMORY}
FEW_FILTER_ROWS = 4
"""Filter at most this many rows in Python ints (``_few_filter``, which makes arrays per reason)."""
FEW_SCORE_ROWS = 2 * FEW_ROWS
"""Score at most this many rows in Python ints: two integer operations per resource and row, where
the array path makes some thirty arrays. The mixed workload's classes find 15-30 rows changed per
pod: ``koordctl simulate`` of it took 64-67 us a Score call this way, 83-94 us with ``FEW_ROWS``
(the same runs, a loaded machine). BalancedAllocation's floats cost more per row: it keeps
``FEW_ROWS``."""
_FITS_CAPACITY = 4096
"""Distinct requests whose ``FitState`` is kept (all forgotten at once past it)."""


@dataclass(frozen=True, slots=True)
class FitState:
    """The pod's request vector over the resources Filter checks, and one reason per column."""

    cols: IntArray
    amounts: IntArray
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ScoreState:
    """The pod's scored request per configured scoring resource (non-zero cpu/memory defaults)."""

    requests: IntArray


PRE_FILTER_KEY = StateKey[FitState]("PreFilterNodeResourcesFit")
PRE_SCORE_KEY = StateKey[ScoreState]("PreScoreNodeResourcesFit")


class UtilizationShapePoint(KoordModel):
    model_config = ConfigDict(extra="forbid")

    utilization: int = Field(ge=0, le=100)
    """Percent of the node's allocatable requested, 0..100."""
    score: int = Field(ge=0, le=10)
    """0..10, scaled to 0..100 when scoring."""


class RequestedToCapacityRatioParam(KoordModel):
    model_config = ConfigDict(extra="forbid")

    shape: list[UtilizationShapePoint] = Field(default_factory=list)


class ScoringStrategy(KoordModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    resources: list[ResourceSpec] = Field(default_factory=default_resources)
    """Scored resources and weights; empty means cpu:1, memory:1."""
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None
    """Required for ``RequestedToCapacityRatio``: utilizations strictly increasing."""

    @model_validator(mode="after")
    def _defaults_and_checks(self) -> ScoringStrategy:
        if not self.resources:
            self.resources = default_resources()
        for spec in self.resources:
            if spec.weight == 0:
                spec.weight = 1
            if not 1 <= spec.weight <= 100:
                raise ValueError(f"resource weight of {spec.name} not in valid range [1, 100]")
        if self.type == "RequestedToCapacityRatio":
            shape = self.requested_to_capacity_ratio.shape if self.requested_to_capacity_ratio else []
            if not shape:
                raise ValueError("requestedToCapacityRatio.shape: Required value")
            for prev, point in itertools.pairwise(shape):
                if point.utilization <= prev.utilization:
                    raise ValueError("requestedToCapacityRatio.shape: utilization values must be sorted")
        return self


class NodeResourcesFitArgs(KoordModel):
    """kube-scheduler's ``NodeResourcesFitArgs`` (kubescheduler.config.k8s.io/v1)."""

    model_config = ConfigDict(extra="forbid")

    ignored_resources: list[str] = Field(default_factory=list)
    """Extended resources Filter does not check."""
    ignored_resource_groups: list[str] = Field(default_factory=list)
    """Domains (``example.com``) whose extended resources Filter does not check."""
    scoring_strategy: ScoringStrategy = Field(default_factory=ScoringStrategy)
    """Default: LeastAllocated over cpu:1, memory:1."""

    @model_validator(mode="after")
    def _check_groups(self) -> NodeResourcesFitArgs:
        for group in self.ignored_resource_groups:
            if "/" in group:
                raise ValueError(f"ignoredResourceGroups: {group!r} must not contain '/'")
        return self


# ---- plugin -------------------------------------------------------------------------------------

_NAME_RE = re.compile(
    r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?(/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$"
)


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    def __init__(self, args: NodeResourcesFitArgs) -> None:
        self._ignored = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self._strategy = strategy.type
        self._names = tuple(spec.name for spec in strategy.resources)
        self._weights = np.asarray([spec.weight for spec in strategy.resources], dtype=np.int64)
        ratio = strategy.requested_to_capacity_ratio
        self._fits: dict[tuple[tuple[str, int], ...], FitState] = {}
        self._fits_table: NodeTable | None = None
        self._shape = tuple(
            (p.utilization, p.score * (MAX_NODE_SCORE // 10)) for p in (ratio.shape if ratio else ())
        )

    @property
    def name(self) -> str:
        return NAME

    def row_inputs(self, pod: PodInfo) -> RowInputs:
        """``RowLocal``: it reads the pod and the node's allocatable and requested amounts."""
        return RowInputs.ACCOUNTING

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.NODE_ADD | ClusterEvent.NODE_UPDATE | ClusterEvent.POD_DELETE

    def _checked(self, name: str) -> bool:
        if name == PODS:
            return True
        if not is_accounted(name):
            return False
        if is_extended_resource(name):
            return name not in self._ignored and name.split("/", 1)[0] not in self._ignored_groups
        return True

    # ---- PreFilter / Filter ----

    def fit_state(self, pod: PodInfo, table: NodeTable) -> FitState:
        """The pod's ``FitState``, made once per distinct requests (the table's columns only grow)."""
        if table is not self._fits_table:
            self._fits.clear()
            self._fits_table = table
        key = tuple(pod.requests.items())
        fit = self._fits.get(key)
        if fit is None:
            if len(self._fits) >= _FITS_CAPACITY:
                self._fits.clear()
            fit = self._fits[key] = self._fit_state(pod.requests, table)
        return fit

    def _fit_state(self, requests: dict[str, int], table: NodeTable) -> FitState:
        order = {PODS: 0, CPU: 1, MEMORY: 2, EPHEMERAL_STORAGE: 3}
        names = sorted(
            (n for n, amount in requests.items() if amount > 0 and self._checked(n)),
            key=lambda n: (order.get(n, 4), n),
        )
        cols, amounts = table.request_vector({n: requests[n] for n in names})
        cols.flags.writeable = amounts.flags.writeable = False  # shared by the pods of these requests
        return FitState(cols=cols, amounts=amounts, reasons=tuple(insufficient_reason(n) for n in names))

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        state.write(PRE_FILTER_KEY, self.fit_state(pod, snapshot.table))
        return PreFilterResult()

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        fit = state.get(PRE_FILTER_KEY)
        if fit is None:  # PreFilter disabled: compute it here, as kube-scheduler's fallback does
            fit = self.fit_state(pod, snapshot.table)
            state.write(PRE_FILTER_KEY, fit)
        if fit.cols.size == 0:
            return FilterResult.all_feasible(rows.size)
        if rows.size <= FEW_FILTER_ROWS:
            return _few_filter(fit, snapshot.table, rows)
        short: BoolArray = fit.amounts > snapshot.table.free(rows, fit.cols)  # rows x requested resources
        feasible: BoolArray = np.logical_not(short.any(axis=1))
        rejections = [(fit.reasons[j], short[:, j]) for j in range(fit.cols.size) if short[:, j].any()]
        return FilterResult(feasible=feasible, rejections=rejections)

    # ---- PreScore / Score ----

    def score_state(self, pod: PodInfo) -> ScoreState:
        return ScoreState(requests=scored_request(pod, self._names))

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status:
        scored = self.score_state(pod)
        state.write(PRE_SCORE_KEY, scored)
        if not scored.requests.any():  # a best-effort pod over these resources: nothing to score
            return Status.skip()
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        scored = state.get(PRE_SCORE_KEY)
        if scored is None:
            scored = self.score_state(pod)
            state.write(PRE_SCORE_KEY, scored)
        if rows.size <= FEW_SCORE_ROWS and self._strategy != "RequestedToCapacityRatio":
            return self._few_scores(snapshot.table, rows, scored.requests)
        allocatable, requested = self._allocatable_requested(snapshot.table, rows, scored.requests)
        weights = np.broadcast_to(self._weights, allocatable.shape)
        if self._strategy == "RequestedToCapacityRatio":
            return self._ratio_score(allocatable, requested, weights)
        per_resource = (
            least_requested_score(requested, allocatable)
            if self._strategy == "LeastAllocated"
            else most_requested_score(requested, allocatable)
        )
        used = allocatable > 0
        weight_sum = np.where(used, weights, 0).sum(axis=1)
        total = np.where(used, per_resource * weights, 0).sum(axis=1)
        result: IntArray = np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)
        return result

    def _allocatable_requested(
        self, table: NodeTable, rows: IntArray, pod_requests: IntArray
    ) -> tuple[IntArray, IntArray]:
        """rows x scored resources: allocatable (0 where the resource is not scored) and requested
        including the pod, as ``calculateResourceAllocatableRequest`` returns them (non-zero cpu
        and memory on the node side)."""
        allocatable = np.zeros((rows.size, len(self._names)), dtype=np.int64)
        requested = np.zeros_like(allocatable)
        for i, name, col, request in scored_columns(table, self._names, pod_requests):
            allocatable[:, i] = table.allocatable[rows, col]
            non_zero_col = _NON_ZERO_COLUMN.get(name)
            held = table.requested[rows, col] if non_zero_col is None else table.non_zero[rows, non_zero_col]
            requested[:, i] = held + request
        return allocatable, requested

    def _few_scores(self, table: NodeTable, rows: IntArray, pod_requests: IntArray) -> IntArray:
        """``score`` of LeastAllocated or MostAllocated on a few rows (an equivalence class's changed
        ones), in Python ints: the arrays' integer arithmetic without numpy's cost per call, which
        is most of a call on a few rows."""
        parts = [
            (col, _NON_ZERO_COLUMN.get(name), request, int(self._weights[i]))
            for i, name, col, request in scored_columns(table, self._names, pod_requests)
        ]
        least = self._strategy == "LeastAllocated"
        scores = []
        for row in rows.tolist():
            total = weight_sum = 0
            for col, non_zero_col, request, weight in parts:
                allocatable = int(table.allocatable[row, col])
                if allocatable <= 0:  # a resource the node does not have is not scored
                    continue
                held = (
                    table.requested[row, col] if non_zero_col is None else table.non_zero[row, non_zero_col]
                )
                requested = int(held) + request
                if least:
                    score = (
                        (allocatable - requested) * MAX_NODE_SCORE // allocatable
                        if requested <= allocatable
                        else 0
                    )
                else:
                    score = max(min(requested, allocatable), 0) * MAX_NODE_SCORE // allocatable
                total += score * weight
                weight_sum += weight
            scores.append(total // weight_sum if weight_sum > 0 else 0)
        return np.asarray(scores, dtype=np.int64)

    def _ratio_score(self, allocatable: IntArray, requested: IntArray, weights: IntArray) -> IntArray:
        used = allocatable > 0
        safe = np.where(used, allocatable, 1)
        below = used & (requested > 0) & (requested < allocatable)
        utilization = np.where(
            below, mul_div(np.where(below, requested, 0), 100, safe), np.where(requested > 0, 100, 0)
        )
        utilization = np.where(used & (requested > allocatable), 100, utilization)
        per_resource = broken_linear(utilization, self._shape)
        counted = used & (per_resource > 0)
        weight_sum = np.where(counted, weights, 0).sum(axis=1)
        total = np.where(counted, per_resource * weights, 0).sum(axis=1)
        # Go: int64(math.Round(float64(nodeScore) / float64(weightSum))), half away from zero.
        result: IntArray = np.where(
            weight_sum > 0, (2 * total + weight_sum) // np.maximum(2 * weight_sum, 1), 0
        )
        return result


def _few_filter(fit: FitState, table: NodeTable, rows: IntArray) -> FilterResult:
    """``filter`` on a few rows (an equivalence class's changed ones) in Python ints, without
    numpy's cost per call: ``allocatable - requested`` never wraps (``quantity_range``)."""
    wanted = list(zip(fit.cols.tolist(), fit.amounts.tolist(), strict=True))
    short = [
        [amount > int(table.allocatable[row, col]) - int(table.requested[row, col]) for col, amount in wanted]
        for row in rows.tolist()
    ]
    rejections = [
        (reason, np.array([row_short[j] for row_short in short], dtype=np.bool_))
        for j, reason in enumerate(fit.reasons)
        if any(row_short[j] for row_short in short)
    ]
    feasible = np.array([not any(row_short) for row_short in short], dtype=np.bool_)
    return FilterResult(feasible=feasible, rejections=rejections)


def new(args: NodeResourcesFitArgs | None, handle: Handle) -> NodeResourcesFit:
    args = args or NodeResourcesFitArgs()
    for name in args.ignored_resources:
        if not _NAME_RE.match(name):
            raise ValueError(f"ignoredResources: {name!r} is not a valid resource name")
    return NodeResourcesFit(args)


PLUGIN = PluginSpec(NAME, new, NodeResourcesFitArgs)
