"""A Reservation's status from its owner pods and its node (Koordinator's reservation controller)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apis.core import Pod
from apis.extension.reservation import ANNOTATION_RESERVATION_ALLOCATED
from apis.scheduling.reservation import Reservation
from operators.logic.reservation_status import OwnerPod, allocated, current_owners, plan

CREATED = datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC)
NOW = CREATED + timedelta(minutes=10)
DAY = timedelta(hours=24)
TEMPLATE = {"spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]}}
AVAILABLE = {
    "phase": "Available",
    "nodeName": "node-1",
    "allocatable": {"cpu": "2", "memory": "4Gi"},
    "conditions": [
        {
            "type": "Scheduled",
            "status": "True",
            "reason": "Scheduled",
            "lastTransitionTime": "2026-11-25T10:00:01Z",
        },
        {
            "type": "Ready",
            "status": "True",
            "reason": "Available",
            "lastTransitionTime": "2026-11-25T10:00:01Z",
        },
    ],
}


def reservation(status: dict[str, Any] | None = None, **spec: Any) -> Reservation:
    return Reservation.model_validate(
        {
            "metadata": {"name": "r", "uid": "r-uid", "creationTimestamp": "2026-11-25T10:00:00Z"},
            "spec": {"template": TEMPLATE, "owners": [{"object": {"name": "p"}}], "ttl": "1h", **spec},
            "status": AVAILABLE if status is None else status,
        }
    )


def owner_pod(
    name: str,
    *,
    uid: str | None = None,
    node: str = "node-1",
    reservation_uid: str = "r-uid",
    phase: str = "Running",
    requests: dict[str, str] | None = None,
) -> OwnerPod:
    pod = Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": uid or f"{name}-uid",
                "annotations": {
                    ANNOTATION_RESERVATION_ALLOCATED: json.dumps({"name": "r", "uid": reservation_uid})
                },
            },
            "spec": {
                "nodeName": node,
                "containers": [{"name": "m", "resources": {"requests": requests or {"cpu": "1"}}}],
            },
            "status": {"phase": phase},
        }
    )
    owner = OwnerPod.from_pod(pod)
    assert owner is not None
    return owner


def ready(status: dict[str, Any] | None) -> dict[str, Any]:
    assert status is not None
    (condition,) = [c for c in status["conditions"] if c["type"] == "Ready"]
    return dict(condition)


def wire(r: Reservation, pods: list[OwnerPod], **kwargs: Any) -> dict[str, Any] | None:
    result = plan(r, pods, **{"node_exists": True, "now": NOW, "retention": DAY, **kwargs})
    return (
        None
        if result.status is None
        else result.status.model_dump(by_alias=True, exclude_none=True, mode="json")
    )


# ---- owners and allocated ------------------------------------------------------------------


def test_pods_without_a_readable_annotation_are_no_owners() -> None:
    pod = Pod.model_validate(
        {"metadata": {"name": "p", "annotations": {ANNOTATION_RESERVATION_ALLOCATED: "{"}}}
    )
    assert OwnerPod.from_pod(pod) is None
    assert OwnerPod.from_pod(Pod.model_validate({"metadata": {"name": "p"}})) is None
    no_uid = {ANNOTATION_RESERVATION_ALLOCATED: '{"name": "r"}'}
    assert OwnerPod.from_pod(Pod.model_validate({"metadata": {"name": "p", "annotations": no_uid}})) is None


def test_owners_are_the_live_pods_on_the_node_that_name_the_uid_sorted_by_uid() -> None:
    pods = [
        owner_pod("b", uid="2"),
        owner_pod("a", uid="1"),
        owner_pod("elsewhere", node="node-2"),
        owner_pod("other-reservation", reservation_uid="other"),
        owner_pod("done", phase="Succeeded"),
        owner_pod("crashed", phase="Failed"),
    ]
    refs = current_owners(reservation(), pods)
    assert [(o.namespace, o.name, o.uid) for o in refs] == [("default", "a", "1"), ("default", "b", "2")]


def test_allocated_sums_the_owners_requests_masked_to_the_allocatable_names() -> None:
    pods = [
        owner_pod("a", requests={"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"}),
        owner_pod("b", requests={"cpu": "250m"}),
    ]
    assert {k: str(v) for k, v in allocated(reservation(), pods).items()} == {"cpu": "750m", "memory": "1Gi"}


def test_a_reservation_without_a_node_has_no_owners() -> None:
    assert current_owners(reservation({"phase": "Pending"}), [owner_pod("a")]) == []


# ---- phases ---------------------------------------------------------------------------------


def test_a_pending_reservation_waits_for_its_expiry() -> None:
    result = plan(reservation({}), [], node_exists=False, now=NOW, retention=DAY)
    assert result.status is None
    assert not result.delete
    assert result.wake_at == CREATED + timedelta(hours=1)


def test_an_expired_pending_reservation_fails_with_the_reason() -> None:
    r = reservation({}, ttl="3s")
    status = wire(r, [], node_exists=False)
    assert status is not None
    assert status["phase"] == "Failed"
    assert ready(status) == {
        "type": "Ready",
        "status": "False",
        "reason": "Expired",
        "message": "the reservation expired: spec.ttl 3s passed since its creation at 2026-11-25T10:00:00Z",
        "lastProbeTime": "2026-11-25T10:10:00Z",
        "lastTransitionTime": "2026-11-25T10:10:00Z",
    }


def test_an_expired_available_reservation_fails_and_keeps_its_other_conditions() -> None:
    status = wire(reservation(expires="2026-11-25T10:05:00Z", ttl="24h"), [owner_pod("a")])
    assert status is not None
    assert status["phase"] == "Failed"
    assert ready(status)["message"] == "the reservation expired: spec.expires 2026-11-25T10:05:00Z passed"
    assert ready(status)["lastTransitionTime"] == "2026-11-25T10:10:00Z"  # Ready was True
    assert [c["type"] for c in status["conditions"]] == ["Scheduled", "Ready"]
    assert status["nodeName"] == "node-1"
    assert "currentOwners" not in status


def test_a_ready_condition_already_false_keeps_its_transition_time() -> None:
    pending = {
        "phase": "Pending",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-25T10:00:00Z"}],
    }
    status = wire(reservation(pending, ttl="1s"), [])
    assert ready(status)["lastTransitionTime"] == "2026-11-25T10:00:00Z"
    assert ready(status)["lastProbeTime"] == "2026-11-25T10:10:00Z"


def test_a_reservation_whose_node_was_deleted_fails() -> None:
    status = wire(reservation(), [], node_exists=False)
    assert status is not None
    assert status["phase"] == "Failed"
    assert ready(status)["reason"] == "Expired"
    assert ready(status)["message"] == "the reservation expired: its node node-1 was deleted"


def test_an_allocate_once_reservation_with_an_owner_succeeds() -> None:
    status = wire(reservation(), [owner_pod("a", requests={"cpu": "1500m"})])
    assert status is not None
    assert status["phase"] == "Succeeded"
    assert status["currentOwners"] == [{"namespace": "default", "name": "a", "uid": "a-uid"}]
    assert status["allocated"] == {"cpu": "1500m"}
    assert ready(status)["status"] == "False"
    assert ready(status)["reason"] == "Succeeded"
    assert "default/a" in ready(status)["message"]
    assert status["allocatable"] == {"cpu": "2", "memory": "4Gi"}  # the scheduler's fields stay


def test_allocate_once_false_keeps_the_reservation_available_and_releases_finished_owners() -> None:
    r = reservation(allocateOnce=False)
    a, b = owner_pod("a", requests={"cpu": "1"}), owner_pod("b", requests={"cpu": "500m"})
    status = wire(r, [a, b])
    assert status is not None
    assert status["phase"] == "Available"
    assert [o["name"] for o in status["currentOwners"]] == ["a", "b"]
    assert status["allocated"] == {"cpu": "1500m"}
    assert ready(status)["status"] == "True"

    with_both = reservation(
        {**AVAILABLE, "currentOwners": status["currentOwners"], "allocated": status["allocated"]},
        allocateOnce=False,
    )
    assert wire(with_both, [a, b]) is None  # nothing changed: nothing to write
    released = wire(with_both, [a, owner_pod("b", requests={"cpu": "500m"}, phase="Succeeded")])
    assert released is not None
    assert [o["name"] for o in released["currentOwners"]] == ["a"]
    assert released["allocated"] == {"cpu": "1"}
    emptied = wire(with_both, [])
    assert emptied is not None
    assert "currentOwners" not in emptied
    assert "allocated" not in emptied
    assert emptied["phase"] == "Available"


def test_equal_quantities_in_another_spelling_are_no_change() -> None:
    r = reservation(
        {
            **AVAILABLE,
            "currentOwners": [{"namespace": "default", "name": "a", "uid": "a-uid"}],
            "allocated": {"cpu": "1000m"},
        },
        allocateOnce=False,
    )
    assert wire(r, [owner_pod("a", requests={"cpu": "1"})]) is None


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_reservation_is_deleted_after_the_retention(phase: str) -> None:
    finished = {
        "phase": phase,
        "nodeName": "gone",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-25T10:05:00Z"}],
    }
    r = reservation(finished, ttl="1s")
    waiting = plan(r, [owner_pod("a")], node_exists=False, now=NOW, retention=DAY)
    assert (waiting.status, waiting.delete) == (None, False)  # no expiry, no owner sync, no node check
    assert waiting.wake_at == datetime(2026, 11, 26, 10, 5, tzinfo=UTC)
    due = plan(r, [], node_exists=False, now=datetime(2026, 11, 26, 10, 5, tzinfo=UTC), retention=DAY)
    assert due.delete
    short = plan(r, [], node_exists=True, now=NOW, retention=timedelta(minutes=5))
    assert short.delete


def test_a_sub_second_deadline_is_judged_at_the_exact_time_and_recorded_in_seconds() -> None:
    r = reservation({}, ttl="1500ms")
    early = plan(r, [], node_exists=False, now=CREATED + timedelta(milliseconds=1400), retention=DAY)
    assert early.status is None
    assert early.wake_at == CREATED + timedelta(milliseconds=1500)
    late = plan(r, [], node_exists=False, now=CREATED + timedelta(milliseconds=1600), retention=DAY)
    status = (
        None if late.status is None else late.status.model_dump(by_alias=True, exclude_none=True, mode="json")
    )
    assert status is not None
    assert status["phase"] == "Failed"
    assert ready(status)["lastTransitionTime"] == "2026-11-25T10:00:01Z"
