"""Report NodeMetric status for every node the load file describes, from one process.

Each round reads the NodeMetrics (koord-manager creates one per node), the nodes and the bound pods
from koordlet's watched states (:class:`~koordlet.states.node_states.ClusterStates`), computes the
status of each node with a load from its :class:`~koordlet.simulate.source.LoadSource` with the
same reporter a real koordlet uses, and writes the status subresources concurrently.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

import aiohttp
from kubernetes_asyncio import client

from apis.podkey import namespaced_key
from apis.slo.nodemetric import NodeMetric
from koordlet.client import KoordletClient
from koordlet.config import KoordletConfig
from koordlet.metrics import KoordletMetrics
from koordlet.policy import effective_policy
from koordlet.prediction import with_prediction
from koordlet.reporter import PodMeta, build_status, memory_series, pod_meta
from koordlet.simulate.model import LoadFile, NodeLoad
from koordlet.simulate.source import LoadSource
from koordlet.states.resources import Kind
from koordlet.states.store import States

__all__ = ["Simulation"]

log = logging.getLogger("koordlet.simulate")

_CONCURRENT_WRITES = 32


class Simulation:
    def __init__(self, config: KoordletConfig, load: LoadFile, metrics: KoordletMetrics) -> None:
        self.config = config
        self.load = load
        self.metrics = metrics
        self.started = time.time()
        self._sources: dict[str, LoadSource] = {}

    def source(self, node: str, load: NodeLoad) -> LoadSource:
        if node not in self._sources:
            self._sources[node] = LoadSource(
                load, self.started, self.load.sample_interval_seconds, self.load.history_seconds
            )
        return self._sources[node]

    def _override(self) -> float | None:
        return self.config.report_interval_seconds or self.load.report_interval_seconds

    def pods_of(
        self, load: NodeLoad, now: float, source: LoadSource, known: dict[str, PodMeta]
    ) -> list[PodMeta]:
        metas = []
        for pod in source.state_at(now).pods:
            key = namespaced_key(pod.namespace, pod.name)
            found = known.get(key)
            metas.append(
                PodMeta(
                    uid=key,
                    name=pod.name,
                    namespace=pod.namespace,
                    priority=pod.priority if pod.priority is not None else (found.priority if found else ""),
                    qos=pod.qos if pod.qos is not None else (found.qos if found else ""),
                )
            )
        return metas

    async def report_once(self, api: KoordletClient, states: States) -> float:
        """One round over every NodeMetric; returns the seconds until the next round."""
        now = time.time()
        targets: list[tuple[NodeMetric, NodeLoad]] = []
        for metric in states.node_metrics():
            load = self.load.for_node(metric.metadata.name or "")
            if load is None:
                continue
            stop = load.stop_reporting_after_seconds
            if stop is not None and now - self.started >= stop:
                continue
            targets.append((metric, load))
        # Every round: the pods' classes fill what the file leaves out, their requests feed the
        # Prod prediction of their node.
        bound = [pod_meta(pod) for pod in states.pods()] if targets else []
        known = {namespaced_key(pod.namespace, pod.name): pod for pod in bound}
        on_node: dict[str, list[PodMeta]] = {}
        for pod in bound:
            # The simulated series are keyed by namespace/name, not by UID.
            on_node.setdefault(pod.node_name, []).append(
                replace(pod, uid=namespaced_key(pod.namespace, pod.name))
            )
        semaphore = asyncio.Semaphore(_CONCURRENT_WRITES)
        intervals: list[float] = []
        self.metrics.reset()

        async def report(metric: NodeMetric, load: NodeLoad) -> None:
            name = metric.metadata.name or ""
            policy = effective_policy(metric.spec, self._override())
            intervals.append(policy.report_interval_seconds)
            source = self.source(name, load)
            status = build_status(source, policy, self.pods_of(load, now, source, known), now)
            if status is None:
                return
            node = states.node(name)
            longest = max([policy.aggregate_duration_seconds, *(seconds for _, seconds in policy.windows)])
            status = with_prediction(
                status,
                source,
                on_node.get(name, []),
                node,
                memory_series=memory_series(policy.memory_policy, False, "pod"),
                window_seconds=longest,
                now=now,
            )
            async with semaphore:
                try:
                    await api.update_status(metric, status)
                except client.ApiException as exc:
                    if exc.status not in (404, 409):
                        raise
                    return
            self.metrics.record(name, status)

        await asyncio.gather(*(report(metric, load) for metric, load in targets))
        return min(intervals) if intervals else (self._override() or 60.0)

    async def run(self, api: KoordletClient, states: States) -> None:
        await states.wait_synced(Kind.NODE, Kind.POD, Kind.NODE_METRIC)
        while True:
            try:
                delay = await self.report_once(api, states)
            except (TimeoutError, client.ApiException, aiohttp.ClientError, OSError) as exc:
                log.warning("simulated report failed, retrying: %s", exc)
                delay = self._override() or 5.0
            await asyncio.sleep(delay)
