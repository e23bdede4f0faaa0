"""The Kopf handlers: watch events fill the caches, and a job's daemon ends once the job is final."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import kopf

from operators.descheduler import handlers
from operators.descheduler.app import Descheduler
from operators.descheduler.config import DeschedulerConfiguration
from tests.operators.descheduler.helpers import job, pod_body, workload_body


def _app() -> tuple[Descheduler, dict[str, Any]]:
    registry = kopf.OperatorRegistry()
    app = Descheduler(DeschedulerConfiguration(), kubeconfig=None, leader_elect=False, initial_delay=0)
    handlers.register(registry, app)
    every = [*registry._watching.get_all_handlers(), *registry._spawning.get_all_handlers()]
    fns: dict[str, Any] = {str(h.id): h.fn for h in every}
    return app, fns


def _kind(fns: dict[str, Any], suffix: str) -> Any:
    return next(fn for hid, fn in fns.items() if hid.endswith(suffix))


async def test_watch_events_fill_and_empty_the_caches() -> None:
    app, fns = _app()
    pod_event = _kind(fns, "pod_event")
    body = pod_body("a", node="n1")
    await pod_event(type="ADDED", body=body, namespace="default", name="a")
    assert [p.metadata.name for p in app.store.pods_on_node("n1")] == ["a"]
    await _kind(fns, "apps/replicasets")(
        type="ADDED", body={**workload_body("ReplicaSet", "rs", "rs-uid", 3)}, namespace="default", name="rs"
    )
    workload = app.store.workload_of(app.store.pod("default", "a"))  # type: ignore[arg-type]
    assert workload is not None
    assert workload.replicas == 3
    await pod_event(type="DELETED", body=body, namespace="default", name="a")
    assert app.store.pods_on_node("n1") == []
    job_body = job("j", "a").model_dump(by_alias=True, exclude_none=True, mode="json")
    await _kind(fns, "job_event")(type="ADDED", body=job_body, name="j")
    assert app.store.job("j") is not None
    await _kind(fns, "job_event")(type="DELETED", body=job_body, name="j")
    assert app.store.job("j") is None


def test_every_handler_runs_on_the_event_loop() -> None:
    """A plain function would run in Kopf's thread pool and change the caches while a descheduling
    round on the loop iterates them."""
    _, fns = _app()
    assert fns
    assert [hid for hid, fn in fns.items() if not inspect.iscoroutinefunction(fn)] == []


def test_the_reconcile_daemon_of_a_final_job_returns_at_once() -> None:
    app, fns = _app()
    app.store.upsert_job(job("j", "a", phase="Succeeded"))
    asyncio.run(asyncio.wait_for(fns["pmj-reconcile"](name="j", stopped=_NotStopped()), timeout=2))


class _NotStopped:
    """What the daemon sees of ``kopf.DaemonStopped`` while its object lives."""

    def __bool__(self) -> bool:
        return False
