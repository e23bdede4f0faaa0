"""podgroup_phase: Koordinator's PodGroup phase table, the counts, and the schedule timeout."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apis.extension.gang import ANNOTATION_GANG_TIMEOUT
from apis.scheduling.podgroup import PodGroup, PodGroupStatus
from operators.logic import podgroup_phase as pp
from operators.logic.podgroup_phase import MemberPod

NOW = datetime(2025, 6, 1, 12, 0, 0, 500_000, tzinfo=UTC)
START = datetime(2025, 6, 1, 11, 0, 0, tzinfo=UTC)


def group(
    min_member: int = 2,
    phase: str | None = None,
    *,
    timeout: int | None = None,
    created: datetime = NOW - timedelta(seconds=1),
    annotations: dict[str, str] | None = None,
    **status: Any,
) -> PodGroup:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return PodGroup.model_validate(
        {
            "metadata": {
                "name": "gang",
                "namespace": "ns",
                "creationTimestamp": created.isoformat(),
                "annotations": annotations,
            },
            "spec": spec,
            "status": {"phase": phase, **status},
        }
    )


def pods(*phases: str | None, bound: int | None = None, owners: tuple[str, ...] = ()) -> list[MemberPod]:
    """One member per phase; the first ``bound`` members (default: all non-None phases) are bound."""
    n_bound = sum(p not in (None, "Pending") for p in phases) if bound is None else bound
    return [MemberPod(name=f"p{i}", bound=i < n_bound, phase=p, owners=owners) for i, p in enumerate(phases)]


def step(pg: PodGroup, members: list[MemberPod]) -> PodGroupStatus:
    return pp.sync_step(pg, members, NOW)


@pytest.mark.parametrize(
    ("pg", "members", "phase"),
    [
        pytest.param(group(phase=None), [], "Pending", id="empty-becomes-pending"),
        pytest.param(group(phase="Pending"), pods("Pending"), "Pending", id="pending-below-min-stays"),
        pytest.param(
            group(phase="Pending"), pods("Pending", "Pending"), "PreScheduling", id="pending-to-prescheduling"
        ),
        pytest.param(
            group(0, phase="Pending"), pods("Pending"), "Pending", id="min-member-zero-never-leaves-pending"
        ),
        pytest.param(group(phase="PreScheduling"), [], "Pending", id="no-pods-back-to-pending"),
        pytest.param(group(phase="Running"), [], "Pending", id="running-with-no-pods-back-to-pending"),
        pytest.param(
            group(phase="PreScheduling"), pods("Pending", "Pending"), "Scheduling", id="to-scheduling"
        ),
        pytest.param(
            group(phase="Scheduling"), pods("Pending", "Pending", bound=2), "Scheduled", id="to-scheduled"
        ),
        pytest.param(
            group(phase="Scheduling"),
            pods("Running", "Pending", bound=2),
            "Scheduled",
            id="one-running-still-scheduled",
        ),
        pytest.param(group(phase="Scheduled"), pods("Running", "Succeeded"), "Running", id="to-running"),
        pytest.param(group(phase="Running"), pods("Running", "Failed"), "Failed", id="to-failed"),
        pytest.param(
            group(3, phase="Running"),
            pods("Running", "Failed"),
            "Scheduling",
            id="failed-below-min-not-failed",
        ),
        pytest.param(
            group(phase="Running"),
            pods("Succeeded", "Succeeded", "Failed"),
            "Finished",
            id="finished-wins-over-failed",
        ),
        pytest.param(
            group(phase="Finished"), pods("Failed", "Failed"), "Finished", id="finished-is-terminal"
        ),
        pytest.param(group(phase="Failed"), pods("Running", "Running"), "Failed", id="failed-is-terminal"),
        pytest.param(
            group(phase="Unknown"), pods("Running", "Running"), "Running", id="unknown-is-recomputed"
        ),
    ],
)
def test_one_controller_pass(pg: PodGroup, members: list[MemberPod], phase: str) -> None:
    assert step(pg, members).phase == phase


def test_prescheduling_fills_occupied_by_from_the_first_member_and_writes_no_counts() -> None:
    members = [MemberPod("b", owners=("job-b",)), MemberPod("a", owners=("job", "set"))]
    status = step(group(phase="Pending"), members)
    assert status.occupied_by == "ns/job,ns/set"
    assert status.scheduled is None
    assert status.running is None


def test_counts_are_written_and_zero_is_absent() -> None:
    status = step(group(3, phase="Scheduling"), pods("Running", "Succeeded", "Pending", bound=3))
    assert (status.scheduled, status.running, status.succeeded, status.failed) == (3, 1, 1, None)


def test_schedule_start_time_is_set_once_to_the_second() -> None:
    first = step(group(phase="PreScheduling"), pods("Pending", "Pending"))
    assert first.schedule_start_time == NOW.replace(microsecond=0)
    again = step(group(phase="Scheduling", scheduleStartTime=START.isoformat()), pods("Pending", "Pending"))
    assert again.schedule_start_time == START


def test_compute_status_settles_where_koordinator_does() -> None:
    status = pp.compute_status(group(phase=None), pods("Running", "Running", owners=("job",)), NOW)
    assert status.phase == "Running"
    assert (status.scheduled, status.running) == (2, 2)
    assert status.occupied_by == "ns/job"
    assert status.schedule_start_time is None  # never passed through Scheduling


def test_compute_status_walks_pending_to_scheduling() -> None:
    status = pp.compute_status(group(phase=None), pods("Pending", "Pending"), NOW)
    assert status.phase == "Scheduling"
    assert status.schedule_start_time == NOW.replace(microsecond=0)


@pytest.mark.parametrize("phase", ["Finished", "Failed"])
def test_plan_leaves_terminal_groups_untouched(phase: str) -> None:
    pg = group(
        phase=phase,
        timeout=1,
        created=NOW - timedelta(hours=1),
        annotations={ANNOTATION_GANG_TIMEOUT: "true"},
    )
    assert not pp.plan(pg, pods("Running"), NOW)


def test_plan_is_empty_when_the_status_is_current() -> None:
    pg = group(phase="Running", scheduled=2, running=2)
    assert not pp.plan(pg, pods("Running", "Running"), NOW)


def test_plan_writes_the_new_status() -> None:
    update = pp.plan(group(phase="Scheduled", scheduled=2), pods("Running", "Running"), NOW)
    assert update.status is not None
    assert update.status.phase == "Running"
    assert update.annotations == {}
    assert update.event is None


@pytest.mark.parametrize(
    ("pg", "members", "timed_out"),
    [
        pytest.param(
            group(timeout=2, created=NOW - timedelta(seconds=10)),
            pods("Pending"),
            True,
            id="pending-past-own-timeout",
        ),
        pytest.param(
            group(timeout=2, created=NOW - timedelta(seconds=1)),
            pods("Pending"),
            False,
            id="pending-within-timeout",
        ),
        pytest.param(
            group(created=NOW - timedelta(seconds=599)), pods("Pending"), False, id="default-600s-not-yet"
        ),
        pytest.param(
            group(timeout=0, created=NOW - timedelta(seconds=601)),
            pods("Pending"),
            True,
            id="zero-means-default-600s",
        ),
        pytest.param(
            group(
                phase="Scheduling",
                timeout=60,
                created=NOW - timedelta(hours=2),
                scheduleStartTime=(NOW - timedelta(seconds=30)).isoformat(),
            ),
            pods("Pending", "Pending"),
            False,
            id="clock-starts-at-schedule-start-time",
        ),
        pytest.param(
            group(
                phase="Scheduling", timeout=60, scheduleStartTime=(NOW - timedelta(seconds=61)).isoformat()
            ),
            pods("Pending", "Pending"),
            True,
            id="scheduling-past-timeout",
        ),
        pytest.param(
            group(timeout=2, created=NOW - timedelta(seconds=10)),
            pods("Running", "Running"),
            False,
            id="scheduled-gang-is-not-timed-out",
        ),
    ],
)
def test_schedule_timeout(pg: PodGroup, members: list[MemberPod], timed_out: bool) -> None:
    update = pp.plan(pg, members, NOW)
    if timed_out:
        assert update.annotations == {ANNOTATION_GANG_TIMEOUT: "true"}
        assert update.event is not None
        assert "ns/gang timed out" in update.event
    else:
        assert update.annotations == {}
        assert update.event is None


def test_timeout_event_is_posted_once_and_the_phase_kept() -> None:
    pg = group(timeout=2, created=NOW - timedelta(seconds=10))
    first = pp.plan(pg, pods("Pending"), NOW)
    assert first.status is not None
    assert first.status.phase == "Pending"
    assert first.event == (
        "gang ns/gang timed out in phase Pending: 0/2 members scheduled within the schedule timeout of 2s "
        "(counted from creation)"
    )
    marked = group(
        timeout=2,
        created=NOW - timedelta(seconds=10),
        annotations={ANNOTATION_GANG_TIMEOUT: "true"},
        phase="Pending",
    )
    again = pp.plan(marked, pods("Pending"), NOW)
    assert not again


def test_timeout_mark_is_removed_once_the_gang_is_scheduled() -> None:
    pg = group(
        phase="Scheduling",
        timeout=2,
        created=NOW - timedelta(seconds=10),
        annotations={ANNOTATION_GANG_TIMEOUT: "true"},
    )
    update = pp.plan(pg, pods("Running", "Running"), NOW)
    assert update.annotations == {ANNOTATION_GANG_TIMEOUT: None}
    assert update.status is not None
    assert update.status.phase == "Running"
