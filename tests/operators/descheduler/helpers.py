"""Pods, workloads and jobs for the descheduler's tests, as the API server would send them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from apis.scheduling.podmigrationjob import PodMigrationJob
from operators.descheduler.informers import WORKLOAD_KINDS, Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KINDS = {(k.group, k.kind): k for k in WORKLOAD_KINDS}


def pod_body(
    name: str,
    *,
    namespace: str = "default",
    node: str | None = "n1",
    owner: tuple[str, str, str] | None = ("ReplicaSet", "rs", "rs-uid"),
    ready: bool = True,
    priority: int | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    created: datetime = T0,
    phase: str = "Running",
    scheduler: str = "koord-scheduler",
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"{name}-uid",
        "creationTimestamp": created.isoformat(),
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if owner is not None:
        kind, owner_name, uid = owner
        api_version = "v1" if kind == "ReplicationController" else "batch/v1" if kind == "Job" else "apps/v1"
        meta["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": uid, "controller": True}
        ]
    body_spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "c"}], **spec}
    if node:
        body_spec["nodeName"] = node
    if priority is not None:
        body_spec["priority"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": body_spec,
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def workload_body(
    kind: str, name: str, uid: str, replicas: int, *, owner: tuple[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner[0],
                "name": owner[1],
                "uid": owner[1] + "-uid",
                "controller": True,
            }
        ]
    return {"metadata": meta, "spec": {"replicas": replicas}}


def store_with(
    *pods: dict[str, Any], replica_sets: dict[str, int] | None = None, deployment: int | None = None
) -> Store:
    """A store with the pods, ReplicaSets ``name -> replicas`` (uid ``<name>-uid``, controlled by the
    Deployment ``deploy`` when ``deployment`` gives its replicas)."""
    store = Store()
    for body in pods:
        store.upsert_pod(body)
    for name, replicas in (replica_sets or {"rs": 3}).items():
        owner = ("Deployment", "deploy") if deployment is not None else None
        store.upsert_workload(
            KINDS[("apps", "ReplicaSet")],
            workload_body("ReplicaSet", name, f"{name}-uid", replicas, owner=owner),
        )
    if deployment is not None:
        store.upsert_workload(
            KINDS[("apps", "Deployment")], workload_body("Deployment", "deploy", "deploy-uid", deployment)
        )
    return store


def job(
    name: str,
    pod: str,
    *,
    namespace: str = "default",
    phase: str | None = None,
    passed: bool = False,
    uid: str | None = None,
    created: datetime = T0,
    mode: str | None = None,
    ttl: str | None = "5m",
    paused: bool | None = None,
    reservation: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
    status_status: str | None = None,
) -> PodMigrationJob:
    annotations = {"descheduler.koordinator.sh/passed-arbitration": "true"} if passed else {}
    spec: dict[str, Any] = {
        "podRef": {"namespace": namespace, "name": pod, "uid": uid},
        "ttl": ttl,
        "mode": mode,
    }
    if paused is not None:
        spec["paused"] = paused
    if reservation:
        spec["reservationOptions"] = {"reservationRef": {"name": reservation}}
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if conditions:
        status["conditions"] = conditions
    if status_status:
        status["status"] = status_status
    return PodMigrationJob.model_validate(
        {
            "metadata": {
                "name": name,
                "uid": f"{name}-uid",
                "resourceVersion": "1",
                "creationTimestamp": created.isoformat(),
                "annotations": annotations,
            },
            "spec": spec,
            "status": status or None,
        }
    )


def later(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)
