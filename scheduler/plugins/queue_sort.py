"""PrioritySort: the order in which pending pods are popped from the active queue.

As Koordinator orders them:

1. higher ``spec.priority`` first;
2. then higher Koordinator sub-priority (label ``koordinator.sh/priority``, ``PodInfo.sub_priority``);
3. then earlier creation time;
4. then namespace and name, so that the order is total and deterministic.

Gang-aware ordering (members of a PodGroup kept together, ordered by the gang's creation time) comes
with the Coscheduling plugin; this key is the fallback for pods outside any gang.
"""

from __future__ import annotations

from typing import Any

from scheduler.cache.pod_info import PodInfo
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import ClusterEvent, QueueSortPlugin
from scheduler.framework.registry import PluginSpec

__all__ = ["NAME", "PLUGIN", "PrioritySort", "new"]

NAME = "PrioritySort"


class PrioritySort(QueueSortPlugin):
    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent(0)  # ordering only: it never rejects a pod

    def sort_key(self, pod: PodInfo) -> tuple[Any, ...]:
        return (-pod.priority, -pod.sub_priority, pod.created, pod.namespace, pod.name)


def new(args: None, handle: Handle) -> PrioritySort:
    return PrioritySort()


PLUGIN = PluginSpec(NAME, new)
