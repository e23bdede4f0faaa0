"""Pod events: the cards a bound pod holds, read back from its ``device-allocated`` annotation, so
that a restart rebuilds them; a pod that ends gives them back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from apis.client.backend import EventType, ObjectRef, WatchEvent, each
from apis.core import Pod
from apis.errors import InvalidAnnotation, echo
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATED,
    DEVICE_TYPES,
    parse_device_allocations,
    unknown_device_types,
)
from apis.extension.reservation import get_reservation_allocated, is_reserve_pod
from scheduler.plugins.device_share.allocator import Allocation
from scheduler.plugins.device_share.rdma import RDMAAllocation, rdma_allocations_of
from scheduler.plugins.device_share.reserved import ReservedDevices
from scheduler.plugins.device_share.store import DeviceStore, allocations_of
from scheduler.plugins.helper.warnings import ObjectWarnings

__all__ = ["PodHandler"]


_READ_KEPT = 4096


@dataclass(frozen=True, slots=True)
class _Read:
    """What a ``device-allocated`` value reads as."""

    unknown: list[str]
    """Device types Koordinator does not know (``unknown_device_types``)."""
    allocations: tuple[Allocation, ...]
    rdma: tuple[RDMAAllocation, ...]


class PodHandler:
    def __init__(self, store: DeviceStore, reserved: ReservedDevices, warnings: ObjectWarnings) -> None:
        self.store = store
        self.reserved = reserved
        self._warnings = warnings
        self._parsed: dict[str, _Read] = {}

    def on_event(self, event: WatchEvent[Pod]) -> None:
        if event.type is EventType.LISTED:  # a page of the first list; its REPLACED skips it
            each(event.objects, self._upsert)
            return
        event.dispatch(lambda pods: self._replace(pods, event.untold), self._upsert, self._delete)

    def _delete(self, pod: Pod) -> None:
        self.store.release(pod.metadata.uid or "")
        self.reserved.remove_owner(pod.metadata.uid or "")

    def _replace(self, pods: Sequence[Pod], untold: Sequence[Pod]) -> None:
        """The relisted ``pods``, of which ``untold`` are not upserted yet."""
        present = {pod.metadata.uid or "" for pod in pods}
        each(untold, self._upsert)
        for uid in self.store.holders():
            if uid not in present and not self.store.is_assumed(uid) and not self.reserved.knows(uid):
                self.store.release(uid)
                self.reserved.remove_owner(uid)

    def _upsert(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        if is_reserve_pod(pod.metadata.annotations):
            return  # a reservation's cards are read from the Reservation (handlers/reservations.py)
        if pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp:
            self._delete(pod)
            return
        node = pod.spec.node_name
        if not node:
            return  # not bound: only Reserve (an assumed pod) holds cards for it
        raw = (pod.metadata.annotations or {}).get(ANNOTATION_DEVICE_ALLOCATED)
        if raw is None:
            return
        try:
            read = self._read(raw)
        except InvalidAnnotation as exc:
            self._warnings.warn(_regarding(pod), f"devices not counted: {exc}")
            return
        if read.unknown:
            # Koordinator accepts and ignores them: so do we, saying so.
            self._warnings.warn(
                _regarding(pod),
                f"{ANNOTATION_DEVICE_ALLOCATED}: unknown device type(s) {echo(read.unknown)} ignored "
                f"(known: {', '.join(DEVICE_TYPES)})",
            )
        self.store.hold(uid, node, read.allocations, assumed=False, rdma=read.rdma)
        self._follow_owner(pod, read.allocations)

    def _read(self, raw: str) -> _Read:
        """The annotation's cards and NICs; raises InvalidAnnotation. Pods' annotations repeat
        (a few shapes on a few minors, and each pod's again on its next event), so what a value
        reads as is kept (the last ``_READ_KEPT`` distinct values)."""
        read = self._parsed.get(raw)
        if read is None:
            allocated = parse_device_allocations(raw)
            read = _Read(
                unknown_device_types(allocated),
                tuple(allocations_of(allocated)),
                tuple(rdma_allocations_of(allocated)),
            )
            if len(self._parsed) >= _READ_KEPT:
                self._parsed.clear()
            self._parsed[raw] = read
        return read

    def _follow_owner(self, pod: Pod, allocations: Sequence[Allocation]) -> None:
        """A bound pod allocated from a reservation takes its cards out of the reservation's."""
        uid = pod.metadata.uid or ""
        try:
            reservation = get_reservation_allocated(pod.metadata.annotations)
        except InvalidAnnotation:
            reservation = None
        if reservation is None or not reservation.uid:
            self.reserved.remove_owner(uid)
        else:
            self.reserved.set_owner(uid, reservation.uid, allocations)


def _regarding(pod: Pod) -> ObjectRef:
    """The pod a warning is about (made only for a warning: most bound pods hold no devices)."""
    meta = pod.metadata
    return ObjectRef(kind="Pod", namespace=meta.namespace, name=meta.name or "", uid=meta.uid or "")
