"""The scheduler's only mutable cluster state: nodes, the pods assigned to them, assumed pods.

Written by ``scheduler.events`` (the informer glue) and by the scheduling loop (assume / forget);
read by plugins through a ``Snapshot``. Everything runs on one asyncio event loop, and a scheduling
cycle does not await between taking its snapshot and assuming its pod, so the snapshot is a view
of this cache rather than a copy (see ``snapshot.py``).

Assumed pods: the loop assumes a pod on its node before binding starts, so the next cycle already
sees the resources taken. The watch confirms the binding (the pod comes back with that nodeName);
if binding fails the binder forgets the pod; if the binding finished but no confirmation arrives
within ``assumed_ttl`` seconds, the assumption expires and the resources are released.

Nominated pods: a preemptor waiting for its victims to terminate is nominated to a node, and its
requests are held there (counted in the node's requested amounts) so that other pods do not take
what the preemption frees. A cycle lifts the nominations that must not block its pod (its own,
its job's, and those of lower priority, as kube-scheduler's nominator does) for the duration of
the cycle (``Snapshot.lift_nominations``). A nomination ends when the pod is assumed, bound or
deleted, or when its node goes away.

Beside the requests, every assigned pod's non-zero cpu/memory (``NodeTable.non_zero``) and host
ports (``host_ports``) are counted on its node, and every node's ``status.images`` are indexed
(``images``): what kube-scheduler's ``NodeInfo`` keeps for scoring and for NodePorts. A nominated pod
holds its host ports too, as kube-scheduler's Filter sees nominated pods' ports.

Out-of-range amounts (``quantity_range``): a node whose allocatable cannot be accounted is kept
with ``problems`` set and is no candidate (its row is inactive, allocatable zero); a bound pod's
requests are already clamped in its ``PodInfo``, so it is accounted like any other.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

import numpy as np

from apis.core import Node
from apis.extension.colocation import transform_deprecated_batch_resources
from apis.meta import Taint
from scheduler.cache.host_ports import HostPortIndex
from scheduler.cache.images import ImageIndex, image_names
from scheduler.cache.node_table import BoolArray, IntArray, NodeTable
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.pod_selector import PodObserver, PodSelectorCounts
from scheduler.cache.quantity_range import check_list

__all__ = ["Cache", "NodeInfo", "Nomination"]

log = logging.getLogger(__name__)

_O = TypeVar("_O", bound=PodObserver)


@dataclass(slots=True, eq=False)
class NodeInfo:
    """One node: its object (None while only pods reference it), row in the table, and its pods."""

    name: str
    row: int
    node: Node | None = None
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    pods: dict[str, PodInfo] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    """Allocatable amounts outside the range the table holds: the node is no candidate."""
    images: dict[str, int] = field(default_factory=dict)
    """Image name -> size, from ``status.images`` (indexed in ``Cache.images``)."""


@dataclass(slots=True, frozen=True)
class Nomination:
    """A pending pod's claim on a node while its preemption victims terminate."""

    pod: PodInfo
    node: str


@dataclass(slots=True)
class _Assumed:
    pod: PodInfo
    node: str
    deadline: float | None = None
    """Set when binding finished: expire at this monotonic time unless the watch confirms."""


