"""Eviction on simulated nodes (``koordlet --simulate``): the load file's usage stands in for the
metric cache, the node's NodeSLO and pods come from koordlet's watched states, and victims are evicted through
the Eviction API exactly as on a real node.

A pod of the load file that is no longer bound to the node (evicted, deleted) stops counting: its
usage is taken off the node's, as it would leave a real node. The BE pods' real CPU limit (for
``cpuEvictPolicy: evictByRealLimit``) is what CPU suppression would give them: the cfsQuota
formula over the simulated usage.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from kubernetes_asyncio import client

from apis.core import Pod
from apis.koordlet_features import KoordletFeatureGates
from apis.podkey import namespaced_key, pod_key
from koordlet.collectors import series
from koordlet.metric_cache import Aggregate, MetricSource, SeriesKey
from koordlet.metrics import KoordletMetrics
from koordlet.qos import cpu_suppress as sup
from koordlet.qos.eviction import EvictionInputs, EvictionPlanner, execute
from koordlet.qos.evictor import EvictionAPI, Evictor
from koordlet.qos.pods import qos_pod
from koordlet.qos.slo import effective_spec
from koordlet.simulate.model import LoadFile
from koordlet.simulate.runner import Simulation
from koordlet.states.resources import Kind
from koordlet.states.store import States

__all__ = ["SimulatedQoS", "SimulationAPI"]

log = logging.getLogger("koordlet.qos")


class SimulationAPI(EvictionAPI, Protocol):
    """What the simulated QoS writes (``koordlet.client.QoSClient`` in koordlet)."""


_NODE_SERIES = {
    series.NODE_CPU: series.POD_CPU,
    series.NODE_MEMORY: series.POD_MEMORY,
    series.NODE_MEMORY_WITH_PAGE_CACHE: series.POD_MEMORY_WITH_PAGE_CACHE,
}


@dataclass
class _WithoutGonePods:
    """The load source with the usage of pods that left the node taken off the node series."""

    source: MetricSource
    gone: tuple[str, ...]

    def query(self, key: SeriesKey, start: float, end: float) -> Aggregate | None:
        found = self.source.query(key, start, end)
        pod_series = _NODE_SERIES.get(key[0])
        if found is None or pod_series is None or not self.gone:
            return found
        minus = 0.0
        for pod in self.gone:
            gone = self.source.query((pod_series, pod), start, end)
            minus += gone.value("avg") if gone is not None else 0.0
        levels = tuple((max(value - minus, 0.0), count) for value, count in found.levels)
        return Aggregate(levels=levels, first=found.first, last=found.last)


def _be_real_limit(
    inputs_source: MetricSource, pods: list[Pod], capacity_milli: int, threshold: int, now: float
) -> Callable[[float], float | None]:
    def limit(window: float) -> float | None:
        start = now - max(window, 2.0)
        node = inputs_source.query((series.NODE_CPU,), start, now)
        if node is None:
            return None
        usages = []
        for pod in pods:
            found = inputs_source.query(
                (series.POD_CPU, pod_key(pod)),
                start,
                now,
            )
            if found is not None:
                meta = qos_pod(pod)
                usages.append(
                    sup.UsageOf(
                        found.value("avg") * 1000, meta.raw_qos == "BE" or meta.kube_qos == "BestEffort"
                    )
                )
        return float(max(sup.suppress_milli(capacity_milli, threshold, node.value("avg") * 1000, usages), 0))

    return limit


class SimulatedQoS:
    def __init__(
        self,
        simulation: Simulation,
        load: LoadFile,
        gates: KoordletFeatureGates,
        interval_seconds: float = 1.0,
        metrics: KoordletMetrics | None = None,
    ) -> None:
        self.metrics = metrics
        self.simulation = simulation
        self.load = load
        self.gates = gates
        self.interval = interval_seconds
        self.planner = EvictionPlanner(gates)
        self.evictor: Evictor | None = None

    async def round(self, api: SimulationAPI, states: States) -> int:
        if self.evictor is None:
            self.evictor = Evictor(api, on_evicted=self.metrics.evicted if self.metrics else None)
        if not (self.gates.be_memory_evict or self.gates.be_cpu_evict):
            return 0
        now = time.time()
        targets = []
        for slo in states.node_slos():
            name = slo.metadata.name or ""
            load = self.load.for_node(name)
            spec = effective_spec(slo.spec)
            threshold = spec.resource_used_threshold_with_be
            if load is None or threshold is None or not threshold.enable:
                continue
            targets.append((name, load, spec))
        if not targets:
            return 0
        total = 0
        for name, load, spec in targets:
            node = states.node(name)
            if node is None:
                continue
            pods = [p for p in states.pods(name) if p.status.phase not in ("Succeeded", "Failed")]
            present = {pod_key(p) for p in pods if p.metadata.deletion_timestamp is None}
            source = self.simulation.source(name, load)
            state = source.state_at(now)
            gone = tuple(
                key for p in state.pods if (key := namespaced_key(p.namespace, p.name)) not in present
            )
            adjusted = _WithoutGonePods(source, gone)
            capacity = (node.status.capacity or {}).get("cpu")
            threshold = spec.resource_used_threshold_with_be
            inputs = EvictionInputs(
                node=node,
                pods=pods,
                spec=spec,
                source=adjusted,
                series_key=lambda p: pod_key(p),
                now=now,
                collect_interval=self.load.sample_interval_seconds,
                be_real_limit_milli=_be_real_limit(
                    adjusted,
                    pods,
                    capacity.milli_value() if capacity is not None else 0,
                    (threshold.cpu_suppress_threshold_percent if threshold else None) or 65,
                    now,
                ),
            )
            decisions = self.planner.plan(inputs)
            if decisions:
                total += await execute(self.planner, self.evictor, name, decisions, now)
        return total

    async def run(self, api: SimulationAPI, states: States) -> None:
        await states.wait_synced(Kind.NODE, Kind.POD, Kind.NODE_SLO)
        while True:
            try:
                await self.round(api, states)
            except (TimeoutError, client.ApiException, aiohttp.ClientError, OSError, ValueError) as exc:
                log.warning("simulated QoS round failed, retrying: %s", exc)
            await asyncio.sleep(self.interval)
