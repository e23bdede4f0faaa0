"""The shared in-memory state koordlet's loops read, and their "changed" notifications.

Informers write it (:meth:`States.replace`, :meth:`States.upsert`, :meth:`States.delete`); loops
read it and :meth:`States.subscribe` to the kinds they care about, so that a loop sleeping until its
next round wakes as soon as one of them changes. Tests fill a ``States`` directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from contextlib import suppress
from typing import Any, TypeVar

from pydantic import BaseModel

from apis.core import Node, Pod
from apis.slo.nodemetric import NodeMetric
from apis.slo.nodeslo import NodeSLO
from apis.topology import NodeResourceTopology
from koordlet.states.resources import Kind

__all__ = ["States", "Subscription", "object_key"]

_M = TypeVar("_M", bound=BaseModel)


def object_key(obj: Any) -> str:
    """``namespace/name`` (``name`` for cluster-scoped objects), from a model or its JSON."""
    meta = obj.get("metadata") or {} if isinstance(obj, dict) else obj.metadata
    namespace = meta.get("namespace") if isinstance(meta, dict) else meta.namespace
    name = meta.get("name") if isinstance(meta, dict) else meta.name
    return f"{namespace}/{name}" if namespace else str(name or "")


class Subscription:
    """Set when one of its kinds changed since the last :meth:`wait`."""

    def __init__(self, kinds: frozenset[Kind]) -> None:
        self.kinds = kinds
        self._event = asyncio.Event()

    def notify(self, kind: Kind) -> None:
        if kind in self.kinds:
            self._event.set()

    async def wait(self, seconds: float | None = None) -> bool:
        """Wait for a change (at most ``seconds``); True when there was one."""
        with suppress(TimeoutError):  # asyncio.timeout: 3.11's wait_for can swallow a cancel
            async with asyncio.timeout(seconds):
                await self._event.wait()
        changed = self._event.is_set()
        self._event.clear()
        return changed


class States:
    """Nodes, pods (indexed by node), NodeSLOs, NodeMetrics and NodeResourceTopologies by name."""

    def __init__(self) -> None:
        self._objects: dict[Kind, dict[str, BaseModel]] = {kind: {} for kind in Kind}
        self._pods_by_node: dict[str, dict[str, Pod]] = {}
        self._synced: dict[Kind, asyncio.Event] = {kind: asyncio.Event() for kind in Kind}
        self._subscriptions: list[Subscription] = []
        self.generation: dict[Kind, int] = dict.fromkeys(Kind, 0)

    # ------------------------------------------------------------------ writes (informers)

    def replace(self, kind: Kind, objects: Iterable[BaseModel]) -> None:
        """The result of a (re)list: every object of the kind; marks the kind synced."""
        self._objects[kind] = {object_key(obj): obj for obj in objects}
        if kind is Kind.POD:
            self._pods_by_node = {}
            for key, pod in self._objects[kind].items():
                assert isinstance(pod, Pod)
                self._pods_by_node.setdefault(pod.spec.node_name or "", {})[key] = pod
        self._synced[kind].set()
        self._changed(kind)

    def upsert(self, kind: Kind, obj: BaseModel) -> None:
        key = object_key(obj)
        if kind is Kind.POD:
            self._unindex(key)
            assert isinstance(obj, Pod)
            self._pods_by_node.setdefault(obj.spec.node_name or "", {})[key] = obj
        self._objects[kind][key] = obj
        self._changed(kind)

    def delete(self, kind: Kind, key: str) -> None:
        if kind is Kind.POD:
            self._unindex(key)
        if self._objects[kind].pop(key, None) is not None:
            self._changed(kind)

    def mark_synced(self, kind: Kind) -> None:
        self._synced[kind].set()

    def _unindex(self, key: str) -> None:
        old = self._objects[Kind.POD].get(key)
        if isinstance(old, Pod):
            on_node = self._pods_by_node.get(old.spec.node_name or "")
            if on_node is not None:
                on_node.pop(key, None)
                if not on_node:
                    del self._pods_by_node[old.spec.node_name or ""]

    def _changed(self, kind: Kind) -> None:
        self.generation[kind] += 1
        for subscription in self._subscriptions:
            subscription.notify(kind)

    # ------------------------------------------------------------------ notifications

    def subscribe(self, *kinds: Kind) -> Subscription:
        subscription = Subscription(frozenset(kinds))
        self._subscriptions.append(subscription)
        return subscription

    def synced(self, *kinds: Kind) -> bool:
        return all(self._synced[kind].is_set() for kind in kinds or tuple(Kind))

    async def wait_synced(self, *kinds: Kind) -> None:
        """Until each kind (every kind when none is named) has been listed once."""
        for kind in kinds or tuple(Kind):
            await self._synced[kind].wait()

    # ------------------------------------------------------------------ reads

    def get(self, kind: Kind, key: str) -> BaseModel | None:
        return self._objects[kind].get(key)

    def _get(self, kind: Kind, name: str, model: type[_M]) -> _M | None:
        found = self._objects[kind].get(name)
        return found if isinstance(found, model) else None

    def _all(self, kind: Kind, model: type[_M]) -> list[_M]:
        return [obj for obj in self._objects[kind].values() if isinstance(obj, model)]

    def node(self, name: str) -> Node | None:
        return self._get(Kind.NODE, name, Node)

    def nodes(self) -> list[Node]:
        return self._all(Kind.NODE, Node)

    def pods(self, node_name: str | None = None) -> list[Pod]:
        """The pods bound to ``node_name`` (every bound pod when None)."""
        if node_name is None:
            return [pod for pods in self._pods_by_node.values() for pod in pods.values()]
        return list(self._pods_by_node.get(node_name, {}).values())

    def node_slo(self, name: str) -> NodeSLO | None:
        return self._get(Kind.NODE_SLO, name, NodeSLO)

    def node_slos(self) -> list[NodeSLO]:
        return self._all(Kind.NODE_SLO, NodeSLO)

    def node_metric(self, name: str) -> NodeMetric | None:
        return self._get(Kind.NODE_METRIC, name, NodeMetric)

    def node_metrics(self) -> list[NodeMetric]:
        return self._all(Kind.NODE_METRIC, NodeMetric)

    def topology(self, name: str) -> NodeResourceTopology | None:
        return self._get(Kind.TOPOLOGY, name, NodeResourceTopology)
