"""Informer glue: backend watch events -> cache mutations and queue moves.

- Nodes go to the cache; a node change that can affect scheduling (allocatable, labels, taints,
  schedulability) is a cluster event for the queue, a heartbeat is not.
- A pod with a node is accounted in the cache (this is also how a binding is confirmed); its
  deletion or completion releases resources and is a cluster event.
- A pod without a node whose schedulerName one of our profiles serves is pending: it enters the
  queue, or is updated there. Pods of other schedulers are never touched.
- ``REPLACED`` (first list and every relist) is reconciled against what we hold, so an object
  deleted while the watch was down is removed here too. A pending pod listed with a
  ``status.nominatedNodeName`` gets its nomination back (a restarted scheduler keeps holding what
  an earlier preemption freed for it).
- One object never stops a watch: an object whose handling raises is logged and skipped, and
  amounts outside the range the cache can account (``scheduler.cache.quantity_range``) are
  reported on the object (a node is then no candidate; a bound pod is accounted clamped).
- ``synced`` holds only while both watches run: a watch that ended takes readiness with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from apis.client.backend import NODES, PODS, ClusterBackend, EventType, ObjectRef, WatchEvent
from apis.core import Node, Pod
from apis.extension.device import ANNOTATION_CAMBRICON_DSMLU_LOCK, ANNOTATION_HAMI_LOCK
from apis.extension.loadaware import ANNOTATION_CUSTOM_USAGE_THRESHOLDS
from apis.extension.reservation import is_reserve_pod
from apis.gcpause import list_paused
from scheduler.cache.cache import Cache
from scheduler.cache.decode_ahead import take_decoded
from scheduler.cache.images import image_names
from scheduler.cache.pod_info import PodInfo, decoding_once
from scheduler.framework.interfaces import ClusterEvent
from scheduler.queue.scheduling_queue import SchedulingQueue
from scheduler.reporting import Reporter
from scheduler.startup_spans import StartupSpans

__all__ = ["EventHandlers"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


def _describe(obj: object) -> str:
    if isinstance(obj, PodInfo):
        return f"pod {obj.key}"
    if isinstance(obj, (Node, Pod)):
        return f"{type(obj).__name__} {obj.metadata.namespace or ''}/{obj.metadata.name}"
    return repr(obj)[:80]


DEVICE_PLUGIN_NODE_LOCKS = (ANNOTATION_CAMBRICON_DSMLU_LOCK, ANNOTATION_HAMI_LOCK)


def _listener_name(listener: Callable[..., None]) -> str:
    """The listener's class, after its plugin's package: three plugins' pod informers are a
    ``PodHandler`` (ElasticQuota's, DeviceShare's, Reservation's)."""
    owner = getattr(listener, "__self__", None)
    if owner is None:
        return str(getattr(listener, "__qualname__", repr(listener)))
    module = type(owner).__module__.split(".")
    plugin = module[2] if module[:2] == ["scheduler", "plugins"] and len(module) > 2 else None
    return f"{plugin}.{type(owner).__name__}" if plugin else type(owner).__name__


def _node_signature(node: Node) -> tuple[object, ...]:
    """What of a node matters to scheduling (load thresholds included); heartbeats change none of it."""
    return (
        tuple(sorted((node.metadata.labels or {}).items())),
        tuple((t.key, t.value, t.effect) for t in node.spec.taints or ()),
        bool(node.spec.unschedulable),
        tuple(sorted((k, str(v)) for k, v in (node.status.allocatable or {}).items())),
        (node.metadata.annotations or {}).get(ANNOTATION_CUSTOM_USAGE_THRESHOLDS),
        # Vendors' node locks (DeviceShare's DevicePluginAdaption reads them at PreBind).
        tuple((node.metadata.annotations or {}).get(key) for key in DEVICE_PLUGIN_NODE_LOCKS),
        # The images it reports (ImageLocality), as kube-scheduler's NodeInfo follows them.
        tuple(sorted(image_names(node).items())),
    )


@dataclass
class EventHandlers:
    backend: ClusterBackend
    cache: Cache
    queue: SchedulingQueue
    scheduler_names: Collection[str]
    on_pod_gone: Callable[[str], None] = lambda uid: None
    pod_listeners: list[Callable[[WatchEvent[Pod]], None]] = field(default_factory=list)
    """Plugins' pod informers (Coscheduling's gang state), told before the queue sees the pod."""
    synced_nodes: asyncio.Event = field(default_factory=asyncio.Event)
    synced_pods: asyncio.Event = field(default_factory=asyncio.Event)
    reporter: Reporter | None = None
    """Tells nodes and bound pods with out-of-range amounts; None: logged only."""
    startup: StartupSpans = field(default_factory=StartupSpans)
    """Seconds per step of handling the first lists (the start-up log line's breakdown)."""
    _node_signatures: dict[str, tuple[object, ...]] = field(default_factory=dict)
    _pending: dict[str, PodInfo] = field(default_factory=dict)
    """Pending pods we queued, by uid (to reconcile a relist)."""
    _listed: dict[int, PodInfo] = field(default_factory=dict)
    """The first list's pods handled as LISTED pages so far, by the pod's identity."""
    _listed_events: dict[str, ClusterEvent | None] = field(default_factory=dict)
    """The queue event each of those accounted in the cache made, by uid: posted at the REPLACED,
    in the list's order among the pending pods' adds, as the whole-list path posts them."""

    @property
    def synced(self) -> bool:
        return self.synced_nodes.is_set() and self.synced_pods.is_set()

    async def run_nodes(self) -> None:
        try:
            async for event in self.backend.watch(NODES):
                self.handle_node_event(event)
        finally:
            self.synced_nodes.clear()

    async def run_pods(self) -> None:
        try:
            async for event in self.backend.watch(PODS):
                self.handle_pod_event(event)
        finally:
            self.synced_pods.clear()

    # ---- nodes -------------------------------------------------------------------------------

    def handle_node_event(self, event: WatchEvent[Node]) -> None:
        if event.type is EventType.REPLACED:
            first = not self.synced_nodes.is_set()
            with self.startup.span("node cache") if first else contextlib.nullcontext(), list_paused():
                self._replace_nodes(event.objects)
            return
        assert event.obj is not None
        if event.type is EventType.DELETED:
            self._guarded(self._delete_node, event.obj.metadata.name or "")
        else:
            self._guarded(self._upsert_node, event.obj)

    def _replace_nodes(self, nodes: Collection[Node]) -> None:
        seen = set()
        for node in nodes:
            seen.add(node.metadata.name or "")
            self._guarded(self._upsert_node, node)
        for name in [n for n, info in self.cache.nodes.items() if info.node is not None and n not in seen]:
            self._delete_node(name)
        self.synced_nodes.set()

    @staticmethod
    def _guarded(handle: Callable[[_T], None], obj: _T) -> None:
        """Handle one object; a failure is logged and skipped, so one object cannot stop a watch."""
        try:
            handle(obj)
        except Exception:
            log.exception("handling %s failed; skipped", _describe(obj))

    def _upsert_node(self, node: Node) -> None:
        name = node.metadata.name or ""
        signature = _node_signature(node)
        previous = self._node_signatures.get(name)
        if previous == signature:
            return  # a heartbeat: nothing the scheduler reads changed
        info = self.cache.upsert_node(node)
        self._node_signatures[name] = signature  # after the update: a failed one is tried again
        if info.problems:
            message = "koord-scheduler places no pod on this node: " + "; ".join(info.problems)
            self._refused(ObjectRef(kind="Node", name=name, uid=node.metadata.uid), message)
        self.queue.on_event(ClusterEvent.NODE_ADD if previous is None else ClusterEvent.NODE_UPDATE)

    def _delete_node(self, name: str) -> None:
        self._node_signatures.pop(name, None)
        self.cache.remove_node(name)
        self.queue.on_event(ClusterEvent.NODE_DELETE)

    # ---- pods --------------------------------------------------------------------------------

    def handle_pod_event(self, event: WatchEvent[Pod]) -> None:
        # Every informer below shares one PodInfo per pod, most of them made as the pods were
        # decoded (the backend's transform, scheduler.cache.decode_ahead).
        if event.type is EventType.LISTED:
            if not self.synced_pods.is_set():  # a relist's pages wait for its REPLACED
                with list_paused():
                    self._listed_page(event.objects)
            return
        if event.type is EventType.REPLACED:
            ahead = take_decoded(event.objects, forget_the_rest=True)
            if self._listed:
                ahead.update(self._listed)
        else:
            ahead = take_decoded((event.obj,) if event.obj is not None else ())
            if not ahead and event.type is EventType.MODIFIED and event.obj is not None:
                ahead = self._successor(event.obj)
        with decoding_once(ahead):
            if event.type is EventType.REPLACED:
                with list_paused():  # a (re)list: tens of thousands of pods, no garbage cycles
                    self._replace_pods(event, self.startup if not self.synced_pods.is_set() else None)
                self.synced_pods.set()
                return
            self._tell_listeners(event, None)
            assert event.obj is not None
            if event.type is EventType.DELETED:
                self._guarded(lambda pod: self._delete_pod(PodInfo.of(pod)), event.obj)
            else:
                self._guarded(lambda pod: self._upsert_pod(PodInfo.of(pod)), event.obj)

    def _successor(self, pod: Pod) -> dict[int, PodInfo]:
        """The PodInfo of a new version of a pod held here (assumed, bound or pending), made from
        the one held where their parts are the same (``PodInfo.successor``): the bound version of
        every pod this scheduler placed comes back so, a moment after its PodInfo was assumed."""
        uid = pod.metadata.uid
        known = (self.cache.pod(uid) or self._pending.get(uid)) if uid else None
        info = known.successor(pod) if known is not None else None
        return {id(pod): info} if info is not None else {}

    def _tell_listeners(self, event: WatchEvent[Pod], spans: StartupSpans | None) -> None:
        for listener in self.pod_listeners:
            try:
                if spans is None:
                    listener(event)
                else:
                    with spans.span(f"plugin handlers: {_listener_name(listener)}"):
                        listener(event)
            except Exception:
                log.exception("a pod listener failed")

    def _listed_page(self, pods: Sequence[Pod]) -> None:
        """A page of the first pod list, handled as it comes (while the API server serializes the
        next): the listeners are told it (LISTED) and its bound pods are accounted in the cache.
        The queue waits for the REPLACED, as today: PreEnqueue (a gang's members, a quota) reads
        what the listeners hold of the whole list. Kept by identity (``_listed``) so that the
        REPLACED skips what was done here for these very objects."""
        with decoding_once(take_decoded(pods)):
            infos: list[PodInfo] = []
            for pod in pods:
                self._guarded(lambda p: infos.append(PodInfo.of(p)), pod)
            self._tell_listeners(WatchEvent(EventType.LISTED, objects=pods), self.startup)
        with self.startup.span("cache ahead"):
            for info in infos:
                self._listed[id(info.pod)] = info
                if info.node_name:
                    self._guarded(self._assigned_ahead, info)

    def _assigned_ahead(self, info: PodInfo) -> None:
        self._listed_events[info.uid] = self._account_assigned(info)

    def _told(self, pods: Sequence[Pod]) -> int:
        """How many of a list's first pods were handled as LISTED pages, as these very objects (a
        list that started over handled pages that its REPLACED does not carry)."""
        told = 0
        for pod in pods:
            info = self._listed.get(id(pod))
            if info is None or info.pod is not pod:
                break
            told += 1
        return told

    def _replace_pods(self, event: WatchEvent[Pod], spans: StartupSpans | None) -> None:
        """A (re)list, told to the listeners too; ``spans``: time its steps (the first list). The
        first ``told`` pods were handled page by page already (``_listed_page``): the listeners
        are told so, and only their queue events are left to post, in the list's order."""
        told = self._told(event.objects) if self._listed else 0
        accounted, self._listed_events = self._listed_events, {}
        self._listed = {}
        timed = spans.span if spans is not None else lambda _: contextlib.nullcontext()
        infos: list[PodInfo] = []
        with timed("pod info"):  # decoded before the listeners (who share them), to time it apart
            for pod in event.objects:
                self._guarded(lambda p: infos.append(PodInfo.of(p)), pod)
        self._tell_listeners(WatchEvent(EventType.REPLACED, objects=event.objects, told=told), spans)
        with timed("cache and queue"):
            present = {p.uid for p in infos}
            for uid in [uid for uid in self._pending if uid not in present]:
                self._delete_pod(self._pending[uid])
            for assigned in [p for p in self.cache.assigned_pods() if p.uid not in present]:
                # Reservations' stand-ins are no pods: their own informer keeps them.
                if not self.cache.is_assumed(assigned.uid) and not is_reserve_pod(assigned.annotations):
                    self._delete_pod(assigned)
            for index, info in enumerate(infos):
                if index < told and info.node_name and info.uid in accounted:
                    posted = accounted[info.uid]
                    if posted is not None:
                        self.queue.on_event(posted)
                else:
                    self._guarded(self._relisted_pod, info)

    def _relisted_pod(self, info: PodInfo) -> None:
        self._upsert_pod(info)
        nominated = info.pod.status.nominated_node_name
        if nominated and info.uid in self._pending and self.cache.nominated_node(info.uid) is None:
            self.cache.nominate(info, nominated)

    def _refused(self, ref: ObjectRef, message: str) -> None:
        if self.reporter is not None:
            self.reporter.object_refused(ref, "InvalidResourceQuantity", message)
        else:
            log.warning("%s %s: %s", ref.kind, ref.name, message)

    def _responsible(self, pod: PodInfo) -> bool:
        return pod.scheduler_name in self.scheduler_names

    def _upsert_pod(self, pod: PodInfo) -> None:
        if pod.node_name:
            event = self._account_assigned(pod)
            if event is not None:
                self.queue.on_event(event)
            return
        if not self._responsible(pod) or pod.is_terminal() or pod.pod.metadata.deletion_timestamp:
            if pod.uid in self._pending:
                self._delete_pod(pod)
            return
        if self.cache.is_assumed(pod.uid):
            return  # our own binding is in flight; this is an older version of the pod
        self._pending[pod.uid] = pod
        self.queue.add(pod)

    def _account_assigned(self, pod: PodInfo) -> ClusterEvent | None:
        """A pod on a node into the cache; the queue event it makes, for the caller to post."""
        if pod.uid in self._pending:
            del self._pending[pod.uid]
            self.queue.delete(pod.uid)
        was_counted = self.cache.pod(pod.uid) is not None
        self.cache.upsert_pod(pod)
        if pod.problems and not pod.is_terminal():
            message = "koord-scheduler accounts this pod's requests clamped: " + "; ".join(pod.problems)
            self._refused(ObjectRef(kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid), message)
        if pod.is_terminal() and was_counted:
            return ClusterEvent.POD_DELETE
        return None if was_counted else ClusterEvent.POD_ADD

    def _delete_pod(self, pod: PodInfo) -> None:
        self.cache.clear_nomination(pod.uid)
        if self._pending.pop(pod.uid, None) is not None:
            self.queue.delete(pod.uid)
        if self.cache.pod(pod.uid) is not None:
            self.cache.remove_pod(pod.uid)
            self.queue.on_event(ClusterEvent.POD_DELETE)
        self.on_pod_gone(pod.uid)
