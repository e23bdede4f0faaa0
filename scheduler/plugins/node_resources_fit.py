"""NodeResourcesFit: kube-scheduler's resource fit, vectorized over the node table.

PreFilter turns the pod's requests into a (columns, amounts) vector once; Filter compares it with
``allocatable - requested`` of every candidate row in one numpy expression; Score applies one of
kube-scheduler's three strategies (``pkg/scheduler/framework/plugins/noderesources``):

- ``LeastAllocated``: per resource ``(allocatable - requested) * 100 / allocatable`` (0 when over);
- ``MostAllocated``: per resource ``min(requested, allocatable) * 100 / allocatable``;
- ``RequestedToCapacityRatio``: per resource the broken-linear ``shape`` at the utilization
  ``requested * 100 / allocatable``; only positive resource scores count, the average is rounded;

each averaged with the configured weights over the resources the node has (allocatable > 0), in
integers as Go does. ``requested`` is what the node already holds plus the pod's request, where the
pod's cpu and memory use kube-scheduler's non-zero defaults (100m, 200Mi per container that sets
none), so that request-less pods still spread. An extended resource the pod does not request is not
scored.

One known difference: kube-scheduler also counts the pods already on a node with those defaults
(``NodeInfo.NonZeroRequested``); the node table keeps only actual requests, so a node holding pods
without cpu/memory requests looks emptier here than to kube-scheduler. The cache would need
non-zero cpu/memory columns to close that gap.

The resource-name helpers here (``is_scalar_resource`` ...) are shared with the other resource
plugins.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from apis.base import KoordModel
from apis.core import Container, Pod
from apis.resources import to_int_units
from scheduler.cache.node_table import BoolArray, IntArray, NodeTable
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
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
from scheduler.framework.status import Status

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "NAME",
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

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"

DEFAULT_MILLI_CPU_REQUEST = 100
"""kube-scheduler's ``DefaultMilliCPURequest``: scored cpu of a container that requests none (0.1 core)."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
"""kube-scheduler's ``DefaultMemoryRequest``: scored memory of a container that requests none (200Mi)."""

_INT64_MAX = 2**63 - 1


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


# ---- resource names ---------------------------------------------------------------------------


def is_extended_resource(name: str) -> bool:
    """An extended resource: a domain-prefixed name outside ``kubernetes.io/`` (``nvidia.com/gpu``)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def is_scalar_resource(name: str) -> bool:
    """kube-scheduler's ``IsScalarResourceName``: extended, hugepages, ``kubernetes.io/`` prefixed or
    attachable volumes. These, with cpu, memory, ephemeral-storage and pods, are the resources the
    scheduler accounts; any other name is ignored, as kube-scheduler ignores it."""
    return (
        is_extended_resource(name)
        or name.startswith("hugepages-")
        or "kubernetes.io/" in name
        or name.startswith("attachable-volumes-")
    )


def is_accounted(name: str) -> bool:
    return name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(name)


def insufficient_reason(name: str) -> str:
    return "Too many pods" if name == PODS else f"Insufficient {name}"


# ---- the pod's scored request -----------------------------------------------------------------


def _container_requests(container: Container, defaults: Mapping[str, int]) -> dict[str, int]:
    raw = (container.resources.requests if container.resources else None) or {}
    requests = {name: to_int_units(name, q) for name, q in raw.items()}
    for name, amount in defaults.items():
        if name not in raw:  # unset, not explicitly zero
            requests[name] = amount
    return requests


def non_zero_requests(pod: Pod) -> dict[str, int]:
    """cpu and memory of ``pod`` as kube-scheduler scores them: like ``PodInfo.requests`` (sidecars
    summed, regular init containers as a peak, plus overhead), but every container that sets no cpu
    (memory) request counts ``DEFAULT_MILLI_CPU_REQUEST`` (``DEFAULT_MEMORY_REQUEST``)."""
    defaults = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}
    total = dict.fromkeys(defaults, 0)

    def add(into: dict[str, int], more: Mapping[str, int]) -> None:
        for name in defaults:
            into[name] += more.get(name, 0)

    for container in pod.spec.containers:
        add(total, _container_requests(container, defaults))
    sidecars = dict.fromkeys(defaults, 0)
    init_peak = dict.fromkeys(defaults, 0)
    for init in pod.spec.init_containers or ():
        requests = _container_requests(init, defaults)
        running = dict(sidecars)
        if init.restart_policy == "Always":  # a sidecar keeps running beside what starts after it
            add(sidecars, requests)
            running = dict(sidecars)
        else:
            add(running, requests)
        for name in defaults:
            init_peak[name] = max(init_peak[name], running[name])
    add(total, sidecars)
    for name in defaults:
        total[name] = max(total[name], init_peak[name])
    for name, q in (pod.spec.overhead or {}).items():
        if name in total:
            total[name] += to_int_units(name, q)
    return total


def scored_request(pod: PodInfo, names: Sequence[str]) -> IntArray:
    """The pod's request per name in ``names``: non-zero cpu/memory, the plain request otherwise."""
    non_zero = non_zero_requests(pod.pod) if (CPU in names or MEMORY in names) else {}
    values = [non_zero[n] if n in non_zero else pod.requests.get(n, 0) for n in names]
    return np.asarray(values, dtype=np.int64)


# ---- per-resource scores (vectorized, integer arithmetic as in Go) ------------------------------


