"""Reservation events: a Pending reservation of this scheduler becomes a reserve pod in the queue;
a placed one is held on its node by a stand-in pod; a finished or deleted one is forgotten."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from apis.client.backend import EventType, WatchEvent
from apis.extension import gang as gang_ext
from apis.scheduling.reservation import Reservation
from scheduler.framework.handle import Handle
from scheduler.plugins.reservation.state import ReservationState
from scheduler.plugins.reservation.store import ReservationStore

__all__ = ["ReservationHandler"]

log = logging.getLogger(__name__)


class ReservationHandler:
    def __init__(self, handle: Handle, store: ReservationStore, ignored: frozenset[str]) -> None:
        self.handle = handle
        self.store = store
        self._ignored = ignored
        self._queued: dict[str, int | None] = {}
        """Reserve pods queued: uid -> the reservation's ``metadata.generation`` then (a status
        change, such as our own Unschedulable condition, makes no new attempt)."""
        self._announced: set[str] = set()
        """Reserve pods of gang members shown to the pod informers (``_announce``)."""

    def on_event(self, event: WatchEvent[Reservation]) -> None:
        event.dispatch(self._replace, self._upsert, self._delete)

    def _replace(self, reservations: Sequence[Reservation]) -> None:
        present = {r.metadata.uid or r.metadata.name or "" for r in reservations}
        for uid in [uid for uid in self.store.by_uid if uid not in present]:
            self._forget(uid)
        for reservation in reservations:
            try:
                self._upsert(reservation)
            except Exception:
                log.exception("reservation %s could not be handled", reservation.metadata.name)

    def _delete(self, reservation: Reservation) -> None:
        self._forget(reservation.metadata.uid or reservation.metadata.name or "")

    def _forget(self, uid: str) -> None:
        state = self.store.remove(uid)
        self._queued.pop(uid, None)
        self.handle.stand_ins.release(uid)
        if uid in self._announced:
            self._announced.discard(uid)
            if state is not None and state.pod is not None:
                self.handle.stand_ins.announce(WatchEvent(EventType.DELETED, state.pod.pod))

    def _announce(self, state: ReservationState) -> None:
        """Show the reserve pod to the pod informers (a gang of reservations is a gang), pending
        or, placed, on its node."""
        if state.pod is None:
            return
        pod = state.pod.pod
        if state.node is not None:
            pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": state.node})})
        kind = EventType.MODIFIED if state.uid in self._announced else EventType.ADDED
        self._announced.add(state.uid)
        self.handle.stand_ins.announce(WatchEvent(kind, pod))

    def _upsert(self, reservation: Reservation) -> None:
        state = ReservationState.of(reservation, self._ignored)
        finished = state.phase in ("Succeeded", "Failed") or reservation.metadata.deletion_timestamp
        if finished:
            self._forget(state.uid)
            return
        self.store.upsert(state)
        if state.placed:
            self._queued.pop(state.uid, None)
            self.handle.stand_ins.hold(state.stand_in())
            if _is_gang_member(state):
                self._announce(state)
            return
        if state.node is not None or state.pod is None:
            if state.error is not None:
                log.warning("reservation %s cannot be scheduled: %s", state.name, state.error)
            return
        if state.pod.scheduler_name != self.handle.scheduler_name:
            return
        generation = reservation.metadata.generation
        if state.uid in self._queued and self._queued[state.uid] == generation:
            return  # only its status changed: no new attempt
        self._queued[state.uid] = generation
        if _is_gang_member(state):
            self._announce(state)
        self.handle.stand_ins.enqueue(state.pod)


def _is_gang_member(state: ReservationState) -> bool:
    """The reserve pod carries a gang's labels or annotations (a reservation per member)."""
    if state.pod is None:
        return False
    labels, annotations = state.pod.labels, state.pod.annotations
    return bool(
        labels.get(gang_ext.LABEL_POD_GROUP)
        or labels.get(gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME)
        or annotations.get(gang_ext.ANNOTATION_GANG_NAME)
    )
