"""Cold page cache from kidled's ``memory.idle_page_stats`` (``memory.idle_stat``) where the kernel has it.

Node usage with hot page cache is MemTotal - MemFree - cold pages of the root memory cgroup; a pod's
is its usage with page cache minus its cold pages, as Koordinator's kidled collector computes them.
On a kernel without the file the collector reports nothing and ``supported`` stays False, so the
reporter falls back from ``usageWithHotPageCache`` to ``usageWithoutPageCache`` as koordlet does.
"""

from __future__ import annotations

from koordlet.cgroups import CgroupReader
from koordlet.collectors.node import NodeCollector
from koordlet.collectors.pods import PodCollector
from koordlet.collectors.series import (
    NODE_COLD_PAGE,
    NODE_MEMORY_WITH_HOT_PAGE,
    POD_COLD_PAGE,
    POD_MEMORY_WITH_HOT_PAGE,
)
from koordlet.metric_cache import MetricCache

__all__ = ["ColdMemoryCollector"]


class ColdMemoryCollector:
    name = "cold-memory"

    def __init__(self, reader: CgroupReader, node: NodeCollector, pods: PodCollector) -> None:
        self.reader = reader
        self.node = node
        self.pods = pods
        self.supported = False

    def collect(self, now: float, cache: MetricCache) -> None:
        cold = self.reader.cold_page_bytes("/")
        self.supported = cold is not None
        if cold is None:
            return
        memory = self.node.memory
        cache.append((NODE_COLD_PAGE,), now, float(cold))
        cache.append((NODE_MEMORY_WITH_HOT_PAGE,), now, float(max(memory.total - memory.free - cold, 0)))
        for uid, path in self.pods.cgroups.items():
            try:
                pod_cold = self.reader.cold_page_bytes(path)
                stat = self.reader.memory_stat(path)
            except (OSError, ValueError):
                continue
            if pod_cold is None:
                continue
            cache.append((POD_COLD_PAGE, uid), now, float(pod_cold))
            cache.append(
                (POD_MEMORY_WITH_HOT_PAGE, uid), now, float(max(stat.usage_with_page_cache - pod_cold, 0))
            )
