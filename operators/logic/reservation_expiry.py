"""When a Reservation expires and when a finished one is deleted: pure functions, no Kopf, no I/O.

Expiry (Koordinator's ``isReservationNeedExpiration``): ``ttl: 0s`` disables it; otherwise
``spec.expires`` is the deadline when set, else ``metadata.creationTimestamp + ttl``. The CRD
defaults ``ttl`` to 24h, so a reservation that sets only ``expires`` carries both: ``expires`` then
replaces the default ttl (Koordinator documents that ``expires`` is checked first; its code would
also expire such a reservation after the default 24h, cutting a longer ``expires`` short).
Succeeded and Failed reservations never expire.

Garbage collection (Koordinator's ``gcReservations``, ``defaultGCDuration`` 24h): a Succeeded or
Failed reservation is deleted once the retention has passed since it finished, read from its Ready
condition (the transition, or the last probe when the condition did not change status), else the
latest time any condition records, else its creation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from apis.duration import parse_go_duration_ns
from apis.scheduling.reservation import Reservation, ReservationStatus

__all__ = [
    "CONDITION_READY",
    "CONDITION_SCHEDULED",
    "DEFAULT_GC_DURATION",
    "PHASE_AVAILABLE",
    "PHASE_FAILED",
    "PHASE_PENDING",
    "PHASE_SUCCEEDED",
    "PHASE_WAITING",
    "REASON_EXPIRED",
    "REASON_SUCCEEDED",
    "Deadline",
    "expiry",
    "finished_at",
    "gc_deadline",
    "is_finished",
]

PHASE_PENDING = "Pending"
PHASE_AVAILABLE = "Available"
PHASE_WAITING = "Waiting"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
CONDITION_SCHEDULED = "Scheduled"
CONDITION_READY = "Ready"
REASON_EXPIRED = "Expired"
REASON_SUCCEEDED = "Succeeded"
DEFAULT_GC_DURATION = timedelta(hours=24)
"""Koordinator's ``defaultGCDuration``: how long a finished reservation is kept."""


@dataclass(frozen=True)
class Deadline:
    at: datetime
    why: str
    """What passed, for the Ready condition's message ("spec.expires 2026-11-25T10:00:00Z passed")."""


def _phase(status: ReservationStatus | None) -> str:
    return status.phase if status is not None and status.phase else PHASE_PENDING


def is_finished(reservation: Reservation) -> bool:
    return _phase(reservation.status) in (PHASE_SUCCEEDED, PHASE_FAILED)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def expiry(reservation: Reservation) -> Deadline | None:
    """When the reservation expires, or None when it never does (finished, ttl 0s, or no creation
    time to count a ttl from)."""
    spec = reservation.spec
    if spec is None or is_finished(reservation):
        return None
    ttl_ns = parse_go_duration_ns(spec.ttl)
    if ttl_ns == 0:
        return None
    if spec.expires is not None:
        return Deadline(spec.expires, f"spec.expires {_stamp(spec.expires)} passed")
    created = reservation.metadata.creation_timestamp
    if created is None:
        return None
    at = created + timedelta(microseconds=ttl_ns // 1000)
    return Deadline(at, f"spec.ttl {spec.ttl} passed since its creation at {_stamp(created)}")


def finished_at(reservation: Reservation) -> datetime | None:
    """When a Succeeded or Failed reservation finished (see the module docstring); None otherwise."""
    if not is_finished(reservation):
        return None
    status = reservation.status
    conditions = (status.conditions if status is not None else None) or []
    ready = [c for c in conditions if c.type == CONDITION_READY]
    for candidates in (ready, conditions):
        stamps = [t for c in candidates for t in (c.last_transition_time, c.last_probe_time) if t is not None]
        if stamps:
            return max(stamps)
    return reservation.metadata.creation_timestamp


def gc_deadline(reservation: Reservation, retention: timedelta) -> datetime | None:
    """When a finished reservation is to be deleted; None for one that is not finished."""
    finished = finished_at(reservation)
    return None if finished is None else finished + retention
