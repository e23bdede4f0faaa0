"""NUMA-level batch resources: the batch formula run per NodeResourceTopology zone (algorithms.md 10.2.4
step 4, Koordinator's ``batchresource`` plugin ``calculateOnNUMALevel``).

The zones are the NRT's ``Node`` zones named ``node-<id>``, taken when at least one of them carries
``cpu`` or ``memory`` (koordlet has reported the node's layout); a zone missing one counts 0 of it.
NUMA-level usage is not reported, so per zone, with ``n`` zones and every split rounded up
(milli-cores, bytes):

- the zone's ``allocatable`` stands for the node capacity (margin and thresholds are taken of it);
- ``systemUsed`` (system usage plus Prod/Mid host applications) and ``reserved`` are split evenly;
- each HP pod's request and usage are split evenly over the NUMA nodes of its
  ``scheduling.koordinator.sh/resource-status`` ``numaNodeResources`` that are zones of the NRT, or
  over all zones when it names none of them (no annotation, not bound, or malformed);
- dangling pod metrics are split evenly over all zones.

Then each zone goes through the node formula (``batch.batch_formula``), with the node-level rules
for pods without metrics (their request, under every policy), LSE CPU and batch/free pods, and
batch-cpu is scaled by the node's CPU normalization ratio as the node's is.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.extension.colocation import BATCH_CPU, BATCH_MEMORY
from apis.extension.qos import QOS_LSE
from apis.quantity import Format, Quantity
from apis.slo.sloconfig.colocation import ColocationStrategy
from apis.topology import NodeResourceTopology
from operators.logic.noderesource.batch import HPSums, batch_formula, system_used
from operators.logic.noderesource.inputs import BATCH_OR_FREE, CpuMem, NodeInputs
from operators.logic.noderesource.node_resources import (
    Outcome,
    cpu_normalization_ratio,
    normalized_batch_cpu,
)

__all__ = ["ZONE_RESOURCES", "NumaZone", "numa_zones", "zone_batch_resources", "zone_outcome"]

ZONE_RESOURCES: tuple[str, ...] = (BATCH_CPU, BATCH_MEMORY)
"""The zone resources koord-manager owns on the NRT; every other zone resource is left as it is."""


@dataclass(frozen=True)
class NumaZone:
    name: str
    numa_id: int
    allocatable: CpuMem


def numa_zones(nrt: NodeResourceTopology) -> tuple[NumaZone, ...]:
    """The NUMA zones by id; empty when none of them carries cpu or memory."""
    zones = sorted(nrt.numa_zones().items())
    if not any(z.resource("cpu") or z.resource("memory") for _, z in zones):
        return ()
    return tuple(
        NumaZone(
            name=zone.name,
            numa_id=numa_id,
            allocatable=CpuMem.of({r.name: r.allocatable for r in zone.resources or ()}),
        )
        for numa_id, zone in zones
    )


def _split(value: CpuMem, parts: int) -> CpuMem:
    """``value / parts`` rounded up, as Koordinator's ``DivideResourceList``."""
    return CpuMem(-(-value.cpu // parts), -(-value.memory // parts))


def zone_batch_resources(
    inputs: NodeInputs, zones: tuple[NumaZone, ...], strategy: ColocationStrategy
) -> dict[str, CpuMem]:
    """Zone name -> batch cpu (milli-cores) and memory (bytes), before CPU normalization."""
    n = len(zones)
    if n == 0:
        return {}
    index = {zone.numa_id: i for i, zone in enumerate(zones)}
    request = [CpuMem()] * n
    used = [CpuMem()] * n
    max_used = [CpuMem()] * n
    visited: set[str] = set()
    for pod in inputs.pods:
        visited.add(pod.key)
        if pod.priority in BATCH_OR_FREE:
            continue
        targets = [index[numa] for numa in pod.numa_nodes if numa in index] or list(range(n))
        pod_request = _split(pod.request, len(targets))
        metric = inputs.pod_usages.get(pod.key)
        if metric is None:
            pod_used = pod_max = pod_request
        else:
            usage = _split(metric.usage, len(targets))
            pod_used = CpuMem(pod_request.cpu, usage.memory) if pod.qos == QOS_LSE else usage
            pod_max = pod_request.max(usage)
        for i in targets:
            request[i] = request[i] + pod_request
            used[i] = used[i] + pod_used
            max_used[i] = max_used[i] + pod_max
    for key, metric in inputs.pod_usages.items():
        if key in visited or metric.priority in BATCH_OR_FREE:
            continue
        share = _split(metric.usage, n)
        used = [u + share for u in used]
        max_used = [m + share for m in max_used]
    system = _split(system_used(inputs), n)
    reserved = _split(inputs.reserved, n)
    return {
        zone.name: batch_formula(
            zone.allocatable, system, reserved, HPSums(request[i], used[i], max_used[i]), strategy
        )
        for i, zone in enumerate(zones)
    }


def zone_outcome(
    outcome: Outcome,
    inputs: NodeInputs,
    nrt: NodeResourceTopology,
    strategy: ColocationStrategy,
    annotations: dict[str, str] | None,
) -> dict[str, dict[str, Quantity]] | None:
    """Zone name -> the values of ``ZONE_RESOURCES`` it should carry; a zone not named carries none
    (batch reset, degraded or disabled: none does). None: leave the NRT alone, its zones carry no
    cpu or memory yet."""
    zones = numa_zones(nrt)
    if not zones:
        return None
    if outcome.reason != "calculated":
        return {}
    ratio = cpu_normalization_ratio(annotations)
    return {
        name: {
            BATCH_CPU: Quantity.from_int(normalized_batch_cpu(batch.cpu, ratio)),
            BATCH_MEMORY: Quantity.from_int(batch.memory, Format.BINARY_SI),
        }
        for name, batch in zone_batch_resources(inputs, zones, strategy).items()
    }
