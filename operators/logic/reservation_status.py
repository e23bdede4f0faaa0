"""A Reservation's status from its owner pods and its node: pure functions, no Kopf, no I/O.

Koordinator's reservation controller, step by step (``plan``):

1. A Succeeded or Failed reservation only waits for garbage collection (``reservation_expiry``).
2. A passed ``expires`` / ttl makes it Failed, condition Ready False reason Expired, with a
   message saying what passed; Pending reservations too (Koordinator's controller does the same
   for them only as a side effect of its resync; here it frees the scheduling queue on time).
3. A reservation bound to a node that no longer exists fails the same way, naming the node.
4. Otherwise, for a reservation with ``status.nodeName``: the current owners are the non-terminal
   pods on that node whose ``scheduling.koordinator.sh/reservation-allocated`` annotation carries
   the reservation's uid (sorted by uid), and ``allocated`` is the sum of their requests masked to
   the resource names of ``status.allocatable``. When either differs from the status, the status is
   rewritten; an ``allocateOnce`` reservation that has an owner becomes Succeeded (Ready False,
   reason Succeeded). Owners that finish or are deleted drop out, which releases their share of an
   ``allocateOnce: false`` reservation.

The plan also says when to look again without any event: the expiry or garbage-collection time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.reservation import get_reservation_allocated
from apis.meta import ObjectReference
from apis.podrequests import pod_requests
from apis.resources import ResourceList, add
from apis.scheduling.reservation import Reservation, ReservationCondition, ReservationStatus
from operators.logic import reservation_expiry as expiry
from operators.logic.reservation_expiry import (
    CONDITION_READY,
    PHASE_FAILED,
    PHASE_SUCCEEDED,
    REASON_EXPIRED,
    REASON_SUCCEEDED,
)

__all__ = ["OwnerPod", "Plan", "allocated", "current_owners", "plan"]

_TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})


class OwnerPod(BaseModel):
    """What the status needs of a pod that a reservation was allocated to."""

    model_config = ConfigDict(frozen=True)

    reservation_uid: str
    namespace: str
    name: str
    uid: str
    node_name: str
    terminal: bool
    requests: ResourceList

    @classmethod
    def from_pod(cls, pod: Pod) -> OwnerPod | None:
        """None for a pod without a readable reservation-allocated annotation naming a uid."""
        try:
            allocated = get_reservation_allocated(pod.metadata.annotations)
        except InvalidAnnotation:
            return None
        if allocated is None or not allocated.uid:
            return None
        return cls(
            reservation_uid=allocated.uid,
            namespace=pod.metadata.namespace or "",
            name=pod.metadata.name or "",
            uid=pod.metadata.uid or "",
            node_name=pod.spec.node_name or "",
            terminal=pod.status.phase in _TERMINAL_POD_PHASES,
            requests=pod_requests(pod.spec),
        )

    def reference(self) -> ObjectReference:
        return ObjectReference(namespace=self.namespace, name=self.name, uid=self.uid)


def _owners(reservation: Reservation, pods: Iterable[OwnerPod]) -> list[OwnerPod]:
    status = reservation.status
    node = status.node_name if status is not None else None
    uid = reservation.metadata.uid
    if not node or not uid:
        return []
    found = [p for p in pods if p.reservation_uid == uid and p.node_name == node and not p.terminal]
    return sorted(found, key=lambda p: p.uid)


def current_owners(reservation: Reservation, pods: Iterable[OwnerPod]) -> list[ObjectReference]:
    """The reservation's owners now, sorted by uid (see the module docstring)."""
    return [p.reference() for p in _owners(reservation, pods)]


def allocated(reservation: Reservation, pods: Iterable[OwnerPod]) -> ResourceList:
    """The owners' requests summed and masked to the names of ``status.allocatable``."""
    names = (reservation.status.allocatable if reservation.status is not None else None) or {}
    total: ResourceList = {}
    for pod in _owners(reservation, pods):
        total = add(total, {name: q for name, q in pod.requests.items() if name in names})
    return total


