"""Arbitration (Koordinator v1.4, ``controllers/migration/arbitrator``): which waiting jobs start.

Every tick the waiting jobs are sorted, then walked in order: a job whose pod fails a
non-retryable filter fails (``ForbiddenMigratePod``), one that fails a retryable filter waits for
a later tick, and one that passes is admitted and counts against the jobs after it.

Koordinator's bugs are not copied: a deleted job leaves the waiting set (it is rebuilt from the
cache every tick), admission is recorded on the job itself (the ``passed-arbitration``
annotation, so it survives a restart and the reconciler can check it), and finished jobs do not
count as migrating.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from apis.core import Pod
from apis.scheduling.podmigrationjob import PodMigrationJob
from operators.descheduler.config import MigrationControllerArgs
from operators.descheduler.logic import filters
from operators.descheduler.logic.pod_order import pod_order_key
from operators.descheduler.logic.view import (
    ANNOTATION_PASSED_ARBITRATION,
    ClusterView,
    controller_of,
    job_phase,
)

__all__ = ["Verdict", "arbitrate", "is_active_for_arbitration", "passed", "pod_of_job", "sort_jobs"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def passed(job: PodMigrationJob) -> bool:
    return (job.metadata.annotations or {}).get(ANNOTATION_PASSED_ARBITRATION) == "true"


def is_active_for_arbitration(job: PodMigrationJob) -> bool:
    """Running jobs, and Pending ones already admitted."""
    phase = job_phase(job)
    return phase == "Running" or (phase in ("", "Pending") and passed(job))


def _job_owner(pod: Pod | None) -> str | None:
    """The uid of the batch Job that controls the pod, if any."""
    ref = controller_of(pod) if pod is not None else None
    return ref.uid if ref is not None and ref.kind == "Job" else None


def sort_jobs(
    jobs: Sequence[PodMigrationJob],
    pod_of: Callable[[PodMigrationJob], Pod | None],
    all_jobs: Sequence[PodMigrationJob],
) -> list[PodMigrationJob]:
    """Koordinator's chain of stable sorts, the last one the primary key.

    ``pod_of`` gives a job's pod (None when gone); ``all_jobs`` are every job, to count how many
    of a batch Job's pods are migrating."""
    pods = {job.metadata.name or "": pod_of(job) for job in jobs}

    def name(job: PodMigrationJob) -> str:
        return job.metadata.name or ""

    # 1. creation time, newest first (then name, for a deterministic order).
    ordered = sorted(jobs, key=name)
    ordered.sort(key=lambda j: -(j.metadata.creation_timestamp or _EPOCH).timestamp())
    # 2. the pod order; jobs whose pod is gone first.
    ordered.sort(key=lambda j: (0, ()) if pods.get(name(j)) is None else (1, pod_order_key(pods[name(j)])))  # type: ignore[arg-type]
    # 3. jobs of one batch Job together, at the slot of its first job.
    grouped: list[PodMigrationJob] = []
    seen: set[str] = set()
    for job in ordered:
        owner = _job_owner(pods.get(name(job)))
        if owner is None:
            grouped.append(job)
        elif owner not in seen:
            seen.add(owner)
            grouped += [j for j in ordered if _job_owner(pods.get(name(j))) == owner]
    # 4. the batch Jobs with most pods migrating first (only active jobs count).
    migrating: dict[str, int] = {}
    for job in all_jobs:
        if not is_active_for_arbitration(job):
            continue
        owner = _job_owner(pod_of(job))
        if owner is not None:
            migrating[owner] = migrating.get(owner, 0) + 1
    grouped.sort(key=lambda j: -migrating.get(_job_owner(pods.get(name(j))) or "", 0))
    return grouped


def pod_of_job(job: PodMigrationJob, view: ClusterView) -> Pod | None:
    """The job's pod, if it still exists (and is the same pod when the job names a uid)."""
    ref = job.spec.pod_ref if job.spec else None
    if ref is None or not ref.namespace or not ref.name:
        return None
    pod = view.pod(ref.namespace, ref.name)
    if pod is not None and ref.uid and pod.metadata.uid != ref.uid:
        return None
    return pod


@dataclass
class Verdict:
    admitted: list[PodMigrationJob] = field(default_factory=list)
    failed: list[tuple[PodMigrationJob, str]] = field(default_factory=list)
    waiting: list[tuple[PodMigrationJob, str]] = field(default_factory=list)


def arbitrate(
    waiting: Sequence[PodMigrationJob], args: MigrationControllerArgs, view: ClusterView
) -> Verdict:
    """One tick over the jobs waiting for admission (Pending, not yet passed)."""
    all_jobs = list(view.jobs())
    active = [job for job in all_jobs if is_active_for_arbitration(job)]
    verdict = Verdict()
    for job in sort_jobs(waiting, lambda j: pod_of_job(j, view), all_jobs):
        pod = pod_of_job(job, view)
        if pod is None:
            # The reconciler reports the missing pod (Failed MissingPod).
            verdict.admitted.append(job)
            continue
        reason = filters.non_retryable(pod, args, view)
        if reason is not None:
            verdict.failed.append((job, reason))
            continue
        reason = filters.retryable(pod, args, view, active)
        if reason is not None:
            verdict.waiting.append((job, reason))
            continue
        verdict.admitted.append(job)
        active.append(job)
    return verdict
