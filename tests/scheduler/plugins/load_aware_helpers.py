"""Building LoadAwareScheduling over a snapshot, NodeMetric objects and pods for its tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from apis.client.backend import EventType, WatchEvent
from apis.core import Node, Pod
from apis.slo.nodemetric import NodeMetric
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import Handle
from scheduler.plugins.load_aware import LoadAwareScheduling, LoadAwareSchedulingArgs
from scheduler.plugins.load_aware.plugin import NODEMETRICS
from tests.scheduler.builders import make_cache

NOW = 1_800_000_000.0
"""The tests' wall clock (POSIX seconds)."""


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def node_metric(
    node: str,
    usage: Mapping[str, str] | None = None,
    *,
    updated: float | None = NOW - 10,
    pods: Iterable[tuple[str, Mapping[str, str], str | None]] = (),
    aggregated: Iterable[tuple[str, Mapping[str, Mapping[str, str]]]] = (),
    system: Mapping[str, str] | None = None,
    report_interval: int | None = None,
) -> NodeMetric:
    """``pods``: (namespace/name, usage, priority class); ``aggregated``: (window, type -> usage)."""
    status: dict[str, Any] = {}
    if updated is not None:
        status["updateTime"] = iso(updated)
    if usage is not None:
        info: dict[str, Any] = {"nodeUsage": {"resources": dict(usage)}}
        if system is not None:
            info["systemUsage"] = {"resources": dict(system)}
        windows = [
            {"duration": window, "usage": {kind: {"resources": dict(u)} for kind, u in kinds.items()}}
            for window, kinds in aggregated
        ]
        if windows:
            info["aggregatedNodeUsages"] = windows
        status["nodeMetric"] = info
    pod_metrics = []
    for key, pod_usage, priority in pods:
        namespace, name = key.split("/")
        entry: dict[str, Any] = {
            "namespace": namespace,
            "name": name,
            "podUsage": {"resources": dict(pod_usage)},
        }
        if priority is not None:
            entry["priority"] = priority
        pod_metrics.append(entry)
    if pod_metrics:
        status["podsMetric"] = pod_metrics
    spec: dict[str, Any] = {}
    if report_interval is not None:
        spec["metricCollectPolicy"] = {"reportIntervalSeconds": report_interval}
    return NodeMetric.model_validate({"metadata": {"name": node}, "spec": spec, "status": status})


def pod(
    name: str,
    requests: Mapping[str, str] | None = None,
    *,
    limits: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node: str | None = None,
    scheduled_at: float | None = None,
    initialized_at: float | None = None,
    daemonset: bool = False,
    priority: int | None = None,
) -> Pod:
    """A one-container pod; ``scheduled_at`` / ``initialized_at`` set its conditions' times."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": name, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    if daemonset:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds"}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}
    if node is not None:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    conditions = []
    if scheduled_at is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(scheduled_at)})
    if initialized_at is not None:
        conditions.append(
            {"type": "Initialized", "status": "True", "lastTransitionTime": iso(initialized_at)}
        )
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if conditions:
        status["conditions"] = conditions
    return Pod.model_validate({"metadata": meta, "spec": spec, "status": status})


class Rig:
    """A cache, its snapshot, and the plugin subscribed through a Handle, with a settable clock."""

    def __init__(
        self,
        nodes: Iterable[Node],
        args: LoadAwareSchedulingArgs | None = None,
        *,
        assigned: Iterable[Pod] = (),
        metrics: Iterable[NodeMetric] = (),
    ) -> None:
        self.now = NOW
        self.cache: Cache = make_cache(nodes, assigned)
        self.handle = Handle(backend=None, snapshot=lambda: self.snapshot)  # type: ignore[arg-type]
        self.plugin = LoadAwareScheduling(args or LoadAwareSchedulingArgs(), self.handle, lambda: self.now)
        self.publish(*metrics)

    @property
    def snapshot(self) -> Snapshot:
        """A snapshot of the cache as it is now (a cycle takes one each time)."""
        return Snapshot(self.cache)

    def publish(self, *metrics: NodeMetric, deleted: bool = False) -> None:
        """Deliver NodeMetric watch events the way the scheduler's informer does."""
        for metric in metrics:
            event = WatchEvent(EventType.DELETED if deleted else EventType.MODIFIED, metric)
            for listener in self.handle.informers.listeners(NODEMETRICS):
                listener(event)

    def assume(self, obj: Pod, node: str) -> PodInfo:
        """A cycle placed ``obj`` on ``node``: the cache assumes it (binding not confirmed yet)."""
        info = PodInfo.of(obj)
        self.cache.assume(info, node)
        return info
