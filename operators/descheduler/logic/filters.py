"""The MigrationController's filters (Koordinator's ``arbitrator/filter.go`` and
``evictions.EvictorFilter``): each returns None when the pod may move, else the reason.

*Non-retryable* refusals fail a job for good (``ForbiddenMigratePod``); *retryable* ones (the
global, node, namespace and workload caps) keep it waiting for a later arbitration tick. The pod
annotation ``descheduler.alpha.kubernetes.io/evict`` bypasses both.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.preemption import EVICTION_COST_NEVER, get_eviction_cost
from apis.meta import selects
from apis.scheduling.podmigrationjob import PodMigrationJob
from operators.descheduler.config import MigrationControllerArgs
from operators.descheduler.logic.limits import max_allowed
from operators.descheduler.logic.view import (
    ANNOTATION_EVICT,
    ClusterView,
    Workload,
    controller_of,
    is_active,
    is_ready,
    job_targets,
)

__all__ = [
    "SYSTEM_CRITICAL_PRIORITY",
    "evictor_filter",
    "expected_replicas",
    "namespace_allowed",
    "non_retryable",
    "retryable",
    "workload_limits",
]

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
_MIRROR = "kubernetes.io/config.mirror"
_SOURCE = "kubernetes.io/config.source"


def bypassed(pod: Pod) -> bool:
    return (pod.metadata.annotations or {}).get(ANNOTATION_EVICT) is not None


def evictor_filter(pod: Pod, args: MigrationControllerArgs) -> str | None:
    owners = pod.metadata.owner_references or []
    annotations = pod.metadata.annotations or {}
    if any(ref.kind == "DaemonSet" for ref in owners):
        return "pod is owned by a DaemonSet"
    if _MIRROR in annotations:
        return "pod is a mirror pod"
    if annotations.get(_SOURCE, "api") != "api":
        return "pod is a static pod"
    if pod.metadata.deletion_timestamp is not None:
        return "pod is terminating"
    if not owners and not (
        args.evict_all_bare_pods or (args.evict_failed_bare_pods and pod.status.phase == "Failed")
    ):
        return "pod has no owner (a bare pod; see evictAllBarePods)"
    priority = pod.spec.priority or 0
    if not args.evict_system_critical_pods:
        if priority >= SYSTEM_CRITICAL_PRIORITY:
            return "pod has system-critical priority"
        threshold = args.priority_threshold.value if args.priority_threshold else None
        if threshold is not None and priority >= threshold:
            return f"pod priority {priority} is not below the priorityThreshold {threshold}"
    volumes = pod.spec.volumes or []
    if not args.evict_local_storage_pods and any(
        v.host_path is not None or v.empty_dir is not None for v in volumes
    ):
        return "pod has local storage (hostPath or emptyDir)"
    if args.ignore_pvc_pods and any(v.persistent_volume_claim is not None for v in volumes):
        return "pod has a PersistentVolumeClaim"
    if args.label_selector is not None and not selects(args.label_selector, pod.metadata.labels or {}):
        return "pod does not match the labelSelector"
    return None


def namespace_allowed(namespace: str | None, args: MigrationControllerArgs) -> bool:
    if args.namespaces is None:
        return True
    if args.namespaces.include:
        return namespace in args.namespaces.include
    return namespace not in args.namespaces.exclude


def workload_limits(workload: Workload, args: MigrationControllerArgs) -> tuple[int, int]:
    """(maxMigrating, maxUnavailable) for the workload."""
    return (
        max_allowed(args.max_migrating_per_workload, workload.replicas),
        max_allowed(args.max_unavailable_per_workload, workload.replicas),
    )


def expected_replicas(workload: Workload | None, args: MigrationControllerArgs) -> str | None:
    if workload is None or not workload.cached or args.skip_check_expected_replicas:
        return None  # not cached yet: the job waits (``retryable``) and is judged once it is
    max_migrating, max_unavailable = workload_limits(workload, args)
    if workload.replicas in (1, max_migrating, max_unavailable):
        return (
            f"{workload.kind} {workload.name} has {workload.replicas} replicas, as many as may be "
            f"migrating ({max_migrating}) or unavailable ({max_unavailable})"
        )
    return None


def non_retryable(pod: Pod, args: MigrationControllerArgs, view: ClusterView) -> str | None:
    if bypassed(pod):
        return None
    cost = 0
    with suppress(InvalidAnnotation):
        cost = get_eviction_cost(pod.metadata.annotations)
    if cost == EVICTION_COST_NEVER:
        return "pod's eviction-cost forbids eviction"
    reason = evictor_filter(pod, args)
    if reason is None:
        reason = expected_replicas(view.workload_of(pod), args)
    if reason is None and not namespace_allowed(pod.metadata.namespace, args):
        reason = f"namespace {pod.metadata.namespace} is not allowed by the namespaces argument"
    return reason


def _others(pod: Pod, active: Sequence[PodMigrationJob]) -> list[PodMigrationJob]:
    return [job for job in active if not job_targets(job, pod)]


def retryable(
    pod: Pod, args: MigrationControllerArgs, view: ClusterView, active: Sequence[PodMigrationJob]
) -> str | None:
    """The caps, counting ``active`` jobs (those of other pods)."""
    if bypassed(pod):
        return None
    others = _others(pod, active)
    if args.max_migrating_globally and len(others) >= args.max_migrating_globally:
        return f"{len(others)} migrations are running, maxMigratingGlobally is {args.max_migrating_globally}"
    node = pod.spec.node_name
    if args.max_migrating_per_node and args.max_migrating_per_node > 0 and node:
        on_node = sum(1 for job in others if _job_node(job, view) == node)
        if on_node >= args.max_migrating_per_node:
            cap = args.max_migrating_per_node
            return f"{on_node} pods on node {node} are migrating, maxMigratingPerNode is {cap}"
    if args.max_migrating_per_namespace and args.max_migrating_per_namespace > 0:
        in_namespace = sum(
            1 for job in others if job.spec and job.spec.pod_ref.namespace == pod.metadata.namespace
        )
        if in_namespace >= args.max_migrating_per_namespace:
            return (
                f"{in_namespace} pods in namespace {pod.metadata.namespace} are migrating, "
                f"maxMigratingPerNamespace is {args.max_migrating_per_namespace}"
            )
    return _workload_caps(pod, args, view, others)


def _job_node(job: PodMigrationJob, view: ClusterView) -> str | None:
    origin = view.origin(job)
    return origin.node if origin is not None else None


def _workload_caps(
    pod: Pod, args: MigrationControllerArgs, view: ClusterView, others: Sequence[PodMigrationJob]
) -> str | None:
    if controller_of(pod) is None:
        return None
    workload = view.workload_of(pod)
    if workload is None:
        return None
    if not workload.cached:
        return f"the pod's controller {workload.kind} {workload.name} is not in the caches yet"
    max_migrating, max_unavailable = workload_limits(workload, args)
    # Every pod of the workload counts, those of a Deployment's other ReplicaSets included.
    migrating = {p.metadata.uid for p in workload.pods if any(job_targets(job, p) for job in others)}
    # Jobs whose pod is already evicted still migrate until their replacement is there.
    evicted = [
        job
        for job in others
        if not any(job_targets(job, p) for p in workload.pods)
        and (origin := view.origin(job)) is not None
        and origin.workload_uid == workload.uid
    ]
    count = len(migrating) + len(evicted)
    if count and count >= max_migrating:
        name = f"{workload.kind} {workload.name}"
        return f"{count} pods of {name} are migrating, maxMigrating is {max_migrating}"
    unavailable = {p.metadata.uid for p in workload.pods if not (is_active(p) and is_ready(p))}
    gone = len(unavailable | migrating) + max(0, workload.replicas - len(workload.pods))
    if gone >= max_unavailable:
        name = f"{workload.kind} {workload.name}"
        return f"{gone} pods of {name} are unavailable, maxUnavailable is {max_unavailable}"
    return None
