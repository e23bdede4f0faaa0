"""What the MigrationController's decisions read: pods, their workloads, and the jobs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from apis.core import Pod
from apis.meta import OwnerReference
from apis.scheduling.podmigrationjob import PodMigrationJob

__all__ = [
    "ACTIVE_PHASES",
    "ANNOTATION_EVICT",
    "ANNOTATION_EVICT_REASON",
    "ANNOTATION_EVICT_TRIGGER",
    "ANNOTATION_JOB_CREATED_BY",
    "ANNOTATION_PASSED_ARBITRATION",
    "ClusterView",
    "Origin",
    "Workload",
    "controller_of",
    "is_active",
    "is_ready",
    "job_created",
    "job_phase",
    "job_targets",
]

ANNOTATION_EVICT = "descheduler.alpha.kubernetes.io/evict"
"""On a pod (or a job): bypass the MigrationController's filters and the object limiter."""
ANNOTATION_PASSED_ARBITRATION = "descheduler.koordinator.sh/passed-arbitration"
ANNOTATION_EVICT_REASON = "koordinator.sh/evict-reason"
ANNOTATION_EVICT_TRIGGER = "koordinator.sh/evict-trigger"
ANNOTATION_JOB_CREATED_BY = "koordinator.sh/job-created-by"

ACTIVE_PHASES = ("", "Pending", "Running")


@dataclass(frozen=True)
class Origin:
    """Where a job's pod was and which workload it belonged to, remembered while the pod existed:
    an evicted pod's job still counts against its node and workload until the job ends
    (Koordinator forgets it once the pod is gone)."""

    node: str | None
    workload_uid: str | None


@dataclass(frozen=True)
class Workload:
    """A pod's controller as the MigrationController sees it.

    ``uid`` is the limiter and "same workload" key: the Deployment's for a ReplicaSet it controls,
    so that migrations in a sibling ReplicaSet count and a rollout does not reset the bucket.
    ``replicas`` is the desired count (spec), 0 when the owner could not be resolved."""

    uid: str
    kind: str
    namespace: str
    name: str
    replicas: int
    pods: tuple[Pod, ...]
    cached: bool = True
    """False for a kind the caches hold whose object they do not hold (yet): a pod's watch event
    can come before its new ReplicaSet's, so its replicas are unknown rather than 0."""


class ClusterView(Protocol):
    def pod(self, namespace: str, name: str) -> Pod | None: ...

    def workload_of(self, pod: Pod) -> Workload | None:
        """None for a bare pod; a Workload with replicas 0 for an owner that cannot be resolved."""
        ...

    def jobs(self) -> Sequence[PodMigrationJob]: ...

    def origin(self, job: PodMigrationJob) -> Origin | None:
        """The job's pod's node and workload, from the pod or from memory once it is gone."""
        ...


def controller_of(pod: Pod) -> OwnerReference | None:
    for ref in pod.metadata.owner_references or ():
        if ref.controller:
            return ref
    return None


def job_phase(job: PodMigrationJob) -> str:
    return (job.status.phase if job.status else None) or ""


def job_created(job: PodMigrationJob) -> datetime | None:
    return job.metadata.creation_timestamp


def job_targets(job: PodMigrationJob, pod: Pod) -> bool:
    """Is ``job`` about ``pod``: by uid when the job has one, else by namespace and name."""
    if job.spec is None:
        return False
    ref = job.spec.pod_ref
    if ref.uid and pod.metadata.uid:
        return ref.uid == pod.metadata.uid
    return ref.namespace == pod.metadata.namespace and ref.name == pod.metadata.name


def is_active(pod: Pod) -> bool:
    """Not finished and not being deleted."""
    return pod.status.phase not in ("Succeeded", "Failed") and pod.metadata.deletion_timestamp is None


def is_ready(pod: Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
