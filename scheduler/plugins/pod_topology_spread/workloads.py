"""The selector of a pod's default spread constraints: kube-scheduler's ``helper.DefaultSelector``.

The union of the selectors of the Services in the pod's namespace that select it, then its
controller's selector: a ReplicationController's label map is merged into that set, a ReplicaSet's
or StatefulSet's ``metav1.LabelSelector`` requirements are ANDed to it. Fed by the plugin's own
informers on those four kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from apis.client.backend import ResourceType, WatchEvent
from apis.client.rbac import PolicyRule
from apis.meta import LabelSelector
from apis.podkey import namespaced_ref
from apis.workloads import ReplicaSet, ReplicationController, Service, StatefulSet
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.pod_selector import Requirement, Selector

__all__ = ["REPLICASETS", "REPLICATIONCONTROLLERS", "SERVICES", "STATEFULSETS", "WORKLOADS_RBAC", "Workloads"]

SERVICES = ResourceType.of(Service)
REPLICATIONCONTROLLERS = ResourceType.of(ReplicationController)
REPLICASETS = ResourceType.of(ReplicaSet)
STATEFULSETS = ResourceType.of(StatefulSet)

WORKLOADS_RBAC = tuple(
    PolicyRule.watching(resource, why="The selector of a pod's default constraints.")
    for resource in (SERVICES, REPLICATIONCONTROLLERS, REPLICASETS, STATEFULSETS)
)

T = TypeVar("T", Service, ReplicationController, ReplicaSet, StatefulSet)
Store = dict[str, dict[str, Any]]
"""namespace -> name -> the object (a pod's selector only reads its own namespace)."""


def _requirements(selector: LabelSelector | None) -> frozenset[Requirement] | None:
    """A LabelSelector's requirements; None when it selects nothing (null or invalid), which
    upstream's ``Requirements()`` reports as not selectable and then adds nothing."""
    compiled = Selector.of(selector)
    return None if compiled.nothing else compiled.requirements


class Workloads:
    """The four kinds, by namespace and name, kept by watch events."""

    def __init__(self) -> None:
        self._stores: dict[ResourceType[Any], Store] = {
            SERVICES: {},
            REPLICATIONCONTROLLERS: {},
            REPLICASETS: {},
            STATEFULSETS: {},
        }
        self.version = 0
        """Counts the events taken: a selector read at one version holds until the next."""

    def listener(self, resource: ResourceType[T]) -> Callable[[WatchEvent[T]], None]:
        store = self._stores[resource]

        def upsert(obj: T) -> None:
            namespace, name = namespaced_ref(obj.metadata.namespace, obj.metadata.name)
            store.setdefault(namespace, {})[name] = obj
            self.version += 1

        def delete(obj: T) -> None:
            namespace, name = namespaced_ref(obj.metadata.namespace, obj.metadata.name)
            store.get(namespace, {}).pop(name, None)
            self.version += 1

        def replace(objects: Sequence[T]) -> None:
            store.clear()
            self.version += 1
            for obj in objects:
                upsert(obj)

        def on_event(event: WatchEvent[T]) -> None:
            event.dispatch(replace, upsert, delete)

        return on_event

    def resources(self) -> tuple[ResourceType[Any], ...]:
        return tuple(self._stores)

    def default_selector(self, pod: PodInfo) -> Selector:
        namespace = pod.namespace
        label_set: dict[str, str] = {}
        for service in self._stores[SERVICES].get(namespace, {}).values():
            selector = service.spec.selector
            if selector is None:  # a null selector selects nothing
                continue
            if all(pod.labels.get(k) == v for k, v in selector.items()):
                label_set.update(selector)
        requirements = set(_from_set(label_set))

        owner = next((o for o in pod.pod.metadata.owner_references or () if o.controller), None)
        if owner is not None:
            kind = (owner.api_version, owner.kind)
            if kind == ("v1", "ReplicationController"):
                rc = self._stores[REPLICATIONCONTROLLERS].get(namespace, {}).get(owner.name)
                if rc is not None:
                    label_set.update(rc.spec.selector or {})
                    requirements = set(_from_set(label_set))
            elif kind in (("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")):
                resource = REPLICASETS if owner.kind == "ReplicaSet" else STATEFULSETS
                workload = self._stores[resource].get(namespace, {}).get(owner.name)
                if workload is not None:
                    requirements |= _requirements(workload.spec.selector) or frozenset()
        return Selector(frozenset(requirements))


def _from_set(labels: dict[str, str]) -> list[Requirement]:
    return [Requirement(k, "In", frozenset((v,))) for k, v in labels.items()]
