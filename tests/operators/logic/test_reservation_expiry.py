"""When a Reservation expires (Koordinator's isReservationNeedExpiration) and when a finished one
is garbage-collected (gcReservations after gcDurationSeconds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from apis.scheduling.reservation import Reservation
from operators.logic import reservation_expiry as expiry

CREATED = datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC)
TEMPLATE = {"spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}}


def reservation(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> Reservation:
    return Reservation.model_validate(
        {
            "metadata": {"name": "r", "uid": "r-uid", "creationTimestamp": "2026-11-25T10:00:00Z"},
            "spec": {"template": TEMPLATE, "owners": [{"object": {"name": "p"}}], **(spec or {})},
            "status": status or {},
        }
    )


def test_ttl_counts_from_creation() -> None:
    deadline = expiry.expiry(reservation({"ttl": "90s"}))
    assert deadline is not None
    assert deadline.at == CREATED + timedelta(seconds=90)
    assert deadline.why == "spec.ttl 90s passed since its creation at 2026-11-25T10:00:00Z"


def test_the_crd_default_ttl_is_24h() -> None:
    deadline = expiry.expiry(reservation())
    assert deadline is not None
    assert deadline.at == CREATED + timedelta(hours=24)


def test_expires_replaces_the_default_ttl_even_when_later() -> None:
    """The CRD writes ttl 24h into every reservation that sets only expires: expires decides."""
    later = expiry.expiry(reservation({"expires": "2026-11-27T10:00:00Z"}))
    assert later is not None
    assert later.at == datetime(2026, 11, 27, 10, 0, 0, tzinfo=UTC)
    assert later.why == "spec.expires 2026-11-27T10:00:00Z passed"
    sooner = expiry.expiry(reservation({"expires": "2026-11-25T10:00:05Z"}))
    assert sooner is not None
    assert sooner.at == CREATED + timedelta(seconds=5)


def test_ttl_zero_disables_expiry_even_with_expires() -> None:
    assert expiry.expiry(reservation({"ttl": "0s"})) is None
    assert expiry.expiry(reservation({"ttl": "0s", "expires": "2026-11-25T10:00:05Z"})) is None


def test_finished_reservations_never_expire() -> None:
    assert expiry.expiry(reservation({"ttl": "1s"}, {"phase": "Succeeded"})) is None
    assert expiry.expiry(reservation({"ttl": "1s"}, {"phase": "Failed"})) is None
    assert expiry.expiry(reservation({"ttl": "1s"}, {"phase": "Available", "nodeName": "n"})) is not None


def test_a_finished_reservation_is_collected_a_retention_after_its_ready_condition_changed() -> None:
    ready = {"type": "Ready", "status": "False", "reason": "Expired"}
    failed = reservation(
        status={
            "phase": "Failed",
            "conditions": [
                {"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-11-25T12:00:00Z"},
                {
                    **ready,
                    "lastTransitionTime": "2026-11-25T11:00:00Z",
                    "lastProbeTime": "2026-11-25T11:30:00Z",
                },
            ],
        }
    )
    assert expiry.finished_at(failed) == datetime(2026, 11, 25, 11, 30, tzinfo=UTC)
    assert expiry.gc_deadline(failed, timedelta(hours=24)) == datetime(2026, 11, 26, 11, 30, tzinfo=UTC)


def test_without_a_ready_condition_the_latest_condition_or_the_creation_counts() -> None:
    other = reservation(
        status={
            "phase": "Succeeded",
            "conditions": [{"type": "Scheduled", "lastProbeTime": "2026-11-25T13:00:00Z"}],
        }
    )
    assert expiry.finished_at(other) == datetime(2026, 11, 25, 13, 0, tzinfo=UTC)
    bare = reservation(status={"phase": "Failed"})
    assert expiry.gc_deadline(bare, timedelta(seconds=60)) == CREATED + timedelta(seconds=60)


def test_an_active_reservation_is_never_collected() -> None:
    assert (
        expiry.gc_deadline(reservation(status={"phase": "Available", "nodeName": "n"}), timedelta(0)) is None
    )
    assert expiry.gc_deadline(reservation(), timedelta(0)) is None
