"""koordlet's Prometheus metrics under Koordinator's names, and the HTTP server with /metrics and /healthz.

- ``koordlet_start_time{node}``: the start time, seconds since the epoch;
- ``koordlet_node_metric_node_usage{node,resource,unit}``: ``nodeUsage`` last reported (core, byte);
- ``koordlet_node_metric_system_usage{node,resource,unit}``: ``systemUsage`` last reported;
- ``koordlet_pod_eviction_total{node,reason}``: pods evicted by koordlet's QoS (Koordinator's
  ``koordlet_pod_eviction`` counter; the client library adds ``_total``);
- ``koordlet_kube_api_requests_total{verb,resource}``: requests koordlet sent to the API server, by
  Kubernetes verb (``list``, ``watch``, ``get``, ``create``, ``update``, ...) and resource
  (``pods``, ``nodemetrics/status``, ...);
- ``koordlet_nri_connected{node}``: 1 while koordlet is registered with the runtime's NRI;
- ``koordlet_nri_container_adjustments_total{node,event}``: containers whose settings koordlet set
  through NRI, by event (``CreateContainer``, ``UpdateContainer``).

As Koordinator's koordlet does, the usage series are reset before each report is recorded, so a
node or resource that stops being reported leaves no stale series.
"""

from __future__ import annotations

import time

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from apis.slo.nodemetric import NodeMetricStatus, ResourceMap

__all__ = ["KoordletMetrics", "serve"]


class KoordletMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.start_time = Gauge(
            "koordlet_start_time", "the start time of koordlet", ["node"], registry=self.registry
        )
        self.node_usage = Gauge(
            "koordlet_node_metric_node_usage",
            "the node usage reported in the NodeMetric",
            ["node", "resource", "unit"],
            registry=self.registry,
        )
        self.system_usage = Gauge(
            "koordlet_node_metric_system_usage",
            "the system usage reported in the NodeMetric",
            ["node", "resource", "unit"],
            registry=self.registry,
        )

        self.pod_eviction = Counter(
            "koordlet_pod_eviction",
            "Number of eviction launched by koordlet",
            ["node", "reason"],
            registry=self.registry,
        )
        self.kube_api_requests = Counter(
            "koordlet_kube_api_requests",
            "Requests koordlet sent to the API server, by verb and resource",
            ["verb", "resource"],
            registry=self.registry,
        )

        self.nri_connected = Gauge(
            "koordlet_nri_connected",
            "1 while koordlet is registered with the runtime's NRI",
            ["node"],
            registry=self.registry,
        )
        self.nri_adjustments = Counter(
            "koordlet_nri_container_adjustments",
            "Containers whose settings koordlet set through NRI, by event",
            ["node", "event"],
            registry=self.registry,
        )

    def nri_state(self, node: str, connected: bool) -> None:
        self.nri_connected.labels(node=node).set(1 if connected else 0)

    def nri_adjusted(self, node: str, event: str) -> None:
        self.nri_adjustments.labels(node=node, event=event).inc()

    def api_request(self, verb: str, resource: str) -> None:
        self.kube_api_requests.labels(verb=verb, resource=resource).inc()

    def evicted(self, node: str, reason: str) -> None:
        self.pod_eviction.labels(node=node, reason=reason).inc()

    def started(self, node: str) -> None:
        self.start_time.labels(node=node).set(time.time())

    def reset(self) -> None:
        self.node_usage.clear()
        self.system_usage.clear()

    def record(self, node: str, status: NodeMetricStatus) -> None:
        """Record one node's reported usage (call :meth:`reset` once before a round of nodes)."""
        info = status.node_metric
        if info is None:
            return
        for gauge, usage in ((self.node_usage, info.node_usage), (self.system_usage, info.system_usage)):
            for resource, unit, value in _values(usage):
                gauge.labels(node=node, resource=resource, unit=unit).set(value)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _values(usage: ResourceMap | None) -> list[tuple[str, str, float]]:
    if usage is None or not usage.resources:
        return []
    out = []
    if (cpu := usage.resources.get("cpu")) is not None:
        out.append(("cpu", "core", cpu.milli_value() / 1000))
    if (memory := usage.resources.get("memory")) is not None:
        out.append(("memory", "byte", float(memory.value())))
    return out


async def serve(metrics: KoordletMetrics, host: str, port: int) -> web.AppRunner:
    """Start serving /metrics and /healthz; the caller cleans the runner up."""

    async def metrics_handler(_: web.Request) -> web.Response:
        response = web.Response(body=metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
