"""Pod events: owners (pods with ``reservation-allocated``) take room out of their reservation
while bound and give it back when they finish."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from apis.client.backend import EventType, WatchEvent
from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.reservation import ANNOTATION_RESERVATION_ALLOCATED, get_reservation_allocated
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.handle import Handle
from scheduler.plugins.reservation.stand_ins import rehold
from scheduler.plugins.reservation.store import ReservationStore

__all__ = ["PodHandler"]

log = logging.getLogger(__name__)


class PodHandler:
    def __init__(self, handle: Handle, store: ReservationStore) -> None:
        self.handle = handle
        self.store = store

    def on_event(self, event: WatchEvent[Pod]) -> None:
        if event.type is EventType.LISTED:  # a page of the first list; its REPLACED skips it
            self._upsert_each(event.objects)
            return
        event.dispatch(lambda pods: self._replace(pods, event.untold), self._upsert, self._delete)

    def _replace(self, pods: Sequence[Pod], untold: Sequence[Pod]) -> None:
        """The relisted ``pods``, of which ``untold`` are not upserted yet."""
        present = {pod.metadata.uid or "" for pod in pods}
        self._upsert_each(untold)
        for uid in [uid for uid in self.store.owner_of if uid not in present]:
            rehold(self.handle, self.store, self.store.remove_owner(uid))

    def _upsert_each(self, pods: Sequence[Pod]) -> None:
        for pod in pods:
            try:
                self._upsert(pod)
            except Exception:
                log.exception("pod %s/%s could not be handled", pod.metadata.namespace, pod.metadata.name)

    def _upsert(self, pod: Pod) -> None:
        annotations = pod.metadata.annotations
        if not annotations or ANNOTATION_RESERVATION_ALLOCATED not in annotations:
            return
        uid = pod.metadata.uid or ""
        if pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp:
            rehold(self.handle, self.store, self.store.remove_owner(uid))
            return
        if not pod.spec.node_name:
            return
        try:
            allocated = get_reservation_allocated(annotations)
        except InvalidAnnotation:
            return
        if allocated is None or not allocated.uid:
            return
        if self.store.owner_of.get(uid) == allocated.uid:
            return
        previous = self.store.remove_owner(uid)
        rehold(self.handle, self.store, previous)
        rehold(self.handle, self.store, self.store.add_owner(allocated.uid, PodInfo.of(pod)))

    def _delete(self, pod: Pod) -> None:
        rehold(self.handle, self.store, self.store.remove_owner(pod.metadata.uid or ""))
