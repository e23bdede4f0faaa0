"""Reservation events: a reservation charges its quota from its creation (a request while
Pending, used once placed) for the room its owners have not taken
(``helper.reservation.quota_stand_in``)."""

from __future__ import annotations

from collections.abc import Callable

from apis.client.backend import EventType, WatchEvent
from apis.extension.reservation import is_reserve_pod
from apis.scheduling.reservation import Reservation
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.elastic_quota.ledger import Ledger
from scheduler.plugins.elastic_quota.writer import FiguresWriter
from scheduler.plugins.helper.reservation import quota_stand_in

__all__ = ["ReservationHandler"]


class ReservationHandler:
    def __init__(self, ledger: Ledger, writer: FiguresWriter, quota_name: Callable[[PodInfo], str]) -> None:
        self.ledger = ledger
        self.writer = writer
        self._quota_name = quota_name

    def on_event(self, event: WatchEvent[Reservation]) -> None:
        if event.type is EventType.REPLACED:
            present = {r.metadata.uid or "" for r in event.objects}
            for uid in self.ledger.uids():
                charge = self.ledger.charge(uid)
                if charge is not None and is_reserve_pod(charge.pod.annotations) and uid not in present:
                    self.ledger.remove(uid)
            for reservation in event.objects:
                self._charge(reservation)
        elif event.obj is not None:
            if event.type is EventType.DELETED:
                self.ledger.remove(event.obj.metadata.uid or "")
            else:
                self._charge(event.obj)
        self.writer.changed()

    def _charge(self, reservation: Reservation) -> None:
        stand_in = quota_stand_in(reservation)
        if stand_in is None:
            self.ledger.remove(reservation.metadata.uid or "")
            return
        old = self.ledger.charge(stand_in.uid)
        if old is not None and old.reserved and not stand_in.node_name:
            return  # our Reserve placed it; the watch has not seen it Available yet
        self.ledger.on_pod(stand_in, self._quota_name(stand_in))
