"""koordlet's QoS manager on a real node: every second, the node's effective NodeSLO, its pods and
the metric cache drive the cgroup and resctrl writers and the eviction features.

The NodeSLO, the Node and the pods come from koordlet's watched states, read every round (koordlet
keeps running on the defaults, every feature off, while there is no NodeSLO; a NodeSLO that does not
parse leaves the last good one in the states). A malformed QoS annotation is reported
as a Warning event on its pod, once per pod and problem, and the pod gets its class's settings.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol, runtime_checkable

import aiohttp
from kubernetes_asyncio import client

from apis.core import Node, Pod
from apis.errors import InvalidAnnotation
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.metric_cache import MetricCache
from koordlet.metrics import KoordletMetrics
from koordlet.qos.batch_reconcile import BatchResourceReconciler
from koordlet.qos.cpu_normalization import CPUNormalizer, node_ratio
from koordlet.qos.eviction import EvictionInputs, EvictionPlanner, execute
from koordlet.qos.evictor import EvictionAPI, Evictor
from koordlet.qos.node_qos import NodeQoS
from koordlet.qos.pods import qos_pod
from koordlet.qos.slo import effective_spec
from koordlet.states.resources import Kind
from koordlet.states.store import States

__all__ = ["EVENT_INVALID_ANNOTATION", "NodeEventAPI", "QoSAPI", "QoSManager"]

log = logging.getLogger("koordlet.qos")

EVENT_INVALID_ANNOTATION = "InvalidQoSAnnotation"


@runtime_checkable
class NodeEventAPI(Protocol):
    async def node_event(self, node: Node, reason: str, message: str) -> None: ...


class QoSAPI(EvictionAPI, NodeEventAPI, Protocol):
    """What the manager writes (``koordlet.client.QoSClient`` in koordlet): evictions and events."""


class QoSManager:
    def __init__(
        self,
        node_name: str,
        node_qos: NodeQoS | None,
        cache: MetricCache,
        gates: KoordletFeatureGates,
        interval_seconds: float = 1.0,
        metrics: KoordletMetrics | None = None,
        *,
        apply_batch_resources: bool = True,
    ) -> None:
        self.metrics = metrics
        self.node_name = node_name
        self.node_qos = node_qos
        self.cache = cache
        self.gates = gates
        self.interval = interval_seconds
        self.planner = EvictionPlanner(gates)
        self.spec: NodeSLOSpec = effective_spec(None)
        self.node: Node | None = None
        self.pods: list[Pod] = []
        self._reported: set[tuple[str, str]] = set()
        self.normalizer = (
            CPUNormalizer(node_qos.writer, node_qos.layout, gates) if node_qos is not None else None
        )
        self.batch_resources = (
            BatchResourceReconciler(node_qos.writer, node_qos.layout, gates)
            if node_qos is not None and apply_batch_resources
            else None
        )
        """None with ``--apply-batch-resources=false``: BE pods' cgroups are left to NRI."""
        self._slo_seen: bool | None = None

    def refresh(self, states: States) -> None:
        slo = states.node_slo(self.node_name)
        if (slo is not None) != self._slo_seen:
            self._slo_seen = slo is not None
            log.info(
                "NodeSLO %s %s", self.node_name, "found" if slo else "not found: running on the defaults"
            )
        self.spec = effective_spec(slo.spec if slo else None)
        self.node = states.node(self.node_name)
        self.pods = [p for p in states.pods(self.node_name) if p.status.phase not in ("Succeeded", "Failed")]

    async def round(self, states: States, evictor: Evictor) -> None:
        now = time.time()
        self.refresh(states)
        pods = [qos_pod(p) for p in self.pods]
        if self.node_qos is not None:
            report = self.node_qos.reconcile(self.spec, pods, self.cache, now)
            by_uid = {p.metadata.uid: p for p in self.pods}
            for pod, problem in report.annotation_errors:
                if (pod.uid, problem) in self._reported or pod.uid not in by_uid:
                    continue
                self._reported.add((pod.uid, problem))
                log.warning("pod %s: %s", pod.key, problem)
                await evictor.api.pod_event(
                    by_uid[pod.uid], EVENT_INVALID_ANNOTATION, problem, "Warning", self.node_name
                )
        if self.node is None:
            return
        await self.normalize_cfs_quota(self.node, evictor.api)
        node_qos = self.node_qos
        inputs = EvictionInputs(
            node=self.node,
            pods=self.pods,
            spec=self.spec,
            source=self.cache,
            series_key=lambda p: p.metadata.uid or "",
            now=now,
            be_real_limit_milli=lambda _window: node_qos.be_real_limit_milli() if node_qos else None,
        )
        decisions = self.planner.plan(inputs)
        if decisions:
            await execute(self.planner, evictor, self.node_name, decisions, now)

    async def normalize_cfs_quota(self, node: Node, api: EvictionAPI) -> None:
        """The pods' quotas on the node's CPU-normalization ratio, and BE pods' batch-resource cgroups
        (their quota is divided by it too). A malformed ratio changes nothing and is reported once
        per value as an event on the node."""
        if self.normalizer is None:
            return
        try:
            ratio = node_ratio(node.metadata.annotations)
        except InvalidAnnotation as exc:
            key = ("node", str(exc))
            if key not in self._reported:
                self._reported.add(key)
                log.warning("node %s: %s", self.node_name, exc)
                if isinstance(api, NodeEventAPI):
                    await api.node_event(node, EVENT_INVALID_ANNOTATION, str(exc))
            return
        self.normalizer.apply(self.pods, ratio)
        if self.batch_resources is not None:
            self.batch_resources.apply(self.pods, ratio, self.spec)

    async def run(self, api: QoSAPI, states: States) -> None:
        evictor = Evictor(api, on_evicted=self.metrics.evicted if self.metrics else None)
        await states.wait_synced(Kind.NODE, Kind.POD, Kind.NODE_SLO)
        while True:
            try:
                await self.round(states, evictor)
            except (TimeoutError, client.ApiException, aiohttp.ClientError, OSError, ValueError) as exc:
                log.warning("QoS round failed, retrying: %s", exc)
            except Exception:
                # a bug in one round must not stop koordlet's QoS (nor its reporting, in the same gather)
                log.exception("QoS round failed unexpectedly, retrying")
            await asyncio.sleep(self.interval)