@dataclass(frozen=True)
class Plan:
    status: ReservationStatus | None = None
    """The status to write, None when it is right as it is."""
    delete: bool = False
    """The reservation has been finished for longer than the retention."""
    wake_at: datetime | None = None
    """When the plan may change with no event: the expiry or garbage-collection time."""


def _ready_false(
    status: ReservationStatus, reason: str, message: str, now: datetime
) -> list[ReservationCondition]:
    """The conditions with Ready set to False for ``reason`` (Koordinator's ``setReservationExpired``
    / ``setReservationSucceeded``): the transition time moves only when Ready was not False already."""
    conditions = [c.model_copy() for c in status.conditions or []]
    for i, condition in enumerate(conditions):
        if condition.type == CONDITION_READY:
            transition = condition.last_transition_time if condition.status == "False" else now
            conditions[i] = condition.model_copy(
                update={
                    "status": "False",
                    "reason": reason,
                    "message": message,
                    "last_probe_time": now,
                    "last_transition_time": transition or now,
                }
            )
            return conditions
    ready = ReservationCondition(
        type=CONDITION_READY,
        status="False",
        reason=reason,
        message=message,
        last_probe_time=now,
        last_transition_time=now,
    )
    return [*conditions, ready]


def _failed(status: ReservationStatus, message: str, now: datetime) -> ReservationStatus:
    return status.model_copy(
        update={"phase": PHASE_FAILED, "conditions": _ready_false(status, REASON_EXPIRED, message, now)}
    )


def _same_resources(a: ResourceList | None, b: ResourceList | None) -> bool:
    a, b = a or {}, b or {}
    return all(a.get(name) == b.get(name) or not (a.get(name) or b.get(name)) for name in {*a, *b})


def _owner_keys(owners: Iterable[ObjectReference]) -> list[tuple[str | None, str | None, str | None]]:
    return sorted(((o.namespace, o.name, o.uid) for o in owners), key=lambda k: k[2] or "")


def plan(
    reservation: Reservation,
    pods: Iterable[OwnerPod],
    *,
    node_exists: bool,
    now: datetime,
    retention: timedelta,
) -> Plan:
    """What to do with ``reservation`` now (see the module docstring); ``pods`` may hold owners of
    other reservations, and ``node_exists`` says whether ``status.nodeName`` names a node."""
    stamp = now.replace(microsecond=0)  # what the conditions record (metav1.Time has seconds)
    status = reservation.status or ReservationStatus()
    if expiry.is_finished(reservation):
        gc_at = expiry.gc_deadline(reservation, retention)
        if gc_at is not None and now >= gc_at:
            return Plan(delete=True)
        return Plan(wake_at=gc_at)
    deadline = expiry.expiry(reservation)
    if deadline is not None and now >= deadline.at:
        return Plan(status=_failed(status, f"the reservation expired: {deadline.why}", stamp))
    wake_at = deadline.at if deadline is not None else None
    if not status.node_name:
        return Plan(wake_at=wake_at)
    if not node_exists:
        message = f"the reservation expired: its node {status.node_name} was deleted"
        return Plan(status=_failed(status, message, stamp))
    owners = _owners(reservation, pods)
    references = [p.reference() for p in owners]
    in_use = allocated(reservation, owners)
    if _owner_keys(references) == _owner_keys(status.current_owners or []) and _same_resources(
        in_use, status.allocated
    ):
        return Plan(wake_at=wake_at)
    update = status.model_copy(update={"current_owners": references or None, "allocated": in_use or None})
    spec = reservation.spec
    if owners and (spec is None or spec.allocate_once):
        names = ", ".join(f"{p.namespace}/{p.name}" for p in owners)
        message = f"allocated to {names} (allocateOnce: only the first owner may use it)"
        update = update.model_copy(
            update={
                "phase": PHASE_SUCCEEDED,
                "conditions": _ready_false(status, REASON_SUCCEEDED, message, stamp),
            }
        )
    return Plan(status=update, wake_at=wake_at)
