"""Reservation events: a placed reservation holds the CPUs of the ``resource-status`` NodeNUMAResource
wrote on it at its PreBind, read back on every event so that a restart holds them again."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from apis.client.backend import WatchEvent, each
from apis.errors import InvalidAnnotation
from apis.extension.numa import ANNOTATION_RESOURCE_STATUS
from apis.scheduling.reservation import Reservation
from scheduler.plugins.node_numa_resource.resource_status import held
from scheduler.plugins.node_numa_resource.store import NUMAStore, Record

__all__ = ["ReservationHandler"]

log = logging.getLogger(__name__)


class ReservationHandler:
    def __init__(self, store: NUMAStore) -> None:
        self.store = store

    def on_event(self, event: WatchEvent[Reservation]) -> None:
        event.dispatch(self._replace, self._upsert, self._delete)

    def _replace(self, reservations: Sequence[Reservation]) -> None:
        present = {r.metadata.uid or r.metadata.name or "" for r in reservations}
        for uid, record in list(self.store.records.items()):
            if record.reservation and uid not in present and not record.assumed:
                self.store.release(uid)
        each(reservations, self._upsert)

    def _delete(self, reservation: Reservation) -> None:
        uid = reservation.metadata.uid or reservation.metadata.name or ""
        record = self.store.records.get(uid)
        if record is not None and record.reservation:
            self.store.release(uid)

    def _upsert(self, reservation: Reservation) -> None:
        uid = reservation.metadata.uid or reservation.metadata.name or ""
        status = reservation.status
        phase = status.phase if status is not None else None
        if phase in ("Succeeded", "Failed") or reservation.metadata.deletion_timestamp:
            self._delete(reservation)
            return
        node = status.node_name if status is not None else None
        annotations = reservation.metadata.annotations or {}
        if phase != "Available" or not node or ANNOTATION_RESOURCE_STATUS not in annotations:
            return  # not placed yet: an assumed stand-in keeps what Reserve gave it
        try:
            cpus, numa = held(annotations)
        except (InvalidAnnotation, ValueError) as exc:
            log.warning("reservation %s: %s", reservation.metadata.name, exc)
            return
        self.store.hold(uid, Record(node, cpus, numa, "None", assumed=False, reservation=True))
