"""One reconcile of a PodMigrationJob (Koordinator's ``migration/controller.go``), as a pure step:
what is observed goes in, the status to write and the actions to take come out; the handler
(``operators.descheduler.reconciler``) applies them and calls again after ``requeue`` seconds.

Phases, condition types, reasons and the ``status.status`` sub-state are Koordinator's. Its bugs
are not copied: a job not admitted by arbitration waits; a paused job still times out; the object
limiter only holds a job back before its eviction starts; a bound pod that is gone is not
counted as Ready (the job waits for a Ready replacement, or times out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from apis.core import Pod
from apis.duration import parse_go_duration
from apis.scheduling.podmigrationjob import (
    PodMigrationJob,
    PodMigrationJobCondition,
    PodMigrationJobStatus,
)
from apis.scheduling.reservation import Reservation
from operators.descheduler.logic.arbitration import passed
from operators.descheduler.logic.view import ANNOTATION_EVICT, controller_of, is_ready

__all__ = [
    "Observed",
    "Step",
    "reservation_for",
    "step",
]

PENDING, RUNNING, SUCCEEDED, FAILED, ABORTED = "Pending", "Running", "Succeeded", "Failed", "Aborted"
RESERVATION_FIRST, EVICT_DIRECTLY = "ReservationFirst", "EvictDirectly"
COMPLETE = "Complete"
# condition types
RESERVATION_CREATED = "ReservationCreated"
RESERVATION_SCHEDULED = "ReservationScheduled"
EVICTION = "Eviction"
POD_SCHEDULED = "PodScheduled"
POD_BOUND_RESERVATION = "PodBoundReservation"
BOUND_POD_READY = "BoundPodReady"
RESERVATION_BOUND = "ReservationBound"
# reasons
TIMEOUT = "Timeout"
FAILED_CREATE_RESERVATION = "FailedCreateReservation"
RESERVATION_EXPIRED = "ReservationExpired"
UNSCHEDULABLE = "Unschedulable"
FORBIDDEN_MIGRATE_POD = "ForbiddenMigratePod"
MISSING_POD = "MissingPod"
MISSING_RESERVATION = "MissingReservation"
INVALID_POD_REF = "InvalidPodRef"
EVICTING = "Evicting"
FAILED_EVICT = "FailedEvict"
EVICT_COMPLETE = "EvictComplete"
WAIT_FOR_POD_BIND_RESERVATION = "WaitForPodBindReservation"
WAIT_FOR_BOUND_POD_READY = "WaitForBoundPodReady"

REQUEUE = 3.0
"""Seconds between looks while waiting on something else (Koordinator's 3 s)."""
CREATED_BY = "koord-descheduler"


@dataclass(frozen=True)
class Observed:
    job: PodMigrationJob
    pod: Pod | None
    """The pod named by spec.podRef (namespace/name), whatever its uid."""
    reservation: Reservation | None
    """The job's reservation (spec.reservationOptions.reservationRef), None when gone or unset."""
    bound_pod: Pod | None
    """The reservation's first current owner, None when it has none or it is gone."""
    now: datetime
    default_mode: str = RESERVATION_FIRST
    pod_spec: dict[str, Any] | None = None
    """The pod's spec as the API server returned it (every field, for the reservation's template);
    None: rebuilt from ``pod``."""
    limiter_allows: bool = True
    """The object limiter's buckets for the pod's workload and namespace have a token."""


@dataclass
class Step:
    status: PodMigrationJobStatus
    spec_patch: dict[str, Any] = field(default_factory=dict)
    create_reservation: dict[str, Any] | None = None
    delete_reservation: bool = False
    evict: bool = False
    requeue: float | None = None
    """Seconds until the next look; None: nothing to wait for (terminal, paused, not admitted)."""


def _terminal(status: PodMigrationJobStatus, phase: str, reason: str, message: str) -> None:
    status.phase, status.reason, status.message = phase, reason, message


def set_condition(
    status: PodMigrationJobStatus, type_: str, value: bool, reason: str, message: str, now: datetime
) -> None:
    conditions = list(status.conditions or [])
    text = "True" if value else "False"
    for index, condition in enumerate(conditions):
        if condition.type == type_:
            changed = condition.status != text
            conditions[index] = condition.model_copy(
                update={
                    "status": text,
                    "reason": reason or None,
                    "message": message or None,
                    "last_probe_time": now,
                    "last_transition_time": now if changed else condition.last_transition_time,
                }
            )
            break
    else:
        conditions.append(
            PodMigrationJobCondition(
                type=type_,
                status=text,
                reason=reason or None,
                message=message or None,
                last_probe_time=now,
                last_transition_time=now,
            )
        )
    status.conditions = conditions
    status.status = type_


def condition(status: PodMigrationJobStatus, type_: str) -> PodMigrationJobCondition | None:
    return next((c for c in status.conditions or () if c.type == type_), None)


def ttl_seconds(job: PodMigrationJob) -> float:
    ttl = job.spec.ttl if job.spec else None
    return parse_go_duration(ttl).total_seconds() if ttl else 0.0


def step(o: Observed) -> Step:
    job = o.job
    status = (job.status or PodMigrationJobStatus()).model_copy(deep=True)
    out = Step(status=status)
    phase = status.phase or ""
    if phase not in ("", PENDING, RUNNING) or job.spec is None:
        return out
    ttl = ttl_seconds(job)
    created = job.metadata.creation_timestamp
    if ttl > 0 and created is not None and (o.now - created).total_seconds() >= ttl:
        out.delete_reservation = True
        _terminal(status, FAILED, TIMEOUT, f"the job did not finish within its ttl {job.spec.ttl}")
        return out
    if job.spec.paused:
        out.requeue = max(1.0, ttl - (o.now - created).total_seconds()) if ttl and created else None
        return out
    if phase in ("", PENDING):
        if not passed(job):
            return out  # arbitration admits it, and that update brings it back here
        ref = job.spec.pod_ref
        if not ref.namespace or not ref.name:
            _terminal(status, FAILED, INVALID_POD_REF, "spec.podRef needs a namespace and a name")
            return out
        if o.pod is None or (ref.uid and o.pod.metadata.uid != ref.uid):
            _terminal(status, FAILED, MISSING_POD, f"pod {ref.namespace}/{ref.name} not found")
            return out
        if not ref.uid:
            out.spec_patch = {"podRef": {"uid": o.pod.metadata.uid}}
        status.phase = RUNNING
        out.requeue = 0.0
        return out
    started = condition(status, EVICTION) is not None
    bypass = o.pod is not None and ANNOTATION_EVICT in (o.pod.metadata.annotations or {})
    if not started and not bypass and o.pod is not None and not o.limiter_allows:
        out.requeue = REQUEUE
        return out
    mode = job.spec.mode or o.default_mode
    if mode == EVICT_DIRECTLY:
        if _evict(o, out):
            _terminal(status, SUCCEEDED, "", "")
            status.status = COMPLETE
        return out
    _reservation_first(o, out)
    return out


def _evict(o: Observed, out: Step) -> bool:
    """Drive the eviction; True once the pod is gone."""
    status = out.status
    evicted = condition(status, EVICTION)
    if evicted is not None and evicted.status == "True":
        return True
    uid = o.job.spec.pod_ref.uid if o.job.spec else None
    gone = o.pod is None or (evicted is not None and uid is not None and o.pod.metadata.uid != uid)
    if gone:
        if status.status != EVICTION and evicted is None:
            _terminal(status, FAILED, MISSING_POD, "the pod disappeared before it was evicted")
            return False
        set_condition(status, EVICTION, True, EVICT_COMPLETE, "", o.now)
        return True
    if evicted is not None and evicted.reason == EVICTING:
        out.requeue = REQUEUE
        return False
    if o.reservation is not None and o.reservation.status and o.reservation.status.phase == SUCCEEDED:
        _terminal(status, FAILED, FORBIDDEN_MIGRATE_POD, "the reservation was consumed by another pod")
        return False
    out.evict = True
    set_condition(status, EVICTION, False, EVICTING, "", o.now)
    out.requeue = REQUEUE
    return False


def _reservation_scheduled(reservation: Reservation) -> str | None:
    status = reservation.status
    if status is None or not status.node_name:
        return None
    scheduled = next((c for c in status.conditions or () if c.type == "Scheduled"), None)
    if scheduled is not None and scheduled.status != "True":
        return None
    return status.node_name


def _reservation_first(o: Observed, out: Step) -> None:
    status, job = out.status, o.job
    assert job.spec is not None
    options = job.spec.reservation_options
    ref = options.reservation_ref if options else None
    if ref is None or not ref.name:
        if o.pod is None:
            _terminal(status, FAILED, MISSING_POD, "pod not found")
            return
        body = reservation_for(o.pod, job, o.now, o.pod_spec)
        out.create_reservation = body
        out.spec_patch = {"reservationOptions": {"reservationRef": {"name": body["metadata"]["name"]}}}
        set_condition(status, RESERVATION_CREATED, True, "", "", o.now)
        out.requeue = 0.0
        return
    if condition(status, RESERVATION_CREATED) is None:
        set_condition(status, RESERVATION_CREATED, True, "", "", o.now)
    reservation = o.reservation
    if reservation is None:
        _terminal(status, FAILED, MISSING_RESERVATION, f"reservation {ref.name} not found")
        return
    rstatus = reservation.status
    for c in (rstatus.conditions if rstatus else None) or ():
        if c.reason == UNSCHEDULABLE and c.status == "False":
            set_condition(status, RESERVATION_SCHEDULED, False, UNSCHEDULABLE, c.message or "", o.now)
    rphase = (rstatus.phase if rstatus else None) or ""
    if rphase in ("", PENDING):
        out.requeue = REQUEUE
        return
    if rphase == FAILED:
        ready = next((c for c in (rstatus.conditions if rstatus else None) or () if c.type == "Ready"), None)
        if ready is not None and ready.reason == "Expired":
            _terminal(status, FAILED, RESERVATION_EXPIRED, f"reservation {ref.name} expired")
            return
    node = _reservation_scheduled(reservation)
    if node is None:
        _terminal(status, FAILED, UNSCHEDULABLE, f"reservation {ref.name} is not scheduled")
        return
    scheduled = condition(status, RESERVATION_SCHEDULED)
    if scheduled is None or scheduled.status != "True":
        if o.pod is not None and o.pod.spec.node_name == node:
            _terminal(
                status, FAILED, FORBIDDEN_MIGRATE_POD, f"reservation {ref.name} is on the pod's own node"
            )
            return
        status.node_name = node
        set_condition(status, RESERVATION_SCHEDULED, True, "", "", o.now)
    if not _evict(o, out):
        return
    owners = (rstatus.current_owners if rstatus else None) or []
    if not owners:
        set_condition(status, POD_BOUND_RESERVATION, False, WAIT_FOR_POD_BIND_RESERVATION, "", o.now)
        out.requeue = REQUEUE
        return
    owner = owners[0]
    set_condition(status, RESERVATION_BOUND, True, "", "", o.now)
    status.pod_ref = owner
    if o.bound_pod is None or not is_ready(o.bound_pod):
        set_condition(status, BOUND_POD_READY, False, WAIT_FOR_BOUND_POD_READY, "", o.now)
        out.requeue = REQUEUE
        return
    set_condition(status, BOUND_POD_READY, True, "", "", o.now)
    set_condition(status, POD_BOUND_RESERVATION, True, "", "", o.now)
    _terminal(status, SUCCEEDED, "", "")
    status.status = COMPLETE


_POD_FIELDS_DROPPED = ("nodeName",)


def reservation_for(
    pod: Pod, job: PodMigrationJob, now: datetime, raw_spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The Reservation for the pod's replacement (Koordinator's
    ``CreateOrUpdateReservationOptions``): the pod's labels and spec as the template, owned by the
    pod's controller, allocated once, kept off the pod's current node, named after the job."""
    spec = (
        raw_spec
        if raw_spec is not None
        else pod.model_dump(by_alias=True, exclude_none=True, mode="json")["spec"]
    )
    return reservation_from_template(
        pod,
        {k: v for k, v in spec.items() if k not in _POD_FIELDS_DROPPED},
        job,
        now,
    )


def reservation_from_template(
    pod: Pod, pod_spec: dict[str, Any], job: PodMigrationJob, now: datetime
) -> dict[str, Any]:
    controller = controller_of(pod)
    if controller is not None:
        owner: dict[str, Any] = {
            "controller": {
                "apiVersion": controller.api_version,
                "kind": controller.kind,
                "name": controller.name,
                "uid": controller.uid,
                "controller": True,
                "namespace": pod.metadata.namespace,
            }
        }
    else:
        owner = {
            "object": {
                "namespace": pod.metadata.namespace,
                "name": pod.metadata.name,
                "uid": pod.metadata.uid,
            }
        }
    node = pod.spec.node_name
    if node:
        pod_spec = _avoid_node(pod_spec, node)
    ttl = job.spec.ttl if job.spec and job.spec.ttl else "5m"
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {
            "name": job.metadata.uid or job.metadata.name,
            "labels": {
                "app.kubernetes.io/created-by": CREATED_BY,
                "scheduling.koordinator.sh/reservation-order": str(int(now.timestamp() * 1000)),
            },
        },
        "spec": {
            "template": {
                "metadata": {"labels": dict(pod.metadata.labels or {})},
                "spec": pod_spec,
            },
            "owners": [owner],
            "allocateOnce": True,
            "ttl": ttl,
        },
    }


def _avoid_node(pod_spec: dict[str, Any], node: str) -> dict[str, Any]:
    """``metadata.name NotIn [node]`` in every required node-affinity term (one term if none)."""
    not_here = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    affinity = dict(pod_spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [dict(t) for t in required.get("nodeSelectorTerms") or []] or [{}]
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or []), not_here]
    required["nodeSelectorTerms"] = terms
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    return {**pod_spec, "affinity": affinity}