def _mul_div(a: IntArray, factor: int, b: IntArray) -> IntArray:
    """``a * factor // b`` for non-negative ``a`` and positive ``b`` without int64 overflow."""
    if a.size and int(a.max()) > _INT64_MAX // max(factor, 1):
        exact = (a.astype(object) * factor) // b.astype(object)
        return np.asarray(exact, dtype=np.int64)
    result: IntArray = (a * factor) // b
    return result


def least_requested_score(requested: IntArray, capacity: IntArray) -> IntArray:
    """``(capacity - requested) * 100 / capacity``; 0 when capacity is 0 or requested exceeds it."""
    ok = (capacity > 0) & (requested <= capacity)
    safe = np.where(capacity > 0, capacity, 1)
    return np.where(ok, _mul_div(np.where(ok, capacity - requested, 0), MAX_NODE_SCORE, safe), 0)


def most_requested_score(requested: IntArray, capacity: IntArray) -> IntArray:
    """``min(requested, capacity) * 100 / capacity``; 0 when capacity is 0."""
    ok = capacity > 0
    safe = np.where(ok, capacity, 1)
    used = np.clip(np.minimum(requested, capacity), 0, None)
    return np.where(ok, _mul_div(np.where(ok, used, 0), MAX_NODE_SCORE, safe), 0)


def _go_div(num: IntArray, den: IntArray | int) -> IntArray:
    """Go's integer division (truncates toward zero) for a positive denominator."""
    quotient = np.abs(num) // den
    result: IntArray = np.where(num < 0, -quotient, quotient).astype(np.int64)
    return result


def broken_linear(utilization: IntArray, shape: Sequence[tuple[int, int]]) -> IntArray:
    """kube-scheduler's ``BuildBrokenLinearFunction`` over an array of utilizations (0..100)."""
    points = np.asarray([u for u, _ in shape], dtype=np.int64)
    scores = np.asarray([s for _, s in shape], dtype=np.int64)
    i = np.searchsorted(points, utilization, side="left")  # first point with utilization <= point
    inner = np.clip(i, 1, len(shape) - 1) if len(shape) > 1 else np.zeros_like(i)
    lo_u, hi_u = points[inner - 1], points[inner]
    lo_s, hi_s = scores[inner - 1], scores[inner]
    span = np.where(hi_u > lo_u, hi_u - lo_u, 1)
    between = lo_s + _go_div((hi_s - lo_s) * (utilization - lo_u), span)
    result: IntArray = np.where(i == 0, scores[0], np.where(i >= len(shape), scores[-1], between))
    return result


# ---- args ---------------------------------------------------------------------------------------


class ResourceSpec(KoordModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    weight: int = 1
    """1..100; 0 (unset) means 1, as kube-scheduler's defaulting does."""


class UtilizationShapePoint(KoordModel):
    model_config = ConfigDict(extra="forbid")

    utilization: int = Field(ge=0, le=100)
    """Percent of the node's allocatable requested, 0..100."""
    score: int = Field(ge=0, le=10)
    """0..10, scaled to 0..100 when scoring."""


class RequestedToCapacityRatioParam(KoordModel):
    model_config = ConfigDict(extra="forbid")

    shape: list[UtilizationShapePoint] = Field(default_factory=list)


def _default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name=CPU, weight=1), ResourceSpec(name=MEMORY, weight=1)]


class ScoringStrategy(KoordModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    resources: list[ResourceSpec] = Field(default_factory=_default_resources)
    """Scored resources and weights; empty means cpu:1, memory:1."""
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None
    """Required for ``RequestedToCapacityRatio``: utilizations strictly increasing."""

    @model_validator(mode="after")
    def _defaults_and_checks(self) -> ScoringStrategy:
        if not self.resources:
            self.resources = _default_resources()
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
        self._shape = tuple(
            (p.utilization, p.score * (MAX_NODE_SCORE // 10)) for p in (ratio.shape if ratio else ())
        )

    @property
    def name(self) -> str:
        return NAME

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
        order = {PODS: 0, CPU: 1, MEMORY: 2, EPHEMERAL_STORAGE: 3}
        names = sorted(
            (n for n, amount in pod.requests.items() if amount > 0 and self._checked(n)),
            key=lambda n: (order.get(n, 4), n),
        )
        cols, amounts = table.request_vector({n: pod.requests[n] for n in names})
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
        including the pod, as ``calculateResourceAllocatableRequest`` returns them."""
        allocatable = np.zeros((rows.size, len(self._names)), dtype=np.int64)
        requested = np.zeros_like(allocatable)
        for i, name in enumerate(self._names):
            col = table.column.get(name)
            if col is None or not is_accounted(name):
                continue
            if pod_requests[i] == 0 and is_scalar_resource(name):
                continue  # an extended resource the pod does not request is not scored
            allocatable[:, i] = table.allocatable[rows, col]
            requested[:, i] = table.requested[rows, col] + pod_requests[i]
        return allocatable, requested

    def _ratio_score(self, allocatable: IntArray, requested: IntArray, weights: IntArray) -> IntArray:
        used = allocatable > 0
        safe = np.where(used, allocatable, 1)
        below = used & (requested > 0) & (requested < allocatable)
        utilization = np.where(
            below, _mul_div(np.where(below, requested, 0), 100, safe), np.where(requested > 0, 100, 0)
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


def new(args: NodeResourcesFitArgs | None, handle: Handle) -> NodeResourcesFit:
    args = args or NodeResourcesFitArgs()
    for name in args.ignored_resources:
        if not _NAME_RE.match(name):
            raise ValueError(f"ignoredResources: {name!r} is not a valid resource name")
    return NodeResourcesFit(args)
