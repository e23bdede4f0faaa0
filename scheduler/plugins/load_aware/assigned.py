"""Koordinator's podAssignCache: every pod assigned to a node (bound, or assumed by a cycle) with
its estimate and the time it was assigned, fed by the scheduler cache as a ``PodObserver``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from apis.extension.priority import PRIORITY_PROD
from scheduler.cache.node_table import IntArray, NodeTable
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.load_aware.estimator import Estimator, assigned_at, priority_class

__all__ = ["AssignedPod", "AssignedPods"]


@dataclass(frozen=True, slots=True)
class AssignedPod:
    key: str
    """``namespace/name``, as the NodeMetric names pods."""
    estimate: IntArray
    assigned_at: float
    deadline: float | None
    """Estimated, whatever the metric says, while the metric is older than this (None: no window)."""
    prod: bool
    """koord-prod by its own priority class."""


class AssignedPods:
    """Assigned pods per node name; ``changed(node)`` is called whenever a node's set changes."""

    def __init__(
        self,
        table: NodeTable,
        estimator: Estimator,
        clock: Callable[[], float],
        changed: Callable[[str], None],
    ) -> None:
        self._table = table
        self._estimator = estimator
        self._clock = clock
        self._changed = changed
        self.by_node: dict[str, dict[str, AssignedPod]] = {}
        self._just_removed: dict[str, tuple[str, float]] = {}
        """uid -> (node, assign time) of pods removed since ``settle``: the cache updates a pod by
        removing and adding it, and an update must not move its assign time."""

    def assign(self, pod: PodInfo, node: str) -> None:
        pods = self.by_node.setdefault(node, {})
        if pod.uid in pods:
            return
        previous = self._just_removed.pop(pod.uid, None)
        at = previous[1] if previous is not None and previous[0] == node else assigned_at(pod, self._clock())
        klass = priority_class(pod.pod)
        pods[pod.uid] = AssignedPod(
            key=pod.key,
            estimate=self._estimator.estimate(pod, klass),
            assigned_at=at,
            deadline=self._estimator.deadline(pod, at),
            prod=klass == PRIORITY_PROD,
        )
        self._changed(node)

    def unassign(self, uid: str, node: str) -> None:
        pods = self.by_node.get(node)
        gone = pods.pop(uid, None) if pods is not None else None
        if pods is None or gone is None:
            return
        self._just_removed[uid] = (node, gone.assigned_at)
        if not pods:
            del self.by_node[node]
        self._changed(node)

    def settle(self) -> None:
        """Forget the assign times of removed pods (called between cycles)."""
        self._just_removed.clear()

    # ---- PodObserver -------------------------------------------------------------------------

    def pod_added(self, pod: PodInfo, row: int) -> None:
        if not pod.is_terminal():
            self.assign(pod, self._table.names[row])

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        self.unassign(pod.uid, self._table.names[row])
