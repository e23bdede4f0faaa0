"""One descheduling round (Koordinator's ``deschedulerOnce``) and the per-round eviction limits
(``evictor_proxy.go`` and ``evictions.EvictionLimiter``), over the informer caches."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from apis.client.backend import ClusterBackend, EventRecord, ObjectRef
from apis.core import Node, Pod
from apis.meta import LabelSelector, selects
from apis.slo.nodemetric import NodeMetric
from operators.descheduler.config import DeschedulerConfiguration, ResolvedProfile
from operators.descheduler.framework import ClusterObjects, DeschedulerHandle, EvictOptions, Evictor
from operators.descheduler.informers import Store
from operators.descheduler.registry import PluginFactory

__all__ = ["EvictorProxy", "Handle", "Profile", "RoundLimits", "ready", "run_round"]

log = logging.getLogger(__name__)


def ready(node: Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or ())


def _selected(selector: LabelSelector | None, node: Node) -> bool:
    return selector is None or selects(selector, node.metadata.labels or {})


@dataclass
class RoundLimits:
    """maxNoOfPodsToEvictPerNode / PerNamespace / Total, counting the jobs created this round."""

    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None
    _nodes: Counter[str] = field(default_factory=Counter)
    _namespaces: Counter[str] = field(default_factory=Counter)
    _total: int = 0

    def reset(self) -> None:
        self._nodes.clear()
        self._namespaces.clear()
        self._total = 0

    def allows(self, pod: Pod) -> str | None:
        node, namespace = pod.spec.node_name or "", pod.metadata.namespace or ""
        if self.per_node is not None and self._nodes[node] + 1 > self.per_node:
            return f"maxNoOfPodsToEvictPerNode {self.per_node} reached on node {node}"
        if self.per_namespace is not None and self._namespaces[namespace] + 1 > self.per_namespace:
            return f"maxNoOfPodsToEvictPerNamespace {self.per_namespace} reached in namespace {namespace}"
        if self.total is not None and self._total + 1 > self.total:
            return f"maxNoOfPodsToEvictTotal {self.total} reached"
        return None

    def done(self, pod: Pod) -> None:
        self._nodes[pod.spec.node_name or ""] += 1
        self._namespaces[pod.metadata.namespace or ""] += 1
        self._total += 1


class EvictorProxy:
    """What plugins call: the round limits, then the first Evict plugin (the MigrationController).
    With the global ``dryRun`` it only logs, and still counts."""

    def __init__(self, evictor: Evictor, limits: RoundLimits, dry_run: bool) -> None:
        self._evictor = evictor
        self.limits = limits
        self._dry_run = dry_run

    def filter(self, pod: Pod) -> bool:
        return self._evictor.filter(pod)

    def pre_eviction_filter(self, pod: Pod) -> bool:
        return self._evictor.pre_eviction_filter(pod)

    async def evict(self, pod: Pod, options: EvictOptions) -> bool:
        refused = self.limits.allows(pod)
        if refused is not None:
            log.info("not evicting %s/%s: %s", pod.metadata.namespace, pod.metadata.name, refused)
            return False
        if self._dry_run:
            log.info(
                "dry run: would evict %s/%s (%s: %s)",
                pod.metadata.namespace,
                pod.metadata.name,
                options.plugin_name,
                options.reason,
            )
            self.limits.done(pod)
            return True
        if not await self._evictor.evict(pod, options):
            return False
        self.limits.done(pod)
        return True


class Handle:
    """The ``DeschedulerHandle`` of one profile."""

    def __init__(
        self,
        store: Store,
        evictor: Evictor,
        backend: ClusterBackend | None,
        node_selector: LabelSelector | None,
        objects: ClusterObjects | None = None,
    ) -> None:
        self._store = store
        self._evictor = evictor
        self._backend = backend
        self._selector = node_selector
        self._objects = objects

    @property
    def evictor(self) -> Evictor:
        return self._evictor

    @property
    def objects(self) -> ClusterObjects:
        if self._objects is None:
            raise RuntimeError("this descheduler handle has no API client")
        return self._objects

    def nodes(self) -> Sequence[Node]:
        return [n for n in self._store.nodes() if _selected(self._selector, n)]

    def pods_on_node(self, node_name: str) -> Sequence[Pod]:
        return self._store.pods_on_node(node_name)

    def node_metric(self, node_name: str) -> NodeMetric | None:
        return self._store.node_metric(node_name)

    async def record_event(
        self, regarding: Pod | Node, reason: str, message: str, type_: str = "Normal"
    ) -> None:
        if self._backend is None:
            return
        meta = regarding.metadata
        await self._backend.record_event(
            EventRecord(
                regarding=ObjectRef(
                    kind=regarding.kind or "", namespace=meta.namespace, name=meta.name or "", uid=meta.uid
                ),
                type=type_,
                reason=reason,
                message=message,
                action="Descheduling",
                reporting_controller="koord-descheduler",
            )
        )


@dataclass
class Profile:
    resolved: ResolvedProfile
    handle: DeschedulerHandle
    deschedule: list[Any]
    balance: list[Any]


def build_profile(
    resolved: ResolvedProfile,
    handle: DeschedulerHandle,
    registry: dict[str, PluginFactory],
) -> Profile:
    def build(names: Sequence[str]) -> list[Any]:
        out = []
        for name in names:
            factory = registry[name]
            if factory.new is not None:
                out.append(factory.new(resolved.args[name], handle))
        return out

    return Profile(resolved, handle, build(resolved.deschedule), build(resolved.balance))


async def run_round(
    config: DeschedulerConfiguration, store: Store, profiles: Sequence[Profile], limits: RoundLimits
) -> bool:
    """One round; False when it was skipped (one node or none) or a profile failed."""
    nodes = [n for n in store.nodes() if ready(n) and _selected(config.node_selector, n)]
    if len(nodes) <= 1:
        log.info("descheduling round skipped: %d ready node(s) match, at least 2 are needed", len(nodes))
        return False
    limits.reset()
    for stage in ("deschedule", "balance"):
        for profile in profiles:
            mine = [n for n in nodes if _selected(profile.resolved.node_selector, n)]
            for plugin in getattr(profile, stage):
                try:
                    await getattr(plugin, stage)(mine)
                except Exception:
                    log.exception(
                        "profile %s: %s plugin %s failed", profile.resolved.name, stage, plugin.name
                    )
                    return False
    return True
