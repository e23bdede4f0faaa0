"""mid-cpu and mid-memory of a node: the v1.6 formula (algorithms.md 10.3).

Dynamic mode (``midReclaimMode`` unset), per resource::

    MidAllocatable  = min(ProdReclaimable, NodeAllocatable x midThresholdPercent/100)
                      + ProdUnallocated x midUnallocatedPercent/100
    ProdReclaimable = min(max(0, prodReclaimableMetric), NodeUnused)

``prodReclaimableMetric`` is what koordlet predicts (``ProdAllocated - ProdPeak x (1 + safeMargin)``,
floored at 0; missing counts as 0), ``NodeUnused = capacity - nodeUsage`` (0 when the NodeMetric has
no node usage) and ``ProdUnallocated = max(capacity - max(kubelet reserved, node.koordinator.sh/reservation,
systemUsage + prod host applications) - requests of the Running/Pending pods that are not mid, batch
or free, 0)``. ``NodeAllocatable`` is the node's ``status.allocatable``, as the release note writes it
(Koordinator's code uses the capacity there).

Static mode (``midReclaimMode: static``): ``min(capacity x midStatic*ReservedPercent/100,
NodeAllocatable x midThresholdPercent/100)``.
"""

from __future__ import annotations

from apis.extension.priority import PRIORITY_DEFAULT_VALUES, PRIORITY_MID
from apis.slo.sloconfig.colocation import MID_RECLAIM_MODE_STATIC, ColocationStrategy
from operators.logic.noderesource.batch import percent_of
from operators.logic.noderesource.inputs import BATCH_OR_FREE, CpuMem, NodeInputs

__all__ = ["mid_resources", "prod_unallocated"]


def _threshold(inputs: NodeInputs, strategy: ColocationStrategy) -> CpuMem:
    alloc = inputs.allocatable
    return CpuMem(
        percent_of(
            alloc.cpu,
            strategy.mid_cpu_threshold_percent if strategy.mid_cpu_threshold_percent is not None else 100,
        ),
        percent_of(
            alloc.memory,
            strategy.mid_memory_threshold_percent
            if strategy.mid_memory_threshold_percent is not None
            else 100,
        ),
    ).floor0()


def prod_unallocated(inputs: NodeInputs) -> CpuMem:
    system_used = inputs.system_usage + inputs.host_apps_above(PRIORITY_DEFAULT_VALUES[PRIORITY_MID])
    reserved = inputs.reserved.max(system_used)
    requested = CpuMem.total(
        pod.request
        for pod in inputs.pods
        if pod.priority not in BATCH_OR_FREE and pod.priority != PRIORITY_MID
    )
    return (inputs.capacity - reserved - requested).floor0()


def mid_resources(inputs: NodeInputs, strategy: ColocationStrategy) -> CpuMem:
    """The node's mid-cpu (milli-cores) and mid-memory (bytes)."""
    cap = inputs.capacity
    threshold = _threshold(inputs, strategy)
    if strategy.mid_reclaim_mode == MID_RECLAIM_MODE_STATIC:
        static = CpuMem(
            percent_of(cap.cpu, strategy.mid_static_cpu_reserved_percent or 0),
            percent_of(cap.memory, strategy.mid_static_memory_reserved_percent or 0),
        ).floor0()
        return static.min(threshold)
    unused = (cap - inputs.node_usage) if inputs.node_usage is not None else CpuMem()
    reclaimable = inputs.prod_reclaimable.floor0().min(unused).floor0()
    unallocated = prod_unallocated(inputs)
    percent = strategy.mid_unallocated_percent or 0
    extra = CpuMem(percent_of(unallocated.cpu, percent), percent_of(unallocated.memory, percent))
    return reclaimable.min(threshold) + extra
