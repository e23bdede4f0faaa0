"""Node CPU and memory with psutil (``/proc/stat``, ``/proc/meminfo``).

CPU is the busy time (everything but idle and iowait) between two samples divided by the wall time
between them, in cores; memory without page cache is MemTotal - MemAvailable and with page cache
MemTotal - MemFree, as Koordinator's node resource and page cache collectors compute them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psutil

from koordlet.collectors.series import NODE_CPU, NODE_MEMORY, NODE_MEMORY_WITH_PAGE_CACHE
from koordlet.metric_cache import MetricCache

__all__ = ["NodeCollector", "busy_seconds"]


def busy_seconds(times: Any) -> float:
    """CPU seconds spent on anything but idle and iowait, over all CPUs."""
    idle = float(times.idle) + float(getattr(times, "iowait", 0.0))
    total = sum(float(value) for value in times)
    # guest and guest_nice are already counted in user and nice
    total -= float(getattr(times, "guest", 0.0)) + float(getattr(times, "guest_nice", 0.0))
    return total - idle


class NodeCollector:
    name = "node"

    def __init__(
        self,
        cpu_times: Callable[[], Any] = psutil.cpu_times,
        virtual_memory: Callable[[], Any] = psutil.virtual_memory,
        cpu_count: int | None = None,
    ) -> None:
        self._cpu_times = cpu_times
        self._virtual_memory = virtual_memory
        self._cpu_count = cpu_count or psutil.cpu_count() or 1
        self._last: tuple[float, float] | None = None

    def collect(self, now: float, cache: MetricCache) -> None:
        busy = busy_seconds(self._cpu_times())
        if self._last is not None and now > self._last[0]:
            rate = max(busy - self._last[1], 0.0) / (now - self._last[0])
            # koordlet descheduled between taking the time and reading the counters stretches or
            # shrinks the interval; a node never uses more than all its CPUs
            cache.append((NODE_CPU,), now, min(rate, float(self._cpu_count)))
        self._last = (now, busy)
        memory = self._virtual_memory()
        cache.append((NODE_MEMORY,), now, float(memory.total - memory.available))
        cache.append((NODE_MEMORY_WITH_PAGE_CACHE,), now, float(memory.total - memory.free))

    @property
    def memory(self) -> Any:
        return self._virtual_memory()
