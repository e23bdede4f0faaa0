"""The scheduling queue: active (a heap in QueueSort order), backoff, and unschedulable pods.

As kube-scheduler's PriorityQueue:

1. A new pending pod passes PreEnqueue (e.g. a gang short of members stays out) and enters the
   active heap; a gated pod waits in the unschedulable set marked ``gated``. A pod with requests
   outside the range the scheduler can account (``PodInfo.problems``) is gated before any plugin
   sees it. ``on_gated`` hears of every gate whose reason changed (``scheduler.reporting`` tells
   the user).
2. ``pop`` hands out the head of the active heap (waiting when it is empty).
3. A pod that failed its cycle goes to the unschedulable set with the plugins that rejected it;
   an error or a cluster event seen *during* its cycle sends it to backoff instead, so an event
   that raced with the cycle is not lost.
4. A cluster event moves the unschedulable pods whose rejecting plugins registered for it to
   backoff (if their backoff has not elapsed) or straight to active; a pod stuck unschedulable
   longer than ``max_unschedulable_seconds`` is retried anyway. An update of an unschedulable pod
   moves it only when more than its status changed (kube-scheduler's ``isPodUpdated``): the
   scheduler's own PodScheduled=False write after a failed cycle is no reason to try again.
   A plugin that knows a pod can go on now (a gang's placement solved, a preemptor's last victim
   gone) *activates* it: straight to active whatever its backoff; a pod activated during its own
   cycle goes to active when that cycle fails, instead of waiting for another event.
5. Backoff lasts ``initial_backoff * 2^(attempts-1)``, capped at ``max_backoff``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from scheduler.cache.pod_info import PodInfo
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.status import Status
from scheduler.model_update import updated

__all__ = ["QueueCounts", "QueuedPodInfo", "SchedulingQueue", "event_label"]

_UNREAD_METADATA = {"resource_version": None, "generation": None, "finalizers": None}
"""What kube-scheduler's ``isPodUpdated`` strips from an update's metadata besides the status."""


def _updated_for_scheduling(old: PodInfo, new: PodInfo) -> bool:
    """Whether anything but the pod's status, resourceVersion, generation and finalizers changed."""
    before, after = old.pod, new.pod
    if before is after:
        return False
    if before.spec != after.spec:
        return True
    return updated(before.metadata, _UNREAD_METADATA) != updated(after.metadata, _UNREAD_METADATA)


def event_label(event: ClusterEvent) -> str:
    """``NODE_ADD | POD_DELETE`` as kube-scheduler labels its events: ``NodeAdd|PodDelete``."""
    names = (flag.name or "" for flag in event)
    return "|".join(name.title().replace("_", "") for name in names if name) or "Unknown"


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    pod: PodInfo
    attempts: int = 0
    first_seen: float = 0.0
    """When the pod first entered the queue (for the scheduling SLI)."""
    queued_at: float = 0.0
    unschedulable_plugins: set[str] = field(default_factory=set)
    gated_by: str | None = None
    """The PreEnqueue plugin keeping the pod out of the active queue, with its reason."""
    backoff_until: float = 0.0


@dataclass(frozen=True, slots=True)
class QueueCounts:
    active: int
    backoff: int
    unschedulable: int
    gated: int


