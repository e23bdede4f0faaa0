"""Which pods a node's eviction features evict this round, from a metric source (the metric cache
on a node, the load file in simulation) and the node's effective NodeSLO.

Gated as Koordinator gates them: the feature gate (``BEMemoryEvict``, ``BECPUEvict``) and
``resourceUsedThresholdWithBE.enable``; each feature then rests for its cool-down (memory 4 s, CPU
20 s) after a round that evicted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from apis.core import Node, Pod
from apis.extension.colocation import BATCH_CPU
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec, ResourceThresholdStrategy
from koordlet.collectors import series
from koordlet.metric_cache import MetricSource
from koordlet.qos.cpu_evict import (
    EVICT_BY_ALLOCATABLE,
    MIN_ALLOCATABLE_MILLI,
    REASON_BE_CPU,
    BECPUSample,
    cpu_eviction,
    satisfaction_config_error,
)
from koordlet.qos.evictor import Evictor
from koordlet.qos.memory_evict import REASON_MEMORY, memory_eviction
from koordlet.qos.pods import QoSPod, qos_pod

__all__ = ["EvictionDecision", "EvictionInputs", "EvictionPlanner", "execute", "latest"]

log = logging.getLogger("koordlet.qos")

MEMORY_COOLDOWN_SECONDS = 4.0
CPU_COOLDOWN_SECONDS = 20.0


def latest(source: MetricSource, key: tuple[str, ...], now: float, interval: float) -> float | None:
    """The value within the last two collect intervals (Koordinator's ``...MetricLast``)."""
    found = source.query(key, now - 2 * interval, now)
    if found is None:
        return None
    last = getattr(source, "latest", None)
    value = last(key) if callable(last) else None
    return float(value) if value is not None else found.value("avg")


@dataclass
class EvictionInputs:
    node: Node
    pods: Sequence[Pod]
    spec: NodeSLOSpec
    source: MetricSource
    series_key: Callable[[Pod], str]
    """The label of a pod's series in ``source`` (its UID on a node, namespace/name in simulation)."""
    now: float
    collect_interval: float = 1.0
    be_real_limit_milli: Callable[[float], float | None] = field(default=lambda _window: None)
    """The BE pods' real CPU limit averaged over a window (0 s: now); None when unknown."""

    @property
    def name(self) -> str:
        return self.node.metadata.name or ""


@dataclass(frozen=True)
class EvictionDecision:
    feature: str
    reason: str
    message: str
    victims: tuple[Pod, ...]
    """The pods that cover ``target`` when every eviction succeeds."""
    candidates: tuple[tuple[Pod, float], ...]
    """Every candidate in order with what its eviction releases; a refused one (a
    PodDisruptionBudget) counts nothing and the next is taken, as Koordinator counts only evictions
    that happened."""
    target: float


class EvictionPlanner:
    def __init__(self, gates: KoordletFeatureGates) -> None:
        self.gates = gates
        self._last: dict[tuple[str, str], float] = {}
        self._config_errors: set[tuple[str, str]] = set()

    def cooling(self, node: str, feature: str, now: float) -> bool:
        cooldown = MEMORY_COOLDOWN_SECONDS if feature == "BEMemoryEvict" else CPU_COOLDOWN_SECONDS
        return now - self._last.get((node, feature), float("-inf")) < cooldown

    def evicted(self, node: str, feature: str, now: float) -> None:
        self._last[(node, feature)] = now

    def plan(self, inputs: EvictionInputs) -> list[EvictionDecision]:
        strategy = inputs.spec.resource_used_threshold_with_be
        if strategy is None or not strategy.enable:
            return []
        by_uid = {pod.metadata.uid or "": pod for pod in inputs.pods}
        qos_pods = [qos_pod(pod) for pod in inputs.pods]
        decisions: list[EvictionDecision] = []
        if self.gates.be_memory_evict and not self.cooling(inputs.name, "BEMemoryEvict", inputs.now):
            decision = self._memory(inputs, strategy, qos_pods, by_uid)
            if decision is not None:
                decisions.append(decision)
        if self.gates.be_cpu_evict and not self.cooling(inputs.name, "BECPUEvict", inputs.now):
            decision = self._cpu(inputs, strategy, qos_pods, by_uid)
            if decision is not None:
                decisions.append(decision)
        return decisions

    def _memory(
        self,
        inputs: EvictionInputs,
        strategy: ResourceThresholdStrategy,
        pods: list[QoSPod],
        by_uid: dict[str, Pod],
    ) -> EvictionDecision | None:
        capacity = (inputs.node.status.capacity or {}).get("memory")
        used = latest(inputs.source, (series.NODE_MEMORY,), inputs.now, inputs.collect_interval)
        if capacity is None or used is None:
            return None
        pod_used = {
            pod.uid: value
            for pod in pods
            if (value := self._pod_latest(inputs, series.POD_MEMORY, by_uid[pod.uid])) is not None
        }
        found = memory_eviction(strategy, capacity.value(), int(used), pods, pod_used)
        if found is None or not found.victims:
            return None
        log.info(
            "node %s memory usage %d%% >= %d%%: releasing %d bytes",
            inputs.name,
            found.usage_percent,
            strategy.memory_evict_threshold_percent or 0,
            found.release_bytes,
        )
        return EvictionDecision(
            "BEMemoryEvict",
            REASON_MEMORY,
            found.message,
            tuple(by_uid[p.uid] for p in found.victims),
            tuple((by_uid[p.uid], amount) for p, amount in found.candidates),
            float(found.release_bytes),
        )

    def _pod_latest(self, inputs: EvictionInputs, name: str, pod: Pod) -> float | None:
        return latest(inputs.source, (name, inputs.series_key(pod)), inputs.now, inputs.collect_interval)

    def _cpu(
        self,
        inputs: EvictionInputs,
        strategy: ResourceThresholdStrategy,
        pods: list[QoSPod],
        by_uid: dict[str, Pod],
    ) -> EvictionDecision | None:
        error = satisfaction_config_error(strategy)
        if error is not None:
            if (inputs.name, error) not in self._config_errors:
                self._config_errors.add((inputs.name, error))
                log.warning(
                    "node %s: BECPUEvict idle, NodeSLO resourceUsedThresholdWithBE: %s", inputs.name, error
                )
            return None
        be = [p for p in pods if p.raw_qos == "BE" and not p.terminating]
        window = max(inputs.collect_interval, float(strategy.cpu_evict_time_window_seconds or 0))
        node_window = inputs.source.query((series.NODE_CPU,), inputs.now - window, inputs.now)
        if node_window is None or node_window.count * inputs.collect_interval < window / 3:
            return None
        request = float(sum(p.batch_cpu_request_milli for p in be))
        avg_used = 0.0
        now_used: dict[str, float] = {}
        for pod in be:
            key = (series.POD_CPU, inputs.series_key(by_uid[pod.uid]))
            window_used = inputs.source.query(key, inputs.now - window, inputs.now)
            avg_used += window_used.value("avg") * 1000 if window_used is not None else 0.0
            current = latest(inputs.source, key, inputs.now, inputs.collect_interval)
            if current is not None:
                now_used[pod.uid] = current * 1000
        if strategy.cpu_evict_policy == EVICT_BY_ALLOCATABLE:
            allocatable = (inputs.node.status.allocatable or {}).get(BATCH_CPU)
            if allocatable is None or allocatable.value() < 0:
                return None
            avg_limit = now_limit = float(allocatable.value()) or MIN_ALLOCATABLE_MILLI
        else:
            avg_real, now_real = inputs.be_real_limit_milli(window), inputs.be_real_limit_milli(0.0)
            if avg_real is None or now_real is None:
                return None
            avg_limit, now_limit = avg_real, now_real
        found = cpu_eviction(
            strategy,
            BECPUSample(avg_used, request, avg_limit),
            BECPUSample(sum(now_used.values()), request, now_limit),
            be,
            now_used,
        )
        if found is None or not found.victims:
            return None
        return EvictionDecision(
            "BECPUEvict",
            REASON_BE_CPU,
            found.message,
            tuple(by_uid[p.uid] for p in found.victims),
            tuple((by_uid[p.uid], amount) for p, amount in found.candidates),
            float(found.release_milli),
        )


async def execute(
    planner: EvictionPlanner, evictor: Evictor, node: str, decisions: list[EvictionDecision], now: float
) -> int:
    """Evicts each decision's candidates in order until what the evicted ones release covers its
    target; returns how many were evicted."""
    total = 0
    for decision in decisions:
        evicted = 0
        released = 0.0
        for pod, amount in decision.candidates:
            if released >= decision.target:
                break
            if await evictor.evict(pod, node, decision.reason, decision.message):
                evicted += 1
                released += amount
        if evicted:
            planner.evicted(node, decision.feature, now)
        total += evicted
    return total
