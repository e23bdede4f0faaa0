"""The read view a scheduling cycle works on.

A cycle runs synchronously from taking its snapshot to assuming its pod (no await in between),
so the snapshot is the cache itself seen through a narrow interface: O(1) to take, and what a
plugin reads is exactly what the assume will change. Anything that awaits in the middle of a
decision (the CP-SAT solver run in a thread) must copy what it needs first.

``simulate_removal`` answers "what if these pods were gone" in place and returns the undo, so
preemption can try victim sets on one snapshot: their requests, non-zero requests and host ports
are released, as kube-scheduler's ``NodeInfo.RemovePod`` releases them. ``lift_nominations``
releases, for one cycle, the resources (and host ports) held for nominated pods that must not
block the pod being scheduled. ``lift_reserved`` does the same, until ``close``, for the room
placed reservations hold (their stand-in pods) that the pod being scheduled may use: the
Reservation plugin's restore, so that every other plugin sees reserved room as free.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import numpy as np

from scheduler.cache.cache import Cache, NodeInfo, Nomination
from scheduler.cache.node_table import BoolArray, IntArray, NodeTable
from scheduler.cache.pod_info import HostPort, PodInfo
from scheduler.cache.pod_selector import PodMatcher, PodObserver

__all__ = ["Snapshot"]

_O = TypeVar("_O", bound=PodObserver)


def _hold_nothing() -> None:
    """What ``lift_nominations`` returns when it lifted nothing."""


class Snapshot:
    __slots__ = ("_cache", "_lifted", "_lifted_reserved", "generation")

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self.generation = cache.generation
        self._lifted: set[str] = set()
        self._lifted_reserved: dict[str, tuple[str, int, PodInfo]] = {}

    @property
    def version(self) -> int:
        """Changes whenever anything free anywhere changes (for results cached across cycles)."""
        return self._cache.version

    @property
    def table(self) -> NodeTable:
        return self._cache.table

    def candidate_rows(self) -> IntArray:
        """Rows of every node that exists (has a Node object)."""
        return self._cache.table.active_rows()

    def node_at(self, row: int) -> NodeInfo:
        return self._cache.nodes[self._cache.table.names[row]]

    def node(self, name: str) -> NodeInfo | None:
        return self._cache.nodes.get(name)

    def node_count(self) -> int:
        return self._cache.node_count()

    def label_mask(self, key: str, values: frozenset[str] | None = None) -> BoolArray:
        """Rows whose node has label ``key`` (with one of ``values``), as a full-length mask."""
        return self._cache.label_mask(key, values)

    def label_values(self, key: str) -> dict[str, set[int]]:
        return self._cache.label_values(key)

    def label_domains(self, key: str) -> tuple[IntArray, tuple[str, ...]]:
        """The topology domains of node label ``key``: a domain id per row (-1: no such label)
        and each id's value."""
        return self._cache.label_domains(key)

    def matching_pod_counts(self, matcher: PodMatcher) -> IntArray:
        """How many assigned pods ``matcher`` matches on each row (read-only, row-count long)."""
        return self._cache.pod_selector_counts.counts(matcher, self._cache.table.row_count)

    def observer(self, key: str, factory: Callable[[], _O]) -> _O:
        """A plugin's own pod index over this cache (``Cache.observer``): made and fed every
        assigned pod on first ask, then told of every pod added or removed, simulated removals
        included."""
        return self._cache.observer(key, factory)

    def pods_on(self, node: str) -> Iterable[PodInfo]:
        info = self._cache.nodes.get(node)
        return info.pods.values() if info is not None else ()

    def has_pod_below(self, priority: int) -> bool:
        """Whether any node holds a pod (withdrawn for the moment or not) of lower priority."""
        return self._cache.has_pod_below(priority)

    def simulate_removal(self, pods: Iterable[PodInfo]) -> Callable[[], None]:
        """Release ``pods``' requests on their nodes; the returned callable puts them back."""
        removed: list[tuple[PodInfo, int]] = []
        rows = self._cache.table.row
        for pod in pods:
            node = self._cache.node_of(pod.uid)
            if node is not None:
                removed.append((pod, rows[node]))
        self._cache.withdraw_many(removed)

        def restore() -> None:
            self._cache.reinstate_many(removed)

        return restore

    def simulate_return(self, pods: Iterable[PodInfo]) -> Callable[[], None]:
        """Put back, for a moment, pods a ``simulate_removal`` took out (what Filter says with one
        victim spared); the returned callable takes them out again."""
        returned: dict[str, tuple[PodInfo, int]] = {}
        rows = self._cache.table.row
        for pod in pods:
            node = self._cache.node_of(pod.uid)
            if node is not None and self._cache.is_withdrawn(pod.uid):
                returned.setdefault(pod.uid, (pod, rows[node]))
        self._cache.reinstate_many(list(returned.values()))

        def undo() -> None:
            self._cache.withdraw_many(list(returned.values()))

        return undo

    def lift_nominations(self, lift: Callable[[Nomination], bool]) -> Callable[[], None]:
        """Release what the nominations ``lift`` selects hold; the returned callable holds it again.

        A nomination already lifted through this snapshot is not lifted twice (the cycle lifts the
        pod's own; a plugin planning the pod's whole job lifts the rest). Additions commute, so a
        nomination that ends (or a pod that binds) while lifted leaves the accounting right once
        the lift is undone; a node that went away in between is skipped."""
        nominations = self._cache.nominations()
        if not nominations:  # most cycles: nothing to lift, nothing to hold again
            return _hold_nothing
        lifted: list[tuple[str, int, PodInfo]] = []
        table = self._cache.table
        for nomination in nominations:
            uid = nomination.pod.uid
            if uid in self._lifted or not lift(nomination):
                continue
            row = table.row.get(nomination.node)
            if row is not None:
                lifted.append((nomination.node, row, nomination.pod))
                self._lifted.add(uid)
        table.add_requests_many(
            [row for _, row, _ in lifted], [pod.requests for _, _, pod in lifted], sign=-1
        )
        ports = self._cache.ports
        for _, row, pod in lifted:
            ports.add(row, pod.host_ports, sign=-1)

        def restore() -> None:
            back = [(row, pod) for node, row, pod in lifted if table.row.get(node) == row]
            table.add_requests_many([row for row, _ in back], [pod.requests for _, pod in back])
            for row, pod in back:
                ports.add(row, pod.host_ports)
            for _, _, pod in lifted:
                self._lifted.discard(pod.uid)

        return restore

    def lift_reserved(self, pods: Iterable[PodInfo]) -> None:
        """Release, until ``close``, what the assigned stand-in pods ``pods`` hold on their nodes
        (requests and non-zero requests; observers are not told: nothing but the room changes).

        A pod already lifted through this snapshot is not lifted twice. Additions commute, so a
        stand-in that is re-accounted with other requests while lifted (an owner reserved into its
        reservation) leaves the accounting right once ``close`` puts back what was taken."""
        table = self._cache.table
        lifted: list[tuple[int, PodInfo]] = []
        for pod in pods:
            if pod.uid in self._lifted_reserved:
                continue
            node = self._cache.node_of(pod.uid)
            row = table.row.get(node) if node is not None else None
            if node is None or row is None:
                continue
            counted = self._cache.pod(pod.uid) or pod
            lifted.append((row, counted))
            self._lifted_reserved[pod.uid] = (node, row, counted)
        table.add_requests_many([row for row, _ in lifted], [pod.requests for _, pod in lifted], sign=-1)
        for row, pod in lifted:
            table.add_non_zero(row, pod.non_zero, sign=-1)

    def is_lifted_reserved(self, uid: str) -> bool:
        """Whether ``lift_reserved`` released this stand-in's room through this snapshot."""
        return uid in self._lifted_reserved

    def is_withdrawn(self, uid: str) -> bool:
        """Whether a ``simulate_removal`` holds this assigned pod out right now (a preemption victim)."""
        return self._cache.is_withdrawn(uid)

    def withdrawn(self) -> frozenset[str]:
        """Every assigned pod a ``simulate_removal`` holds out right now."""
        return self._cache.withdrawn()

    def is_lifted(self, uid: str) -> bool:
        """Whether ``lift_reserved`` released what this stand-in pod holds, in this snapshot."""
        return uid in self._lifted_reserved

    def close(self) -> None:
        """Put back what ``lift_reserved`` released (the end of the cycle); idempotent."""
        table = self._cache.table
        back = [(row, pod) for node, row, pod in self._lifted_reserved.values() if table.row.get(node) == row]
        table.add_requests_many([row for row, _ in back], [pod.requests for _, pod in back])
        for row, pod in back:
            table.add_non_zero(row, pod.non_zero)
        self._lifted_reserved.clear()

    def host_port_conflicts(self, wanted: Iterable[HostPort]) -> BoolArray:
        """Full-length mask of the rows where a pod holding (or nominated with) a host port
        conflicts with one of ``wanted``."""
        return self._cache.ports.conflict_mask(wanted, self._cache.table.row_count)

    def image_rows(self, name: str) -> IntArray:
        """Rows whose node reports the image ``name`` (exactly as written in ``status.images``)."""
        return self._cache.images.rows(name)

    def image_size(self, name: str) -> int:
        """The image's size in bytes, as the first node still reporting it gave it (0: no node)."""
        return self._cache.images.size(name)

    def rows_named(self, rows: IntArray, names: frozenset[str]) -> BoolArray:
        """Which of ``rows`` belong to the nodes ``names`` (a PreFilter result), vectorised."""
        index = self._cache.table.row
        wanted = np.fromiter((index[n] for n in names if n in index), dtype=np.int64)
        mask: BoolArray = np.isin(rows, wanted)
        return mask

    def pod(self, uid: str) -> PodInfo | None:
        """An assigned (bound or assumed) pod by uid."""
        return self._cache.pod(uid)

    def node_of(self, uid: str) -> str | None:
        return self._cache.node_of(uid)

    def assigned_pods(self) -> Iterable[PodInfo]:
        return self._cache.assigned_pods()

    def nominated_node(self, uid: str) -> str | None:
        return self._cache.nominated_node(uid)

    def is_assumed(self, uid: str) -> bool:
        """Assumed (placed by us, binding not yet confirmed by the watch)."""
        return self._cache.is_assumed(uid)

    def full_mask(self, rows: IntArray) -> BoolArray:
        mask = np.zeros(self._cache.table.row_count, dtype=np.bool_)
        mask[rows] = True
        return mask
