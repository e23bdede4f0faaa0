"""A node's usage over time from its load description, read like the metric cache.

The load is piecewise constant: the entry's own values until its first step, then each step's. A
query samples it every ``sample_interval_seconds`` back from the end of the window (as a koordlet
collecting every second would have), counting the samples per constant piece instead of making
them, so a 30-minute window costs the same as a 1-minute one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from apis.podkey import namespaced_key
from koordlet.collectors import series
from koordlet.metric_cache import Aggregate, SeriesKey
from koordlet.simulate.model import NodeLoad, PodLoad, Usage

__all__ = ["LoadSource"]

_CPU = {series.NODE_CPU: "node", series.POD_CPU: "pod", series.SYSTEM_CPU: "system"}
_MEMORY = {
    series.NODE_MEMORY: "node",
    series.NODE_MEMORY_WITH_PAGE_CACHE: "node",
    series.NODE_MEMORY_WITH_HOT_PAGE: "node",
    series.POD_MEMORY: "pod",
    series.POD_MEMORY_WITH_PAGE_CACHE: "pod",
    series.POD_MEMORY_WITH_HOT_PAGE: "pod",
    series.SYSTEM_MEMORY: "system",
}


@dataclass(frozen=True)
class _State:
    usage: Usage | None
    pods: tuple[PodLoad, ...]

    def value(self, scope: str, resource: str, pod: str | None) -> float | None:
        def of(usage: Usage) -> float:
            return usage.cpu_cores if resource == "cpu" else usage.memory_bytes

        pods_total = math.fsum(of(p.usage) for p in self.pods)
        node = of(self.usage) if self.usage is not None else pods_total
        if scope == "node":
            return node
        if scope == "system":
            return max(node - pods_total, 0.0)
        for p in self.pods:
            if namespaced_key(p.namespace, p.name) == pod:
                return of(p.usage)
        return None


class LoadSource:
    def __init__(
        self, load: NodeLoad, started: float, sample_interval_seconds: float, history_seconds: float | None
    ) -> None:
        self.started = started
        self.interval = sample_interval_seconds
        self.since = -math.inf if history_seconds is None else started - history_seconds
        states = [_State(load.usage, tuple(load.pods))]
        self.boundaries: list[float] = []
        for step in load.steps:
            previous = states[-1]
            states.append(
                _State(
                    _merged(previous.usage, step.usage),
                    tuple(step.pods) if step.pods is not None else previous.pods,
                )
            )
            self.boundaries.append(started + step.at_seconds)
        self.states = states

    def state_at(self, when: float) -> _State:
        index = sum(1 for boundary in self.boundaries if boundary <= when)
        return self.states[index]

    def query(self, key: SeriesKey, start: float, end: float) -> Aggregate | None:
        name = key[0]
        resource, scope = ("cpu", _CPU[name]) if name in _CPU else ("memory", _MEMORY.get(name, ""))
        if not scope:
            return None
        pod = key[1] if len(key) > 1 else None
        first_allowed = max(start, self.since)
        if end < first_allowed:
            return None
        last_index = math.floor((end - first_allowed) / self.interval)
        counts: dict[float, int] = {}
        edges = [-math.inf, *self.boundaries, math.inf]
        for state, low, high in zip(self.states, edges, edges[1:], strict=False):
            # sample k is at end - k * interval; count the k with low <= time < high
            k_high = min(
                last_index, math.floor((end - low) / self.interval) if low > -math.inf else last_index
            )
            k_low = max(0, math.floor((end - high) / self.interval) + 1 if high < math.inf else 0)
            if k_high < k_low:
                continue
            value = state.value(scope, resource, pod)
            if value is None:
                continue
            counts[value] = counts.get(value, 0) + (k_high - k_low + 1)
        if not counts:
            return None
        return Aggregate(
            levels=tuple(sorted(counts.items())), first=end - last_index * self.interval, last=end
        )


def _merged(before: Usage | None, step: Usage | None) -> Usage | None:
    """A step's usage over the one before it: a resource the step leaves out keeps its value."""
    if step is None or before is None:
        return step if step is not None else before
    return Usage(
        cpu=step.cpu if step.cpu is not None else before.cpu,
        memory=step.memory if step.memory is not None else before.memory,
    )
