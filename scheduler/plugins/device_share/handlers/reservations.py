"""Reservation events: the cards a placed reservation holds, read back from the ``device-allocated``
annotation DeviceShare wrote at its PreBind."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from apis.client.backend import WatchEvent, each
from apis.errors import InvalidAnnotation
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED, get_device_allocations
from apis.scheduling.reservation import Reservation
from scheduler.plugins.device_share.reserved import ReservedCards, ReservedDevices
from scheduler.plugins.device_share.store import allocations_of

__all__ = ["ReservationHandler"]

log = logging.getLogger(__name__)


class ReservationHandler:
    def __init__(self, reserved: ReservedDevices) -> None:
        self.reserved = reserved

    def on_event(self, event: WatchEvent[Reservation]) -> None:
        event.dispatch(self._replace, self._upsert, self._delete)

    def _replace(self, reservations: Sequence[Reservation]) -> None:
        present = {r.metadata.uid or r.metadata.name or "" for r in reservations}
        for uid, cards in list(self.reserved.reservations.items()):
            if uid not in present and not cards.assumed:
                self.reserved.remove_reservation(uid)
        each(reservations, self._upsert)

    def _delete(self, reservation: Reservation) -> None:
        self.reserved.remove_reservation(reservation.metadata.uid or reservation.metadata.name or "")

    def _upsert(self, reservation: Reservation) -> None:
        """A placed reservation holds the cards its ``device-allocated`` annotation names: read back
        on every event, so a restart rebuilds them."""
        uid = reservation.metadata.uid or reservation.metadata.name or ""
        status = reservation.status
        phase = status.phase if status is not None else None
        if phase in ("Succeeded", "Failed") or reservation.metadata.deletion_timestamp:
            self.reserved.remove_reservation(uid)
            return
        node = status.node_name if status is not None else None
        if phase != "Available" or not node:
            return  # not placed yet: an assumed reserve pod keeps what Reserve gave it
        try:
            allocated = get_device_allocations(reservation.metadata.annotations)
        except InvalidAnnotation:
            log.warning(
                "reservation %s: malformed %s", reservation.metadata.name, ANNOTATION_DEVICE_ALLOCATED
            )
            return
        if allocated is None:
            return
        policy = (reservation.spec.allocate_policy if reservation.spec else None) or ""
        cards = ReservedCards(node, tuple(allocations_of(allocated)), policy, assumed=False)
        self.reserved.set_reservation(uid, cards)
