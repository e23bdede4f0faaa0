"""Resource names, requests as the scorers count them, and kube-scheduler's resource scoring
functions (``noderesources``' least/most allocated and requested-to-capacity shapes), shared by
NodeResourcesFit, NodeResourcesFitPlus and ScarceResourceAvoidance."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from pydantic import ConfigDict

from apis.base import KoordModel
from scheduler.cache.node_table import IntArray, NodeTable
from scheduler.cache.pod_info import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    PodInfo,
    non_zero_requests,
)
from scheduler.framework.interfaces import MAX_NODE_SCORE

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"

__all__ = [
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
    "FEW_ROWS",
    "MEMORY",
    "PODS",
    "ResourceSpec",
    "ScoredColumn",
    "broken_linear",
    "default_resources",
    "insufficient_reason",
    "is_accounted",
    "is_extended_resource",
    "is_scalar_resource",
    "least_requested_score",
    "most_requested_score",
    "mul_div",
    "non_zero_requests",
    "scored_columns",
    "scored_request",
]

_INT64_MAX = 2**63 - 1


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


def scored_request(pod: PodInfo, names: Sequence[str]) -> IntArray:
    """The pod's request per name in ``names``: non-zero cpu/memory, the plain request otherwise."""
    non_zero = {CPU: pod.non_zero[0], MEMORY: pod.non_zero[1]}
    values = [non_zero[n] if n in non_zero else pod.requests.get(n, 0) for n in names]
    return np.asarray(values, dtype=np.int64)


class ScoredColumn(NamedTuple):
    """One resource a resource plugin scores for a pod: its index among the plugin's names, its
    name, its node table column and the pod's request of it."""

    position: int
    name: str
    column: int
    request: int


def scored_columns(table: NodeTable, names: Sequence[str], requests: IntArray) -> list[ScoredColumn]:
    """The resources of ``names`` a Score counts for the pod requesting ``requests`` (by index):
    those the table accounts, less the extended resources the pod does not request."""
    scored = []
    for i, name in enumerate(names):
        column = table.column.get(name)
        if column is None or not is_accounted(name):
            continue
        request = int(requests[i])
        if request == 0 and is_scalar_resource(name):
            continue  # an extended resource the pod does not request is not scored
        scored.append(ScoredColumn(i, name, column, request))
    return scored


FEW_ROWS = 16
"""The resource plugins score at most this many rows in Python numbers rather than arrays (an
equivalence class's changed rows): about where numpy's cost per call (some twenty calls per Score)
stops outweighing Python's per row."""

# ---- per-resource scores (vectorized, integer arithmetic as in Go) ------------------------------


def mul_div(a: IntArray, factor: int, b: IntArray) -> IntArray:
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
    return np.where(ok, mul_div(np.where(ok, capacity - requested, 0), MAX_NODE_SCORE, safe), 0)


def most_requested_score(requested: IntArray, capacity: IntArray) -> IntArray:
    """``min(requested, capacity) * 100 / capacity``; 0 when capacity is 0."""
    ok = capacity > 0
    safe = np.where(ok, capacity, 1)
    used = np.clip(np.minimum(requested, capacity), 0, None)
    return np.where(ok, mul_div(np.where(ok, used, 0), MAX_NODE_SCORE, safe), 0)


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
    """kube-scheduler's ``ResourceSpec``: a scored resource and its weight."""

    model_config = ConfigDict(extra="forbid")

    name: str
    weight: int = 1
    """0 (unset) means 1, as kube-scheduler's defaulting does."""


def default_resources() -> list[ResourceSpec]:
    """kube-scheduler's ``defaultResourceSpec``: cpu and memory, weight 1 each."""
    return [ResourceSpec(name=CPU, weight=1), ResourceSpec(name=MEMORY, weight=1)]
