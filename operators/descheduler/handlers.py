"""Kopf handlers of koord-descheduler: one ``on.event`` per watched kind feeds the caches, and one
daemon per PodMigrationJob reconciles it (``MigrationController.reconcile``) until it is final.
Nothing here puts a finalizer on an object (``operators.handlers.timers.daemon``)."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from apis.scheduling.podmigrationjob import PodMigrationJob
from apis.scheduling.reservation import Reservation
from apis.slo.nodemetric import NodeMetric
from operators.descheduler.app import Descheduler
from operators.descheduler.informers import WORKLOAD_KINDS, WorkloadKind
from operators.descheduler.logic.view import ACTIVE_PHASES, job_phase
from operators.handlers import timers
from operators.handlers.admission import plain

__all__ = ["register"]

_PMJ = PodMigrationJob.crd
_R = Reservation.crd
_NM = NodeMetric.crd
IDLE = 0.5
"""Seconds between looks at a job that waits on nothing of its own (arbitration, leadership)."""


def register(registry: kopf.OperatorRegistry, app: Descheduler) -> None:
    store = app.store

    @kopf.on.event("", "v1", "pods", registry=registry)
    async def pod_event(
        type: str | None, body: kopf.Body, namespace: str | None, name: str, **_: Any
    ) -> None:
        if type == "DELETED":
            store.delete_pod(namespace or "", name)
        else:
            store.upsert_pod(plain(body))

    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def node_event(type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        if type == "DELETED":
            store.delete_node(name)
        else:
            store.upsert_node(plain(body))

    @kopf.on.event(_NM.group, _NM.version, _NM.plural, registry=registry)
    async def metric_event(type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        if type == "DELETED":
            store.delete_metric(name)
        else:
            store.upsert_metric(plain(body))

    @kopf.on.event(_R.group, _R.version, _R.plural, registry=registry)
    async def reservation_event(type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        if type == "DELETED":
            store.delete_reservation(name)
        else:
            store.upsert_reservation(plain(body))

    for kind in WORKLOAD_KINDS:
        _workload_handler(registry, app, kind)

    @kopf.on.event(_PMJ.group, _PMJ.version, _PMJ.plural, registry=registry)
    async def job_event(type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        job = PodMigrationJob.model_validate(plain(body))
        if type == "DELETED":
            store.delete_job(name)
            if app.leading and app.controller is not None:
                await app.controller.delete_reservation_of(job)
        else:
            store.upsert_job(job)

    @timers.daemon(_PMJ.group, _PMJ.version, _PMJ.plural, id="pmj-reconcile", registry=registry)
    async def reconcile(name: str, stopped: kopf.DaemonStopped, **_: Any) -> None:
        while not stopped:
            job = store.job(name)
            if job is not None and job_phase(job) not in ACTIVE_PHASES:
                return
            delay: float | None = None
            if app.leading and app.controller is not None and job is not None:
                async with app.reconciles:
                    delay = await app.controller.reconcile(name)
            await asyncio.sleep(IDLE if delay is None else max(delay, 0.05))


def _workload_handler(registry: kopf.OperatorRegistry, app: Descheduler, kind: WorkloadKind) -> None:
    async def workload_event(
        type: str | None, body: kopf.Body, namespace: str | None, name: str, **_: Any
    ) -> None:
        if type == "DELETED":
            app.store.delete_workload(kind, namespace or "", name)
        else:
            app.store.upsert_workload(kind, plain(body))

    kopf.on.event(kind.group, kind.version, kind.plural, id=f"{kind.group}/{kind.plural}", registry=registry)(
        workload_event
    )