class Cache:
    def __init__(self, *, assumed_ttl: float = 30.0) -> None:
        self.table = NodeTable()
        self.ports = HostPortIndex()
        self.images = ImageIndex()
        self.nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, PodInfo] = {}
        """Every pod assigned to a node (bound or assumed), by uid."""
        self._pod_node: dict[str, str] = {}
        self._assumed: dict[str, _Assumed] = {}
        self._nominated: dict[str, Nomination] = {}
        self.assumed_ttl = assumed_ttl
        self._node_objects = 0
        """Nodes that exist (have a Node object); kept as a count because every cycle asks."""
        self.generation = 0
        """Bumped whenever a node's labels, taints, schedulability or allocatable change."""
        self.version = 0
        """Bumped on every change of what is free anywhere (node or pod accounting)."""
        self._label_rows: dict[str, dict[str, set[int]]] = {}
        self._mask_cache: dict[tuple[int, str, frozenset[str] | None], BoolArray] = {}
        self._domain_cache: dict[tuple[int, str], tuple[IntArray, tuple[str, ...]]] = {}
        self._observers: list[PodObserver] = []
        self._replacing: list[tuple[PodObserver, Callable[[PodInfo, PodInfo, int], None] | None]] = []
        """Each observer with its ``pod_replaced``, if it has one."""
        self._named_observers: dict[str, PodObserver] = {}
        self._withdrawn: set[str] = set()
        """Pods a snapshot's ``simulate_removal`` took out for the moment (still in their node)."""
        self._priorities: Counter[int] = Counter()
        """How many pods of each priority the nodes' ``pods`` hold (withdrawn ones included)."""
        self.pod_selector_counts = PodSelectorCounts()
        self.observe(self.pod_selector_counts)

    # ---- nodes -------------------------------------------------------------------------------

    def _node_info(self, name: str) -> NodeInfo:
        info = self.nodes.get(name)
        if info is None:
            info = NodeInfo(name=name, row=self.table.add_node(name))
            self.table.set_active(info.row, False)  # a node only pods know of is not a candidate
            self.nodes[name] = info
        return info

    def upsert_node(self, node: Node) -> NodeInfo:
        name = node.metadata.name or ""
        info = self._node_info(name)
        self._unindex_labels(info)
        if info.node is None:
            self._node_objects += 1
        info.node = node
        info.labels = dict(node.metadata.labels or {})
        info.taints = tuple(node.spec.taints or ())
        info.unschedulable = bool(node.spec.unschedulable)
        self.images.remove(info.row, info.images)
        info.images = image_names(node)
        self.images.add(info.row, info.images)
        # Koordinator's node transformer: a node's deprecated koordinator.sh/batch-* allocatable is
        # read as kubernetes.io/batch-*, the name pods request (theirs are renamed too: pod_info).
        allocatable = transform_deprecated_batch_resources(node.status.allocatable or {})
        checked = check_list(allocatable, "status.allocatable")
        info.problems = checked.problems
        self.table.set_allocatable(info.row, {} if checked.problems else checked.amounts)
        self.table.set_active(info.row, not checked.problems)
        self._index_labels(info)
        self._bump()
        return info

    def remove_node(self, name: str) -> None:
        info = self.nodes.get(name)
        if info is None:
            return
        for uid in [uid for uid, n in self._nominated.items() if n.node == name]:
            self.clear_nomination(uid)
        self._unindex_labels(info)
        self.images.remove(info.row, info.images)
        info.images = {}
        if info.node is not None:
            self._node_objects -= 1
        if info.pods:
            # Pods still reference the node: keep their accounting on a row that is no candidate.
            info.node = None
            info.labels, info.taints, info.problems = {}, (), ()
            self.table.set_allocatable(info.row, {})
            self.table.set_active(info.row, False)
        else:
            self.table.remove_node(name)
            del self.nodes[name]
        self._bump()

    def _bump(self) -> None:
        self.version += 1
        self.generation += 1
        self._mask_cache.clear()
        self._domain_cache.clear()

    def _index_labels(self, info: NodeInfo) -> None:
        for key, value in info.labels.items():
            self._label_rows.setdefault(key, {}).setdefault(value, set()).add(info.row)

    def _unindex_labels(self, info: NodeInfo) -> None:
        for key, value in info.labels.items():
            rows = self._label_rows.get(key, {}).get(value)
            if rows is not None:
                rows.discard(info.row)

    def label_mask(self, key: str, values: frozenset[str] | None) -> BoolArray:
        """Rows whose node has label ``key`` with one of ``values`` (any value when None).

        Masks are cached until the next node change, so pods with the same selectors share them.
        """
        cache_key = (self.generation, key, values)
        mask = self._mask_cache.get(cache_key)
        if mask is None:
            by_value = self._label_rows.get(key, {})
            chosen = by_value.values() if values is None else [by_value.get(v, set()) for v in values]
            mask = np.zeros(self.table.row_count, dtype=np.bool_)
            for rows in chosen:
                if rows:
                    mask[np.fromiter(rows, dtype=np.int64, count=len(rows))] = True
            self._mask_cache[cache_key] = mask
        return mask

    def label_values(self, key: str) -> dict[str, set[int]]:
        return self._label_rows.get(key, {})

    def label_domains(self, key: str) -> tuple[IntArray, tuple[str, ...]]:
        """(domain id of every row, -1 where the node lacks ``key``; the value of each id), cached
        until the next node change: the topology domains of ``key``, ready for ``np.bincount``."""
        cache_key = (self.generation, key)
        domains = self._domain_cache.get(cache_key)
        if domains is None:
            ids = np.full(self.table.row_count, -1, dtype=np.int64)
            values: list[str] = []
            for value, rows in sorted(self._label_rows.get(key, {}).items()):
                if rows:
                    ids[np.fromiter(rows, dtype=np.int64, count=len(rows))] = len(values)
                    values.append(value)
            domains = (ids, tuple(values))
            self._domain_cache[cache_key] = domains
        return domains

    # ---- pod observers -----------------------------------------------------------------------

    def observe(self, observer: PodObserver) -> None:
        """Tell ``observer`` of every pod accounted on a node from now on, and of those already.
        An observer with ``pod_replaced(old, new, row)`` is told so of a new version of a pod on
        the same row (removed and added otherwise)."""
        self._observers.append(observer)
        self._replacing.append((observer, getattr(observer, "pod_replaced", None)))
        for pod, row in self.assigned_rows():
            observer.pod_added(pod, row)

    def observer(self, key: str, factory: Callable[[], _O]) -> _O:
        """The observer kept under ``key``, made by ``factory`` and observing on first ask: a
        plugin's own index lives as long as the cache it indexes, whichever profile asks."""
        found = self._named_observers.get(key)
        if found is None:
            made = factory()
            self._named_observers[key] = made
            self.observe(made)
            return made
        return cast("_O", found)

    def assigned_rows(self) -> Iterator[tuple[PodInfo, int]]:
        """Every assigned pod (not withdrawn) with the row of its node."""
        for uid, pod in self._pods.items():
            info = self.nodes.get(self._pod_node[uid])
            if info is not None and uid not in self._withdrawn:
                yield pod, info.row

    def withdraw(self, pod: PodInfo, row: int) -> None:
        """Stop accounting ``pod`` on ``row`` for a while (a simulated removal); ``reinstate``
        undoes it. The pod stays assigned: nothing but the accounting changes."""
        self._withdrawn.add(pod.uid)
        self._occupy(pod, row, sign=-1)
        self.notify_removed(pod, row)

    def withdraw_many(self, placed: Sequence[tuple[PodInfo, int]]) -> None:
        """``withdraw`` for many pods at once (a preemption's candidate victims): the table is
        updated in one vectorised pass per column, the observers pod by pod as before."""
        self._withdrawn.update(pod.uid for pod, _ in placed)
        self._occupy_many(placed, sign=-1)
        for pod, row in placed:
            self.notify_removed(pod, row)

    def reinstate_many(self, placed: Sequence[tuple[PodInfo, int]]) -> None:
        self._withdrawn.difference_update(pod.uid for pod, _ in placed)
        self._occupy_many(placed, sign=1)
        for pod, row in placed:
            self.notify_added(pod, row)

    def _occupy_many(self, placed: Sequence[tuple[PodInfo, int]], sign: int) -> None:
        rows = [row for _, row in placed]
        self.table.add_requests_many(rows, [pod.requests for pod, _ in placed], sign=sign)
        self.table.add_non_zero_many(rows, [pod.non_zero for pod, _ in placed], sign=sign)
        for pod, row in placed:
            if pod.host_ports:
                self.ports.add(row, pod.host_ports, sign=sign)

    def is_withdrawn(self, uid: str) -> bool:
        return uid in self._withdrawn

    def withdrawn(self) -> frozenset[str]:
        """The uids ``withdraw`` holds out now (usually none)."""
        return frozenset(self._withdrawn)

    def reinstate(self, pod: PodInfo, row: int) -> None:
        self._withdrawn.discard(pod.uid)
        self._occupy(pod, row, sign=1)
        self.notify_added(pod, row)

    def _occupy(self, pod: PodInfo, row: int, sign: int) -> None:
        """Take (1) or release (-1) what ``pod`` occupies on ``row``: requests, non-zero
        requests and host ports."""
        self.table.add_requests(row, pod.requests, sign=sign)
        self.table.add_non_zero(row, pod.non_zero, sign=sign)
        self.ports.add(row, pod.host_ports, sign=sign)

    def notify_added(self, pod: PodInfo, row: int) -> None:
        for observer in self._observers:
            observer.pod_added(pod, row)

    def notify_removed(self, pod: PodInfo, row: int) -> None:
        for observer in self._observers:
            observer.pod_removed(pod, row)

    # ---- pods assigned to nodes --------------------------------------------------------------

    def upsert_pod(self, pod: PodInfo) -> None:
        """A pod the watch reports; accounted on its node while assigned and not terminal."""
        assumed = self._assumed.pop(pod.uid, None)
        if pod.node_name:
            self.clear_nomination(pod.uid)
        if assumed is not None and assumed.node != pod.node_name:
            log.warning("pod %s was assumed on %s but is bound to %s", pod.key, assumed.node, pod.node_name)
        old = self._pods.get(pod.uid)
        if old is not None and self._confirm_in_place(old, pod):
            return
        if old is not None:
            self._unaccount(old)
        if pod.node_name and not pod.is_terminal():
            self._account(pod, pod.node_name)
        else:
            self._pods.pop(pod.uid, None)

    def _confirm_in_place(self, old: PodInfo, pod: PodInfo) -> bool:
        """A new version of a pod counted on the same node that occupies the same there (the
        binding of an assumed pod, a status update): the PodInfo is swapped and the observers
        told, as releasing and taking again would, without writing the node table twice over to
        the same sums. False (nothing done) for any other change."""
        node = self._pod_node.get(pod.uid)
        if node is None or node != pod.node_name or pod.is_terminal():
            return False
        info = self.nodes.get(node)
        if info is None or info.node is None or info.pods.get(pod.uid) is not old:
            return False
        if old.requests != pod.requests or old.non_zero != pod.non_zero or old.host_ports != pod.host_ports:
            return False
        info.pods[pod.uid] = pod
        self._count_priority(old, -1)
        self._count_priority(pod, 1)
        self._pods[pod.uid] = pod
        self.version += 1
        for observer, replaced in self._replacing:
            if replaced is not None:
                replaced(old, pod, info.row)
            else:
                observer.pod_removed(old, info.row)
                observer.pod_added(pod, info.row)
        return True

    def remove_pod(self, uid: str) -> None:
        self.clear_nomination(uid)
        self._assumed.pop(uid, None)
        old = self._pods.get(uid)
        if old is not None:
            self._unaccount(old)

    def _account(self, pod: PodInfo, node: str) -> None:
        info = self._node_info(node)
        replaced = info.pods.get(pod.uid)
        if replaced is not None:
            self._count_priority(replaced, -1)
        info.pods[pod.uid] = pod
        self._count_priority(pod, 1)
        self.version += 1
        self._occupy(pod, info.row, sign=1)
        self._pods[pod.uid] = pod
        self._pod_node[pod.uid] = node
        self.notify_added(pod, info.row)

    def _unaccount(self, pod: PodInfo) -> None:
        node = self._pod_node.pop(pod.uid, None)
        self._pods.pop(pod.uid, None)
        if node is None:
            return
        info = self.nodes.get(node)
        if info is None:
            return
        counted = info.pods.pop(pod.uid, None)
        self.version += 1
        if counted is not None:
            self._count_priority(counted, -1)
            self._occupy(counted, info.row, sign=-1)
            self.notify_removed(counted, info.row)
        if info.node is None and not info.pods:
            self.table.remove_node(node)
            del self.nodes[node]

    def _count_priority(self, pod: PodInfo, sign: int) -> None:
        left = self._priorities[pod.priority] + sign
        if left:
            self._priorities[pod.priority] = left
        else:
            del self._priorities[pod.priority]

    def has_pod_below(self, priority: int) -> bool:
        """Whether any node holds a pod of lower priority than ``priority`` (withdrawn pods
        included): preemption has no possible victim anywhere otherwise."""
        return any(p < priority for p in self._priorities)

    # ---- assume / forget ---------------------------------------------------------------------

    def assume(self, pod: PodInfo, node: str) -> None:
        """Take ``pod``'s resources on ``node`` now, before the binding is confirmed."""
        if pod.uid in self._pods:
            raise ValueError(f"pod {pod.key} is already assigned to {self._pod_node.get(pod.uid)}")
        self.clear_nomination(pod.uid)
        self._account(pod, node)
        self._assumed[pod.uid] = _Assumed(pod=pod, node=node)

    def finish_binding(self, uid: str, now: float) -> None:
        """The bind call returned: start the confirmation deadline."""
        assumed = self._assumed.get(uid)
        if assumed is not None:
            assumed.deadline = now + self.assumed_ttl

    def forget(self, uid: str) -> None:
        """Binding failed or was rejected: release what ``assume`` took."""
        if self._assumed.pop(uid, None) is not None:
            old = self._pods.get(uid)
            if old is not None:
                self._unaccount(old)

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def expire_assumed(self, now: float) -> list[PodInfo]:
        """Release assumptions whose binding finished ``assumed_ttl`` ago without confirmation."""
        expired = [a.pod for a in self._assumed.values() if a.deadline is not None and a.deadline <= now]
        for pod in expired:
            log.warning("assumed pod %s expired without the watch confirming its binding", pod.key)
            self.forget(pod.uid)
        return expired

    # ---- nominations -------------------------------------------------------------------------

    def nominate(self, pod: PodInfo, node: str) -> bool:
        """Hold ``pod``'s requests on ``node`` until it is assumed, bound or deleted (replacing any
        earlier nomination of it). False when the node is unknown or the pod already has a node."""
        self.clear_nomination(pod.uid)
        info = self.nodes.get(node)
        if info is None or info.node is None or pod.uid in self._pods:
            return False
        self._nominated[pod.uid] = Nomination(pod, node)
        self.table.add_requests(info.row, pod.requests)
        self.ports.add(info.row, pod.host_ports)
        self.version += 1
        return True

    def clear_nomination(self, uid: str) -> None:
        nomination = self._nominated.pop(uid, None)
        if nomination is None:
            return
        info = self.nodes.get(nomination.node)
        if info is not None:
            self.table.add_requests(info.row, nomination.pod.requests, sign=-1)
            self.ports.add(info.row, nomination.pod.host_ports, sign=-1)
        self.version += 1

    def nominated_node(self, uid: str) -> str | None:
        nomination = self._nominated.get(uid)
        return nomination.node if nomination is not None else None

    def nominations(self) -> list[Nomination]:
        return list(self._nominated.values())

    # ---- reads -------------------------------------------------------------------------------

    def pod(self, uid: str) -> PodInfo | None:
        return self._pods.get(uid)

    def node_of(self, uid: str) -> str | None:
        return self._pod_node.get(uid)

    def assigned_pods(self) -> Iterator[PodInfo]:
        return iter(self._pods.values())

    def sizes(self) -> tuple[int, int, int]:
        """(nodes, assigned pods, assumed pods): ``scheduler_scheduler_cache_size``."""
        return len(self.nodes), len(self._pods), len(self._assumed)

    def node_count(self) -> int:
        return self._node_objects
