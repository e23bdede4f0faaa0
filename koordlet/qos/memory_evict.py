"""BE memory eviction by node memory usage (Koordinator's ``qosmanager/plugins/memoryevict``).

``usage% = floor(used x 100 / capacity)``; at or above ``memoryEvictThresholdPercent`` koordlet
releases ``capacity x (usage% - lower%) / 100`` bytes, lower being ``memoryEvictLowerPercent`` or the
threshold - 2. Victims are the BE pods (the ``koordinator.sh/qosClass: BE`` label) by
``spec.priority`` ascending, then memory used descending; pods without a sample come last (by name
descending) and count nothing toward the release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apis.slo.nodeslo import ResourceThresholdStrategy
from koordlet.qos.pods import QoSPod

__all__ = [
    "REASON_MEMORY",
    "MemoryEviction",
    "covering",
    "memory_eviction",
    "memory_to_release",
    "order_by_memory",
]

REASON_MEMORY = "EvictPodByNodeMemoryUsage"


@dataclass(frozen=True)
class MemoryEviction:
    release_bytes: int
    usage_percent: int
    victims: tuple[QoSPod, ...]
    """The pods that cover the release when every eviction succeeds."""
    candidates: tuple[tuple[QoSPod, float], ...] = ()
    """Every BE pod in eviction order with the bytes its eviction releases (0 without a sample):
    when an eviction is refused the next pod is taken."""

    @property
    def message(self) -> str:
        return f"killAndEvictBEPods for node, need to release memory: {self.release_bytes}"


def memory_to_release(strategy: ResourceThresholdStrategy, capacity: int, used: int) -> tuple[int, int]:
    """(bytes to release, usage percent); 0 bytes below the threshold or with a bad config."""
    threshold = strategy.memory_evict_threshold_percent
    if capacity <= 0 or threshold is None:
        return 0, 0
    usage = used * 100 // capacity
    lower = strategy.memory_evict_lower_percent
    lower = threshold - 2 if lower is None else lower
    if usage < threshold or lower >= threshold:
        return 0, usage
    return capacity * (usage - lower) // 100, usage


def order_by_memory(pods: Sequence[QoSPod], used: Mapping[str, float]) -> list[QoSPod]:
    """BE pods in eviction order; ``used`` maps pod uid to its memory use in bytes."""
    by_name = sorted(pods, key=lambda p: p.name, reverse=True)

    def key(pod: QoSPod) -> tuple[int, int, float]:
        value = used.get(pod.uid, 0)
        return (pod.priority, 0, -value) if value > 0 else (pod.priority, 1, 0.0)

    return sorted(by_name, key=key)


def memory_eviction(
    strategy: ResourceThresholdStrategy,
    capacity: int,
    node_used: int,
    pods: Sequence[QoSPod],
    used: Mapping[str, float],
) -> MemoryEviction | None:
    release, usage = memory_to_release(strategy, capacity, node_used)
    if release <= 0:
        return None
    ordered = order_by_memory([p for p in pods if p.raw_qos == "BE" and not p.terminating], used)
    candidates = tuple((pod, max(used.get(pod.uid, 0.0), 0.0)) for pod in ordered)
    return MemoryEviction(release, usage, covering(candidates, release), candidates)


def covering(candidates: Sequence[tuple[QoSPod, float]], target: float) -> tuple[QoSPod, ...]:
    """The leading candidates whose amounts reach ``target``."""
    chosen: list[QoSPod] = []
    released = 0.0
    for pod, amount in candidates:
        if released >= target:
            break
        chosen.append(pod)
        released += amount
    return tuple(chosen)
