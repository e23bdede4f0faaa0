"""Per-pod and per-container CPU and memory from the pods' cgroups (v1 or v2, either driver).

CPU is the growth of the cgroup's cumulative CPU time between two samples over the wall time
between them; memory is read from ``memory.stat`` (anonymous + unevictable, and with the file
pages for the with-page-cache series). A pod whose files vanish between listing and reading (it is
being deleted) is skipped for that round.
"""

from __future__ import annotations

import logging

from koordlet.cgroups import CgroupReader, discover_pods
from koordlet.collectors.series import (
    CONTAINER_CPU,
    CONTAINER_MEMORY,
    CONTAINER_MEMORY_WITH_PAGE_CACHE,
    POD_CPU,
    POD_MEMORY,
    POD_MEMORY_WITH_PAGE_CACHE,
)
from koordlet.metric_cache import MetricCache

__all__ = ["PodCollector"]

log = logging.getLogger("koordlet.collectors.pods")


class PodCollector:
    name = "pods"

    def __init__(self, reader: CgroupReader, cgroup_root: str = "/") -> None:
        self.reader = reader
        self.cgroup_root = cgroup_root
        self._cpu: dict[str, tuple[float, int]] = {}
        self.round: dict[str, tuple[float | None, float]] = {}
        """Pod UID -> (CPU cores or None on its first sample, memory bytes) of the latest round."""
        self.cgroups: dict[str, str] = {}
        """Pod UID -> its cgroup path, as last discovered."""

    def _cpu_rate(self, key: str, now: float, path: str) -> float | None:
        used = self.reader.cpu_usage_ns(path)
        last = self._cpu.get(key)
        self._cpu[key] = (now, used)
        if last is None or now <= last[0]:
            return None
        return max(used - last[1], 0) / 1e9 / (now - last[0])

    def collect(self, now: float, cache: MetricCache) -> None:
        pods = discover_pods(self.reader, self.cgroup_root)
        rounds: dict[str, tuple[float | None, float]] = {}
        seen: set[str] = set()
        for pod in pods:
            try:
                cpu = self._cpu_rate(pod.uid, now, pod.path)
                memory = self.reader.memory_stat(pod.path)
            except (OSError, ValueError) as exc:
                log.debug("pod %s skipped this round: %s", pod.uid, exc)
                continue
            seen.add(pod.uid)
            if cpu is not None:
                cache.append((POD_CPU, pod.uid), now, cpu)
            cache.append((POD_MEMORY, pod.uid), now, float(memory.usage))
            cache.append((POD_MEMORY_WITH_PAGE_CACHE, pod.uid), now, float(memory.usage_with_page_cache))
            rounds[pod.uid] = (cpu, float(memory.usage))
            for container_id, path in pod.containers.items():
                try:
                    container_cpu = self._cpu_rate(container_id, now, path)
                    container_memory = self.reader.memory_stat(path)
                except (OSError, ValueError):
                    continue
                seen.add(container_id)
                if container_cpu is not None:
                    cache.append((CONTAINER_CPU, container_id), now, container_cpu)
                cache.append((CONTAINER_MEMORY, container_id), now, float(container_memory.usage))
                cache.append(
                    (CONTAINER_MEMORY_WITH_PAGE_CACHE, container_id),
                    now,
                    float(container_memory.usage_with_page_cache),
                )
        self._cpu = {key: value for key, value in self._cpu.items() if key in seen}
        self.round = rounds
        self.cgroups = {pod.uid: pod.path for pod in pods}
