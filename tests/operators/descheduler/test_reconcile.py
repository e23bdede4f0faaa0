"""The PodMigrationJob state machine (algorithms.md 12.3): phases, conditions and reasons as
Koordinator's, in both modes, with its bugs fixed."""

from __future__ import annotations

from typing import Any

from apis.core import Pod
from apis.scheduling.podmigrationjob import PodMigrationJob
from apis.scheduling.reservation import Reservation
from operators.descheduler.logic.reconcile import Observed, Step, reservation_for, step
from tests.operators.descheduler.helpers import job, later, pod_body


def _pod(name: str = "p", **kwargs: Any) -> Pod:
    return Pod.model_validate(pod_body(name, **kwargs))


def _reservation(
    phase: str = "Available", node: str | None = "n2", owners: list[str] | None = None, **status: Any
) -> Reservation:
    body: dict[str, Any] = {
        "metadata": {"name": "r"},
        "spec": {"template": {}, "owners": [{"object": {"name": "x"}}]},
        "status": {"phase": phase, **status},
    }
    if node:
        body["status"]["nodeName"] = node
        body["status"]["conditions"] = [{"type": "Scheduled", "status": "True"}]
    if owners:
        body["status"]["currentOwners"] = [{"namespace": "default", "name": n} for n in owners]
    return Reservation.model_validate(body)


def _step(j: PodMigrationJob, pod: Pod | None = None, **kwargs: Any) -> Step:
    return step(
        Observed(
            job=j,
            pod=pod,
            reservation=kwargs.pop("reservation", None),
            bound_pod=kwargs.pop("bound_pod", None),
            now=kwargs.pop("now", later(1)),
            **kwargs,
        )
    )


def _conditions(result: Step) -> dict[str, tuple[str, str | None]]:
    return {c.type: (c.status, c.reason) for c in result.status.conditions or ()}


def _apply(j: PodMigrationJob, result: Step) -> PodMigrationJob:
    """The job as the API server holds it after the handler wrote ``result``."""
    body = j.model_dump(by_alias=True, exclude_none=True, mode="json")
    spec = body["spec"]
    for key, value in result.spec_patch.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    body["status"] = result.status.model_dump(by_alias=True, exclude_none=True, mode="json")
    return PodMigrationJob.model_validate(body)


def test_a_job_not_admitted_by_arbitration_waits() -> None:
    result = _step(job("j", "p"), _pod())
    assert result.status.phase is None
    assert not result.evict
    assert result.requeue is None


def test_an_admitted_job_records_the_pod_uid_and_runs() -> None:
    result = _step(job("j", "p", passed=True), _pod())
    assert result.status.phase == "Running"
    assert result.spec_patch == {"podRef": {"uid": "p-uid"}}


def test_an_admitted_job_without_its_pod_fails_missing_pod() -> None:
    result = _step(job("j", "p", passed=True), None)
    assert (result.status.phase, result.status.reason) == ("Failed", "MissingPod")
    result = _step(job("j", "p", passed=True, uid="old-uid"), _pod())  # the pod was recreated
    assert (result.status.phase, result.status.reason) == ("Failed", "MissingPod")


def test_ttl_fails_the_job_with_timeout_and_deletes_the_reservation_even_when_paused() -> None:
    for paused in (None, True):
        j = job(
            "j",
            "p",
            phase="Running",
            passed=True,
            ttl="5m",
            paused=paused,
            reservation="r",
            mode="EvictDirectly",
        )
        assert _step(j, _pod(), now=later(299)).status.phase == "Running"
        result = _step(j, _pod(), now=later(300))
        assert (result.status.phase, result.status.reason) == ("Failed", "Timeout")
        assert result.delete_reservation


def test_a_paused_or_final_job_does_nothing() -> None:
    assert not _step(job("j", "p", phase="Running", paused=True, mode="EvictDirectly"), _pod()).evict
    for phase in ("Succeeded", "Failed", "Aborted"):
        result = _step(job("j", "p", phase=phase, mode="EvictDirectly"), _pod())
        assert result.status.phase == phase
        assert not result.evict
        assert result.requeue is None


def test_the_object_limiter_holds_a_job_back_only_before_its_eviction() -> None:
    j = job("j", "p", phase="Running", mode="EvictDirectly", uid="p-uid")
    result = _step(j, _pod(), limiter_allows=False)
    assert not result.evict
    assert result.requeue == 3.0
    bypass = _pod(annotations={"descheduler.alpha.kubernetes.io/evict": "true"})
    assert _step(j, bypass, limiter_allows=False).evict


def test_evict_directly_evicts_then_succeeds_once_the_pod_is_gone() -> None:
    j = job("j", "p", phase="Running", mode="EvictDirectly", uid="p-uid")
    first = _step(j, _pod())
    assert first.evict
    assert _conditions(first) == {"Eviction": ("False", "Evicting")}
    assert first.status.status == "Eviction"
    j = _apply(j, first)
    waiting = _step(j, _pod())  # still terminating
    assert not waiting.evict
    assert waiting.requeue == 3.0
    done = _step(j, None)
    assert (done.status.phase, done.status.status) == ("Succeeded", "Complete")
    assert _conditions(done) == {"Eviction": ("True", "EvictComplete")}
    # A replacement with the same name (a StatefulSet) is not the pod the job evicted.
    assert (
        _step(
            j,
            _pod(node="n2").model_copy(
                update={"metadata": _pod().metadata.model_copy(update={"uid": "new"})}
            ),
        ).status.phase
        == "Succeeded"
    )


