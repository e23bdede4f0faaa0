"""koordlet on a real node: collect every ``collect_interval_seconds``, report on the NodeMetric's policy."""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp
from kubernetes_asyncio import client

from koordlet.cgroups import CgroupReader, detect_version
from koordlet.client import KoordletClient
from koordlet.collectors.base import Collector, CollectorSet
from koordlet.collectors.cold_memory import ColdMemoryCollector
from koordlet.collectors.node import NodeCollector
from koordlet.collectors.pods import PodCollector
from koordlet.collectors.system import SystemCollector
from koordlet.config import KoordletConfig
from koordlet.metric_cache import MetricCache
from koordlet.metrics import KoordletMetrics
from koordlet.policy import effective_policy
from koordlet.prediction import with_prediction
from koordlet.reporter import build_status, memory_series, pod_meta
from koordlet.states.resources import Kind
from koordlet.states.store import States

__all__ = ["Agent"]

log = logging.getLogger("koordlet")

_RETENTION_MARGIN_SECONDS = 60.0


class Agent:
    """The collectors, the cache and the reporter of one node."""

    def __init__(self, config: KoordletConfig, metrics: KoordletMetrics) -> None:
        self.config = config
        self.metrics = metrics
        self.cache = MetricCache(retention_seconds=1800 + _RETENTION_MARGIN_SECONDS)
        fs = config.host_fs()
        node = NodeCollector()
        collectors: list[Collector] = [node]
        self.cold: ColdMemoryCollector | None = None
        version = config.cgroup_version or detect_version(fs)
        if version is None:
            log.warning("no cgroup mount under %s: pod and system usage are not collected", config.host_root)
        else:
            reader = CgroupReader(fs, version)
            pods = PodCollector(reader, config.cgroup_root)
            self.cold = ColdMemoryCollector(reader, node, pods)
            collectors += [pods, self.cold, SystemCollector(pods)]
            log.info("reading cgroups v%d under %s", version, fs.path(reader.hierarchy))
        self.collectors = CollectorSet(collectors)
        self._missing_logged = False

    def collect_once(self, now: float | None = None) -> None:
        self.collectors.collect(time.time() if now is None else now, self.cache)

    async def collect_forever(self) -> None:
        while True:
            self.collect_once()
            await asyncio.sleep(self.config.collect_interval_seconds)

    async def report_once(self, api: KoordletClient, states: States) -> float:
        """Write the NodeMetric status once from the node's watched states; returns the seconds until
        the next report."""
        node_name = self.config.node_name or ""
        metric = states.node_metric(node_name)
        policy = effective_policy(metric.spec if metric else None, self.config.report_interval_seconds)
        longest = max([policy.aggregate_duration_seconds, *(seconds for _, seconds in policy.windows)])
        self.cache.retention_seconds = longest + _RETENTION_MARGIN_SECONDS
        if metric is None:
            if not self._missing_logged:
                log.warning(
                    "NodeMetric %s not found (koord-manager creates it): not reporting yet", node_name
                )
                self._missing_logged = True
            return policy.report_interval_seconds
        self._missing_logged = False
        pods = [pod_meta(pod) for pod in states.pods(node_name)]
        now = time.time()
        cold_supported = self.cold is not None and self.cold.supported
        status = build_status(self.cache, policy, pods, now, cold_supported=cold_supported)
        if status is None:
            log.info("no node samples yet: not reporting this round")
            return policy.report_interval_seconds
        status = with_prediction(
            status,
            self.cache,
            pods,
            states.node(node_name),
            memory_series=memory_series(policy.memory_policy, cold_supported, "pod"),
            window_seconds=longest,
            now=now,
        )
        try:
            await api.update_status(metric, status)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            log.info("NodeMetric %s changed while reporting: reporting again next round", node_name)
        self.metrics.reset()
        self.metrics.record(node_name, status)
        return policy.report_interval_seconds

    async def report_forever(self, api: KoordletClient, states: States) -> None:
        delay = effective_policy(None, self.config.report_interval_seconds).report_interval_seconds
        await states.wait_synced(Kind.NODE, Kind.POD, Kind.NODE_METRIC)
        while True:
            await asyncio.sleep(delay)
            try:
                delay = await self.report_once(api, states)
            except (TimeoutError, client.ApiException, aiohttp.ClientError, OSError) as exc:
                log.warning("report failed, retrying next round: %s", exc)
