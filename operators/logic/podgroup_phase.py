"""PodGroup status from its member pods, and the schedule-timeout rule: pure functions, no Kopf, no I/O.

``operators.handlers.podgroup`` feeds :func:`plan` the PodGroup and the summaries of the pods
labelled ``pod-group.scheduling.sigs.k8s.io=<name>`` in its namespace, and writes back what it
returns.

One pass of Koordinator's PodGroup controller (api-reference 1.1, :func:`sync_step`):

1. An empty phase becomes ``Pending``.
2. ``Pending`` becomes ``PreScheduling`` once there are at least ``minMember`` member pods and
   ``minMember`` > 0; ``occupiedBy`` is filled from the first member's owner references at the
   same step. Nothing else is written in that pass.
3. Any other phase: with no member pods the phase returns to ``Pending`` (the counts are left
   as they were). Otherwise the running / succeeded / failed / scheduled (bound) counts are
   written, and the phase is ``Scheduling`` while scheduled < minMember (the first time also
   setting ``scheduleStartTime``), else ``Scheduled``, upgraded to ``Running`` when
   running + succeeded >= minMember.
4. ``Failed`` when failed > 0 and failed + running + succeeded >= minMember; ``Finished`` when
   succeeded >= minMember, checked last so it wins.
5. ``Finished`` and ``Failed`` are terminal: the group is not touched again.

Koordinator runs one pass per reconcile and re-queues on its own write, so a group walks
``Pending -> PreScheduling -> ...`` over several writes. :func:`compute_status` runs passes until
nothing changes and the handler writes the result once; the end state is the same. Where
Koordinator depends on lister order (the "first" member of step 2) we take the first by name.

Schedule timeout (Koordinator has no phase for it): a group that is still waiting (``Pending``,
``PreScheduling`` or ``Scheduling`` with scheduled < minMember) longer than
``spec.scheduleTimeoutSeconds`` (when > 0, else ``CoschedulingArgs.defaultTimeout``, 600s) is
timed out. The clock starts at ``status.scheduleStartTime`` when set, else at the PodGroup's
``metadata.creationTimestamp``: a gang that never gathered ``minMember`` pods never reaches
``Scheduling`` and has been waiting since it was created. The phase is kept; the group gets the
annotation ``gang.scheduling.koordinator.sh/timeout: "true"`` (defined in Koordinator's API as
"the scheduler marks a timed-out gang", never written upstream) and one Warning event when the
mark is set. The mark is removed once the group is no longer timed out (it got its members
scheduled, or its timeout was raised), so the annotation always tells the current state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from apis.core import Pod
from apis.extension.gang import ANNOTATION_GANG_TIMEOUT
from apis.scheduling.podgroup import PodGroup, PodGroupStatus

__all__ = [
    "DEFAULT_SCHEDULE_TIMEOUT_SECONDS",
    "FAILED",
    "FINISHED",
    "PENDING",
    "PRE_SCHEDULING",
    "RUNNING",
    "SCHEDULED",
    "SCHEDULING",
    "TIMEOUT_EVENT_REASON",
    "MemberPod",
    "PodGroupUpdate",
    "compute_status",
    "plan",
    "schedule_deadline",
    "sync_step",
    "timeout_seconds",
]

PENDING = "Pending"
PRE_SCHEDULING = "PreScheduling"
SCHEDULING = "Scheduling"
SCHEDULED = "Scheduled"
RUNNING = "Running"
FINISHED = "Finished"
FAILED = "Failed"
TERMINAL = frozenset({FINISHED, FAILED})
WAITING = frozenset({PENDING, PRE_SCHEDULING, SCHEDULING})

DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 600
"""``CoschedulingArgs.defaultTimeout``: used when ``spec.scheduleTimeoutSeconds`` is not > 0."""
TIMEOUT_EVENT_REASON = "GangScheduleTimeout"
"""Reason of the Warning event posted on the PodGroup when its schedule timeout passes."""


@dataclass(frozen=True)
class MemberPod:
    """What the controller needs of one member pod."""

    name: str
    bound: bool = False
    """``spec.nodeName`` is set: the scheduler bound it (or it was created on a node)."""
    phase: str | None = None
    """``status.phase``: Pending, Running, Succeeded, Failed or Unknown."""
    owners: tuple[str, ...] = ()
    """Names of the pod's owner references."""

    @classmethod
    def from_pod(cls, pod: Pod) -> MemberPod:
        return cls(
            name=pod.metadata.name or "",
            bound=bool(pod.spec.node_name),
            phase=pod.status.phase,
            owners=tuple(ref.name for ref in pod.metadata.owner_references or ()),
        )


def _min_member(group: PodGroup) -> int:
    return (group.spec.min_member if group.spec else None) or 0


def _count(n: int) -> int | None:
    """Counts are ``omitempty`` upstream: zero is written as absent."""
    return n or None


