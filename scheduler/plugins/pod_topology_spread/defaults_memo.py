"""A pod's default constraints, kept for the next pod of its workload.

Pods without constraints of their own get the defaults with their default selector
(``Workloads.default_selector``), which reads the pod's namespace, labels and controller and the
Services, ReplicationControllers, ReplicaSets and StatefulSets known: every replica of a Deployment
asks it again, at PreFilter and PreScore. The replicas share their labels and owner references
(``cache.sharing``), so the answer is kept by the identity of those two objects (held, so that their
ids are not reused) while the workloads are unchanged (``Workloads.version``); an unshared pod only
misses.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.pod_topology_spread.constraints import Constraint

__all__ = ["DefaultsMemo"]

_Key = tuple[str, str, int, int]
"""The action, the namespace, and the ids of the labels and the owner references."""
_Kept = tuple[object, object, int, tuple[Constraint, ...]]
"""The labels and owner references (held), the workloads' version, the constraints."""


class DefaultsMemo:
    def __init__(
        self,
        compute: Callable[[PodInfo, str], tuple[Constraint, ...]],
        version: Callable[[], int],
        capacity: int = 1024,
    ) -> None:
        self._compute = compute
        self._version = version
        self._capacity = capacity
        self._kept: dict[_Key, _Kept] = {}

    def constraints(self, pod: PodInfo, action: str) -> tuple[Constraint, ...]:
        """``compute(pod, action)``, kept while its inputs are the same objects and versions."""
        labels, owners = pod.labels, pod.pod.metadata.owner_references
        key = (action, pod.namespace, id(labels), id(owners))
        version = self._version()
        kept = self._kept.get(key)
        if kept is not None and kept[0] is labels and kept[1] is owners and kept[2] == version:
            return kept[3]
        found = self._compute(pod, action)
        if len(self._kept) >= self._capacity:
            self._kept.clear()
        self._kept[key] = (labels, owners, version, found)
        return found