def test_a_pod_that_vanished_before_its_eviction_is_missing() -> None:
    result = _step(job("j", "p", phase="Running", mode="EvictDirectly", uid="p-uid"), None)
    assert (result.status.phase, result.status.reason) == ("Failed", "MissingPod")


def test_reservation_first_from_creation_to_success() -> None:
    pod = _pod(node="n1")
    j = job("j", "p", phase="Running", mode="ReservationFirst", uid="p-uid")
    created = _step(
        j,
        pod,
        pod_spec={
            "schedulerName": "koord-scheduler",
            "nodeName": "n1",
            "containers": [{"name": "c", "image": "x"}],
        },
    )
    body = created.create_reservation
    assert body is not None
    assert body["metadata"]["name"] == "j-uid"
    assert body["spec"]["owners"] == [
        {
            "controller": {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "rs",
                "uid": "rs-uid",
                "controller": True,
                "namespace": "default",
            }
        }
    ]
    assert body["spec"]["allocateOnce"] is True
    assert body["spec"]["ttl"] == "5m"
    assert "nodeName" not in body["spec"]["template"]["spec"]
    assert body["spec"]["template"]["spec"]["containers"] == [{"name": "c", "image": "x"}]
    assert created.spec_patch == {"reservationOptions": {"reservationRef": {"name": "j-uid"}}}
    assert _conditions(created)["ReservationCreated"][0] == "True"
    j = _apply(j, created)

    pending = _step(j, pod, reservation=_reservation(phase="Pending", node=None))
    assert pending.requeue == 3.0
    assert not pending.evict

    scheduled = _step(j, pod, reservation=_reservation())
    assert scheduled.evict
    assert scheduled.status.node_name == "n2"
    assert _conditions(scheduled)["ReservationScheduled"] == ("True", None)
    j = _apply(j, scheduled)

    waiting_owner = _step(j, None, reservation=_reservation())
    assert _conditions(waiting_owner)["PodBoundReservation"] == ("False", "WaitForPodBindReservation")
    assert _conditions(waiting_owner)["Eviction"] == ("True", "EvictComplete")
    j = _apply(j, waiting_owner)

    new_pod = _pod("p-new", node="n2", ready=False)
    not_ready = _step(j, None, reservation=_reservation(owners=["p-new"]), bound_pod=new_pod)
    assert _conditions(not_ready)["BoundPodReady"] == ("False", "WaitForBoundPodReady")
    assert not_ready.status.pod_ref is not None
    assert not_ready.status.pod_ref.name == "p-new"
    # A bound pod that is gone is not Ready (Koordinator reported Succeeded).
    assert (
        _step(_apply(j, not_ready), None, reservation=_reservation(owners=["p-new"])).status.phase
        == "Running"
    )
    j = _apply(j, not_ready)

    done = _step(j, None, reservation=_reservation(owners=["p-new"]), bound_pod=_pod("p-new", node="n2"))
    assert (done.status.phase, done.status.status) == ("Succeeded", "Complete")
    assert _conditions(done)["BoundPodReady"] == ("True", None)
    assert _conditions(done)["PodBoundReservation"] == ("True", None)
    assert _conditions(done)["ReservationBound"] == ("True", None)


def test_reservation_first_failures() -> None:
    j = job("j", "p", phase="Running", mode="ReservationFirst", uid="p-uid", reservation="r")
    pod = _pod(node="n1")
    missing = _step(j, pod, reservation=None)
    assert (missing.status.phase, missing.status.reason) == ("Failed", "MissingReservation")
    same_node = _step(j, pod, reservation=_reservation(node="n1"))
    assert (same_node.status.phase, same_node.status.reason) == ("Failed", "ForbiddenMigratePod")
    expired = Reservation.model_validate(
        {
            "metadata": {"name": "r"},
            "spec": {"template": {}, "owners": [{"object": {"name": "x"}}]},
            "status": {
                "phase": "Failed",
                "conditions": [{"type": "Ready", "status": "False", "reason": "Expired"}],
            },
        }
    )
    result = _step(j, pod, reservation=expired)
    assert (result.status.phase, result.status.reason) == ("Failed", "ReservationExpired")
    unschedulable = Reservation.model_validate(
        {
            "metadata": {"name": "r"},
            "spec": {"template": {}, "owners": [{"object": {"name": "x"}}]},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "Scheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes",
                    }
                ],
            },
        }
    )
    result = _step(j, pod, reservation=unschedulable)
    assert result.status.phase == "Running"
    assert result.requeue == 3.0
    assert _conditions(result)["ReservationScheduled"] == ("False", "Unschedulable")


def test_the_reservation_keeps_the_replacement_off_the_current_node() -> None:
    pod = _pod(
        node="n1",
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
    )
    body = reservation_for(pod, job("j", "p", ttl="2m"), later(0))
    [term] = body["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "zone", "operator": "In", "values": ["a"]}]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]
    assert body["spec"]["ttl"] == "2m"
    assert body["metadata"]["labels"]["app.kubernetes.io/created-by"] == "koord-descheduler"