def sync_step(group: PodGroup, members: Sequence[MemberPod], now: datetime) -> PodGroupStatus:
    """One pass of Koordinator's PodGroup controller (steps 1-5 of the module docstring)."""
    status = (group.status or PodGroupStatus()).model_copy()
    min_member = _min_member(group)
    phase = status.phase or ""
    if phase in TERMINAL:
        return status
    if phase == "":
        status.phase = PENDING
    elif phase == PENDING:
        if len(members) >= min_member and min_member > 0:
            status.phase = PRE_SCHEDULING
            first = min(members, key=lambda m: m.name)
            if first.owners:
                namespace = group.metadata.namespace or ""
                status.occupied_by = ",".join(sorted(f"{namespace}/{owner}" for owner in first.owners))
    elif not members:
        status.phase = PENDING
    else:
        running = sum(m.phase == "Running" for m in members)
        succeeded = sum(m.phase == "Succeeded" for m in members)
        failed = sum(m.phase == "Failed" for m in members)
        scheduled = sum(m.bound for m in members)
        status.running, status.succeeded = _count(running), _count(succeeded)
        status.failed, status.scheduled = _count(failed), _count(scheduled)
        if scheduled < min_member:
            status.phase = SCHEDULING
            if status.schedule_start_time is None:
                status.schedule_start_time = now.replace(microsecond=0)  # metav1.Time has seconds
        else:
            status.phase = SCHEDULED
        if running + succeeded >= min_member and status.phase == SCHEDULED:
            status.phase = RUNNING
        if failed and failed + running + succeeded >= min_member:
            status.phase = FAILED
        if succeeded >= min_member:
            status.phase = FINISHED
    return status


def compute_status(group: PodGroup, members: Sequence[MemberPod], now: datetime) -> PodGroupStatus:
    """The status Koordinator's controller settles on: :func:`sync_step` until it changes nothing."""
    status = group.status or PodGroupStatus()
    for _ in range(8):  # at most four passes change anything ("" -> Pending -> PreScheduling -> ...)
        following = sync_step(group.model_copy(update={"status": status}), members, now)
        if following == status:
            break
        status = following
    return status


def timeout_seconds(group: PodGroup, default_timeout: int = DEFAULT_SCHEDULE_TIMEOUT_SECONDS) -> int:
    """``spec.scheduleTimeoutSeconds`` when > 0, else the default (``CoschedulingArgs.defaultTimeout``)."""
    configured = group.spec.schedule_timeout_seconds if group.spec else None
    return configured if configured is not None and configured > 0 else default_timeout


def schedule_deadline(
    group: PodGroup, status: PodGroupStatus, default_timeout: int = DEFAULT_SCHEDULE_TIMEOUT_SECONDS
) -> datetime | None:
    """When a still-waiting group times out; None when it is not waiting for members to schedule."""
    if (status.phase or "") not in WAITING or (status.scheduled or 0) >= _min_member(group):
        return None
    start = status.schedule_start_time or group.metadata.creation_timestamp
    if start is None:
        return None
    return start + timedelta(seconds=timeout_seconds(group, default_timeout))


@dataclass(frozen=True)
class PodGroupUpdate:
    """What to write on a PodGroup; empty when it is already up to date."""

    status: PodGroupStatus | None = None
    """The new status, or None when it is unchanged."""
    annotations: dict[str, str | None] = field(default_factory=dict)
    """Annotation changes in merge-patch form (None removes the key)."""
    event: str | None = None
    """Message of a Warning event (reason :data:`TIMEOUT_EVENT_REASON`) to post, if any."""

    def __bool__(self) -> bool:
        return self.status is not None or bool(self.annotations) or self.event is not None


def plan(
    group: PodGroup,
    members: Sequence[MemberPod],
    now: datetime,
    default_timeout: int = DEFAULT_SCHEDULE_TIMEOUT_SECONDS,
) -> PodGroupUpdate:
    """The status, timeout mark and event a PodGroup needs now; a group in a terminal phase gets none."""
    current = group.status or PodGroupStatus()
    if (current.phase or "") in TERMINAL:
        return PodGroupUpdate()
    status = compute_status(group, members, now)
    deadline = schedule_deadline(group, status, default_timeout)
    timed_out = deadline is not None and now >= deadline
    marked = (group.metadata.annotations or {}).get(ANNOTATION_GANG_TIMEOUT) == "true"
    annotations: dict[str, str | None] = {}
    event = None
    if timed_out and not marked:
        annotations[ANNOTATION_GANG_TIMEOUT] = "true"
        since = "scheduleStartTime" if status.schedule_start_time else "creation"
        event = (
            f"gang {group.metadata.namespace}/{group.metadata.name} timed out in phase {status.phase}: "
            f"{status.scheduled or 0}/{_min_member(group)} members scheduled within the schedule timeout "
            f"of {timeout_seconds(group, default_timeout)}s (counted from {since})"
        )
    elif marked and not timed_out:
        annotations[ANNOTATION_GANG_TIMEOUT] = None
    return PodGroupUpdate(status=status if status != current else None, annotations=annotations, event=event)
