"""batch-cpu and batch-memory of a node (algorithms.md 10.2.2, 10.2.3, Koordinator v1.4).

Per resource, each result floored at 0:

- ``margin = capacity x (100 - reclaimThresholdPercent) / 100`` (truncated);
- ``sysUsed' = max(systemUsage + host applications of prod or mid priority, reserved)``, where
  ``reserved = max(capacity - allocatable, node.koordinator.sh/reservation)``;
- ``usage``: ``capacity - margin - sysUsed' - HPUsed``;
- ``request``: ``capacity - margin - reserved - HPRequest``;
- ``maxUsageRequest``: ``capacity - margin - sysUsed' - HPMaxUsedReq``;
- then ``min(result, capacity x batch*ThresholdPercent / 100)`` when that percent is set.

"HP" pods are the Running and Pending pods whose class is neither koord-batch nor koord-free. An HP
pod without a metric yet counts with its request (in ``HPMaxUsedReq`` too: Koordinator's node-level
code leaves it out there, algorithms.md 10.8); an LSE pod's CPU counts as its request (it is never
reclaimed). Metrics of pods that are no longer Running or Pending (dangling: deleted, or finished
but still reported) count as used unless the metric says batch or free.
CPU takes ``usage`` or ``maxUsageRequest`` (anything else is ``usage``); memory all three.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.extension.priority import PRIORITY_BATCH, PRIORITY_DEFAULT_VALUES
from apis.extension.qos import QOS_LSE
from apis.slo.sloconfig.colocation import (
    CALCULATE_BY_MAX_USAGE_REQUEST,
    CALCULATE_BY_REQUEST,
    ColocationStrategy,
)
from operators.logic.noderesource.inputs import BATCH_OR_FREE, CpuMem, NodeInputs

__all__ = ["HPSums", "batch_resources", "hp_sums", "trunc_div"]


def trunc_div(a: int, b: int) -> int:
    """Integer division truncated toward zero, as Go divides."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def percent_of(value: int, percent: int) -> int:
    return trunc_div(value * percent, 100)


@dataclass(frozen=True)
class HPSums:
    request: CpuMem
    used: CpuMem
    max_used_request: CpuMem


def hp_sums(inputs: NodeInputs) -> HPSums:
    request = used = max_used_request = CpuMem()
    visited: set[str] = set()
    for pod in inputs.pods:
        visited.add(pod.key)
        if pod.priority in BATCH_OR_FREE:
            continue
        request = request + pod.request
        metric = inputs.pod_usages.get(pod.key)
        if metric is None:
            used = used + pod.request
            max_used_request = max_used_request + pod.request
            continue
        pod_used = CpuMem(pod.request.cpu, metric.usage.memory) if pod.qos == QOS_LSE else metric.usage
        used = used + pod_used
        max_used_request = max_used_request + pod.request.max(pod_used)
    for key, metric in inputs.pod_usages.items():
        if key not in visited and metric.priority not in BATCH_OR_FREE:
            used = used + metric.usage
            max_used_request = max_used_request + metric.usage
    return HPSums(request=request, used=used, max_used_request=max_used_request)


def _one(
    policy: str | None,
    capacity: int,
    margin: int,
    system_used: int,
    reserved: int,
    hp_used: int,
    hp_request: int,
    hp_max: int,
    *,
    request_allowed: bool,
) -> int:
    if policy == CALCULATE_BY_REQUEST and request_allowed:
        result = capacity - margin - reserved - hp_request
    elif policy == CALCULATE_BY_MAX_USAGE_REQUEST:
        result = capacity - margin - max(system_used, reserved) - hp_max
    else:
        result = capacity - margin - max(system_used, reserved) - hp_used
    return max(result, 0)


def batch_resources(inputs: NodeInputs, strategy: ColocationStrategy) -> CpuMem:
    """The node's batch-cpu (milli-cores) and batch-memory (bytes), before CPU normalization."""
    cap = inputs.capacity
    margin = CpuMem(
        percent_of(cap.cpu, 100 - (strategy.cpu_reclaim_threshold_percent or 0)),
        percent_of(cap.memory, 100 - (strategy.memory_reclaim_threshold_percent or 0)),
    )
    system_used = inputs.system_usage + inputs.host_apps_above(PRIORITY_DEFAULT_VALUES[PRIORITY_BATCH])
    reserved = inputs.reserved
    hp = hp_sums(inputs)
    cpu = _one(
        strategy.cpu_calculate_policy,
        cap.cpu,
        margin.cpu,
        system_used.cpu,
        reserved.cpu,
        hp.used.cpu,
        hp.request.cpu,
        hp.max_used_request.cpu,
        request_allowed=False,
    )
    memory = _one(
        strategy.memory_calculate_policy,
        cap.memory,
        margin.memory,
        system_used.memory,
        reserved.memory,
        hp.used.memory,
        hp.request.memory,
        hp.max_used_request.memory,
        request_allowed=True,
    )
    if strategy.batch_cpu_threshold_percent is not None:
        cpu = min(cpu, max(percent_of(cap.cpu, strategy.batch_cpu_threshold_percent), 0))
    if strategy.batch_memory_threshold_percent is not None:
        memory = min(memory, max(percent_of(cap.memory, strategy.batch_memory_threshold_percent), 0))
    return CpuMem(cpu, memory)