class SchedulingQueue:
    def __init__(
        self,
        *,
        sort_key: Callable[[PodInfo], tuple[Any, ...]],
        pre_enqueue: Callable[[PodInfo], Status],
        plugin_events: Callable[[str], ClusterEvent],
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        on_gated: Callable[[QueuedPodInfo, Status], None] | None = None,
        on_incoming: Callable[[str, str], None] | None = None,
    ) -> None:
        """``on_incoming(queue, event)``: a pod entered ``active``, ``backoff``, ``unschedulable``
        or ``gated`` because of ``event`` (kube-scheduler's queue_incoming_pods_total labels)."""
        self._sort_key = sort_key
        self._on_gated = on_gated
        self._on_incoming = on_incoming
        self._pre_enqueue = pre_enqueue
        self._plugin_events = plugin_events
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable_seconds = max_unschedulable_seconds
        self._clock = clock
        self._seq = itertools.count()
        self._active: list[tuple[Any, ...]] = []
        """The heap of (*sort key, sequence, uid): flat, as nested keys cost a pop about twice."""
        self._in_active: dict[str, QueuedPodInfo] = {}
        self._backoff: dict[str, QueuedPodInfo] = {}
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        # Lower bounds kept as pods enter: ``flush`` runs on every pop and walks a set only when
        # one of its pods may be due (thousands of failed pods waiting made every pop walk them).
        self._earliest_backoff = math.inf
        """No pod in backoff has its backoff end before this."""
        self._oldest_unschedulable = math.inf
        """No pod in the unschedulable set was queued before this."""
        self._in_flight: dict[str, int] = {}
        """Pods popped and being scheduled -> the move-request counter when they were popped."""
        self._move_requests = 0
        self._activated_in_flight: set[str] = set()
        """Pods activated while being scheduled: a failed cycle sends them back to active."""
        self._wakeup = asyncio.Event()
        self._closed = False

    # ---- adding ------------------------------------------------------------------------------

    def add(self, pod: PodInfo) -> None:
        """A new pending pod (or one seen again after a relist)."""
        if self._known(pod.uid):
            self.update(pod)
            return
        now = self._clock()
        self._enqueue(QueuedPodInfo(pod=pod, first_seen=now, queued_at=now), "PodAdd")

    def _known(self, uid: str) -> bool:
        return (
            uid in self._in_active
            or uid in self._backoff
            or uid in self._unschedulable
            or uid in self._in_flight
        )

    def _incoming(self, queue: str, event: str) -> None:
        if self._on_incoming is not None:
            self._on_incoming(queue, event)

    def _enqueue(self, qp: QueuedPodInfo, event: str) -> None:
        """Through PreEnqueue into the active heap, or into the unschedulable set as gated."""
        # A pod with out-of-range amounts never reaches a plugin: they would not fit the node table.
        problems = qp.pod.problems
        status = Status.unresolvable(*problems) if problems else self._pre_enqueue(qp.pod)
        if not status.ok:
            previous = qp.gated_by
            qp.gated_by = f"{status.plugin}: {status.message()}" if status.plugin else status.message()
            self._into_unschedulable(qp)
            self._incoming("gated", event)
            if self._on_gated is not None and qp.gated_by != previous:
                self._on_gated(qp, status)
            return
        qp.gated_by = None
        qp.queued_at = self._clock()
        self._in_active[qp.pod.uid] = qp
        heapq.heappush(self._active, (*self._sort_key(qp.pod), next(self._seq), qp.pod.uid))
        self._incoming("active", event)
        self._wakeup.set()

    def update(self, pod: PodInfo) -> None:
        """The pod changed: keep its place, or give an unschedulable pod another try."""
        uid = pod.uid
        for where in (self._in_active, self._backoff):
            qp = where.get(uid)
            if qp is not None and pod.problems:
                del where[uid]  # now out of range: gate it
                qp.pod = pod
                self._enqueue(qp, "PodUpdate")
                return
            if qp is not None:
                qp.pod = pod
                if where is self._in_active:  # its sort key may have changed
                    heapq.heappush(self._active, (*self._sort_key(pod), next(self._seq), uid))
                return
        qp = self._unschedulable.get(uid)
        if qp is not None:
            updated = _updated_for_scheduling(qp.pod, pod)
            qp.pod = pod
            if updated:
                del self._unschedulable[uid]
                self._requeue(qp, "PodUpdate")

    def delete(self, uid: str) -> None:
        self._in_active.pop(uid, None)  # its heap entry is skipped when popped
        self._backoff.pop(uid, None)
        self._unschedulable.pop(uid, None)
        self._in_flight.pop(uid, None)
        self._activated_in_flight.discard(uid)

    # ---- popping -----------------------------------------------------------------------------

    async def pop(self) -> QueuedPodInfo:
        """The next pod to schedule; waits while the active queue is empty."""
        while True:
            self.flush()
            qp = self._pop_active()
            if qp is not None:
                qp.attempts += 1
                self._in_flight[qp.pod.uid] = self._move_requests
                return qp
            if self._closed:
                raise asyncio.CancelledError("queue closed")
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):  # asyncio.timeout: see the figures writer
                async with asyncio.timeout(self._next_wakeup()):
                    await self._wakeup.wait()

    def _pop_active(self) -> QueuedPodInfo | None:
        while self._active:
            uid = heapq.heappop(self._active)[-1]
            qp = self._in_active.pop(uid, None)
            if qp is not None:
                return qp
        return None

    def _next_wakeup(self) -> float:
        now = self._clock()
        deadlines = [qp.backoff_until for qp in self._backoff.values()]
        return max(0.01, min(deadlines) - now) if deadlines else 1.0

    def flush(self) -> None:
        """Backoff that elapsed -> active; pods unschedulable for too long -> retried."""
        now = self._clock()
        if self._earliest_backoff <= now:
            self._earliest_backoff = math.inf  # made exact again below from the pods that stay
            for uid, qp in list(self._backoff.items()):
                if qp.backoff_until <= now:
                    del self._backoff[uid]
                    self._enqueue(qp, "BackoffComplete")
                else:
                    self._earliest_backoff = min(self._earliest_backoff, qp.backoff_until)
        if now - self._oldest_unschedulable >= self.max_unschedulable_seconds:
            self._oldest_unschedulable = math.inf
            for uid, qp in list(self._unschedulable.items()):
                if now - qp.queued_at >= self.max_unschedulable_seconds:
                    del self._unschedulable[uid]
                    self._requeue(qp, "UnschedulableTimeout")
                else:
                    self._oldest_unschedulable = min(self._oldest_unschedulable, qp.queued_at)

    def _into_backoff(self, qp: QueuedPodInfo) -> None:
        self._backoff[qp.pod.uid] = qp
        self._earliest_backoff = min(self._earliest_backoff, qp.backoff_until)

    def _into_unschedulable(self, qp: QueuedPodInfo) -> None:
        self._unschedulable[qp.pod.uid] = qp
        self._oldest_unschedulable = min(self._oldest_unschedulable, qp.queued_at)

    # ---- after a cycle -----------------------------------------------------------------------

    def done(self, uid: str) -> None:
        """The pod was bound (the binder calls this): it leaves the queue."""
        self._in_flight.pop(uid, None)
        self._activated_in_flight.discard(uid)

    def add_unschedulable(self, qp: QueuedPodInfo, rejecting_plugins: set[str]) -> None:
        """The cycle found no place; wait for an event, unless one happened during the cycle."""
        popped_at = self._in_flight.pop(qp.pod.uid, None)
        if popped_at is None and not self._known(qp.pod.uid):
            return  # deleted while it was being scheduled
        qp.unschedulable_plugins = set(rejecting_plugins)
        qp.queued_at = self._clock()
        if qp.pod.uid in self._activated_in_flight:
            self._activated_in_flight.discard(qp.pod.uid)
            self._enqueue(qp, "ScheduleAttemptFailure")
        elif popped_at is not None and self._move_requests > popped_at:
            self._to_backoff(qp, "ScheduleAttemptFailure")
        else:
            self._into_unschedulable(qp)
            self._incoming("unschedulable", "ScheduleAttemptFailure")

    def add_backoff(self, qp: QueuedPodInfo) -> None:
        """An error or a lost race (bind conflict): retry after the pod's backoff."""
        popped_at = self._in_flight.pop(qp.pod.uid, None)
        self._activated_in_flight.discard(qp.pod.uid)
        if popped_at is None and not self._known(qp.pod.uid):
            return
        self._to_backoff(qp, "ScheduleAttemptFailure")

    def _to_backoff(self, qp: QueuedPodInfo, event: str) -> None:
        qp.backoff_until = self._clock() + self.backoff_duration(qp.attempts)
        self._into_backoff(qp)
        self._incoming("backoff", event)
        self._wakeup.set()

    def backoff_duration(self, attempts: int) -> float:
        return float(min(self.initial_backoff * 2 ** max(0, attempts - 1), self.max_backoff))

    def _requeue(self, qp: QueuedPodInfo, event: str) -> None:
        if qp.attempts and qp.backoff_until == 0.0:
            qp.backoff_until = qp.queued_at + self.backoff_duration(qp.attempts)
        if qp.attempts and qp.backoff_until > self._clock():
            self._into_backoff(qp)
            self._incoming("backoff", event)
            self._wakeup.set()
        else:
            self._enqueue(qp, event)

    # ---- cluster events ----------------------------------------------------------------------

    def on_event(self, event: ClusterEvent) -> int:
        """Move the unschedulable pods this event may help; returns how many moved."""
        self._move_requests += 1
        moved = 0
        for uid, qp in list(self._unschedulable.items()):
            if self._may_help(qp, event):
                del self._unschedulable[uid]
                qp.backoff_until = qp.queued_at + self.backoff_duration(qp.attempts) if qp.attempts else 0.0
                self._requeue(qp, event_label(event))
                moved += 1
        return moved

    def _may_help(self, qp: QueuedPodInfo, event: ClusterEvent) -> bool:
        if qp.gated_by is not None:
            return True  # PreEnqueue decides again
        if not qp.unschedulable_plugins:
            return True
        return any(event & self._plugin_events(name) for name in qp.unschedulable_plugins)

    def activate(self, uids: set[str]) -> None:
        """Move these pods to the active queue now, skipping any backoff (a gang member made its
        siblings schedulable, a preemptor's victims are gone); one being scheduled goes there if
        its cycle fails (kube-scheduler's Activate of an in-flight pod)."""
        for uid in uids:
            qp = self._unschedulable.pop(uid, None) or self._backoff.pop(uid, None)
            if qp is not None:
                self._enqueue(qp, "ForceActivate")
            elif uid in self._in_flight:
                self._activated_in_flight.add(uid)

    # ---- reads -------------------------------------------------------------------------------

    def in_flight(self) -> int:
        """Pods popped whose cycle (or binding) has not ended."""
        return len(self._in_flight)

    def counts(self) -> QueueCounts:
        gated = sum(1 for qp in self._unschedulable.values() if qp.gated_by is not None)
        return QueueCounts(
            active=len(self._in_active),
            backoff=len(self._backoff),
            unschedulable=len(self._unschedulable) - gated,
            gated=gated,
        )

    def unschedulable_by_plugin(self) -> dict[tuple[str, str], int]:
        """(profile, plugin) -> how many unschedulable pods that plugin rejected (or gates, at
        PreEnqueue), as kube-scheduler's scheduler_unschedulable_pods gauge counts them."""
        found: dict[tuple[str, str], int] = {}
        for qp in self._unschedulable.values():
            plugins = {qp.gated_by.split(":", 1)[0]} if qp.gated_by is not None else qp.unschedulable_plugins
            for plugin in plugins:
                key = (qp.pod.scheduler_name, plugin)
                found[key] = found.get(key, 0) + 1
        return found

    def pending(self) -> Iterator[QueuedPodInfo]:
        yield from self._in_active.values()
        yield from self._backoff.values()
        yield from self._unschedulable.values()

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._in_active.get(uid) or self._backoff.get(uid) or self._unschedulable.get(uid)

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()
