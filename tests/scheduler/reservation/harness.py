"""A scheduler on the in-memory backend, with Reservation helpers (shared by the reservation tests)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from apis.client.backend import PODS, RESERVATIONS
from apis.scheduling.reservation import Reservation
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

SCHEDULER = "koord-scheduler"

BASE_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
"""


def node(
    name: str, cpu: str = "4", memory: str = "8Gi", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def pod(
    name: str,
    cpu: str = "1",
    memory: str = "1Gi",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_name: str | None = None,
    priority: int | None = None,
    owner_uid: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if owner_uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "rs",
                "uid": owner_uid,
                "controller": True,
            }
        ]
    return {"metadata": meta, "spec": spec}


def reservation(
    name: str,
    cpu: str = "2",
    memory: str = "2Gi",
    *,
    owners: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    node_name: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    template_spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if node_name:
        template_spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {
            "template": {"spec": template_spec},
            "owners": owners if owners is not None else [{"labelSelector": {"matchLabels": {"app": name}}}],
            **spec,
        },
    }


def affinity(**fields: Any) -> dict[str, str]:
    return {"scheduling.koordinator.sh/reservation-affinity": json.dumps(fields)}


async def start(
    backend: MemoryBackend, config: str = BASE_CONFIG
) -> tuple[SchedulerApp, asyncio.Event, asyncio.Task[None]]:
    loaded = load_config(config, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    settings = AppSettings(
        profiles=tuple(loaded.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.05)
    return app, stop, task


async def stop_app(stop: asyncio.Event, task: asyncio.Task[None]) -> None:
    stop.set()
    await task


def bound(backend: MemoryBackend) -> dict[str, str]:
    return {p.metadata.name or "": p.spec.node_name for p in backend.list(PODS) if p.spec.node_name}


def get_reservation(backend: MemoryBackend, name: str) -> Reservation:
    found = backend.get(RESERVATIONS, None, name)
    assert found is not None
    return found


def placed(backend: MemoryBackend, name: str) -> str | None:
    status = get_reservation(backend, name).status
    return status.node_name if status is not None and status.phase == "Available" else None


async def until(check: Callable[[], bool], seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out after {seconds} s")


async def settle(seconds: float = 0.4) -> None:
    await asyncio.sleep(seconds)
