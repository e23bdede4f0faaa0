"""System usage: what the node uses beyond its pods (daemons, kubelet, the kernel).

``max(node - sum(pods), 0)`` per resource over the pods sampled in the same round, as Koordinator's
system resource collector computes it (there are no host applications to subtract here).
"""

from __future__ import annotations

from koordlet.collectors.pods import PodCollector
from koordlet.collectors.series import NODE_CPU, NODE_MEMORY, SYSTEM_CPU, SYSTEM_MEMORY
from koordlet.metric_cache import MetricCache

__all__ = ["SystemCollector"]


class SystemCollector:
    name = "system"

    def __init__(self, pods: PodCollector) -> None:
        self.pods = pods

    def collect(self, now: float, cache: MetricCache) -> None:
        node_cpu = cache.query((NODE_CPU,), now, now)
        node_memory = cache.query((NODE_MEMORY,), now, now)
        if node_memory is not None:
            pods_memory = sum(memory for _, memory in self.pods.round.values())
            cache.append((SYSTEM_MEMORY,), now, max(node_memory.value("avg") - pods_memory, 0.0))
        if node_cpu is not None:
            pods_cpu = sum(cpu for cpu, _ in self.pods.round.values() if cpu is not None)
            cache.append((SYSTEM_CPU,), now, max(node_cpu.value("avg") - pods_cpu, 0.0))
