"""Fine-grained CPU reservation through the whole scheduler on the in-memory backend: a Reservation
of an LSR template gets specific CPUs (``resource-status`` on the Reservation), other pods never
get them, its owner gets them, and a restarted scheduler holds them again.

The node is the issue's machine (``nrt_fixtures``); NUMA scoring is MostAllocated, so a stranger
would pack onto NUMA node 0's first free cores: without the reservation's hold it would take the
reserved cores 0-1.
"""

from __future__ import annotations

import json
from typing import Any

from apis.client.backend import NODES, PODS, RESERVATIONS
from apis.extension.numa import ANNOTATION_RESOURCE_STATUS
from scheduler.backend.memory import MemoryBackend
from scheduler.plugins.node_numa_resource.plugin import NRTS
from tests.scheduler.node_numa_resource.nrt_fixtures import node, nrt
from tests.scheduler.reservation.harness import (
    bound,
    get_reservation,
    placed,
    pod,
    reservation,
    settle,
    start,
    stop_app,
    until,
)

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: NodeNUMAResource
    args:
      numaScoringStrategy: {type: MostAllocated}
"""
JOB = [{"labelSelector": {"matchLabels": {"app": "job"}}}]
LSR = {"koordinator.sh/qosClass": "LSR"}


def lsr_reservation(name: str) -> dict[str, Any]:
    body = reservation(name, cpu="4", memory="1Gi", owners=JOB)
    body["spec"]["template"]["metadata"] = {"labels": dict(LSR)}
    return body


def lsr_pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return pod(name, cpu="4", labels={**LSR, **(labels or {})})


def cpuset_of(annotations: dict[str, str] | None) -> str:
    assert annotations is not None
    assert ANNOTATION_RESOURCE_STATUS in annotations, annotations
    value: str = json.loads(annotations[ANNOTATION_RESOURCE_STATUS])["cpuset"]
    return value


def pod_cpuset(backend: MemoryBackend, name: str) -> str:
    found = backend.get(PODS, "default", name)
    assert found is not None
    return cpuset_of(found.metadata.annotations)


def numa_backend() -> MemoryBackend:
    backend = MemoryBackend()
    backend.apply(NODES, node("n0"))
    backend.apply(NRTS, nrt("n0"))
    return backend


async def test_reserved_cpus_are_kept_from_strangers_and_given_to_the_owner() -> None:
    backend = numa_backend()
    _app, stop, task = await start(backend, CONFIG)
    try:
        backend.apply(RESERVATIONS, lsr_reservation("r1"))
        await until(lambda: placed(backend, "r1") == "n0")
        await until(
            lambda: ANNOTATION_RESOURCE_STATUS in (get_reservation(backend, "r1").metadata.annotations or {})
        )
        assert cpuset_of(get_reservation(backend, "r1").metadata.annotations) == "0-1,32-33"
        backend.apply(PODS, lsr_pod("stranger"))
        await until(lambda: "stranger" in bound(backend))
        assert pod_cpuset(backend, "stranger") == "2-3,34-35"
        backend.apply(PODS, lsr_pod("owner", {"app": "job"}))
        await until(lambda: "owner" in bound(backend))
        assert pod_cpuset(backend, "owner") == "0-1,32-33"
    finally:
        await stop_app(stop, task)


async def test_a_restarted_scheduler_holds_the_reserved_cpus_again() -> None:
    backend = numa_backend()
    _app, stop, task = await start(backend, CONFIG)
    try:
        backend.apply(RESERVATIONS, lsr_reservation("r1"))
        await until(
            lambda: ANNOTATION_RESOURCE_STATUS in (get_reservation(backend, "r1").metadata.annotations or {})
        )
    finally:
        await stop_app(stop, task)
    _app, stop, task = await start(backend, CONFIG)
    try:
        await settle()
        backend.apply(PODS, lsr_pod("stranger"))
        await until(lambda: "stranger" in bound(backend))
        assert pod_cpuset(backend, "stranger") == "2-3,34-35"
    finally:
        await stop_app(stop, task)
