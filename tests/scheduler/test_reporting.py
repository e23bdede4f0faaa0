"""The user is told about every pod the scheduler will not consider, and hostile amounts never stop
it: on the in-memory backend, next to healthy pods that still bind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from apis.client.backend import NODES, PODS, EventRecord, ObjectRef
from apis.core import Pod
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.pod_info import PodInfo
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.explain import ExplanationStore
from scheduler.framework.status import Status
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.queue.scheduling_queue import QueuedPodInfo
from scheduler.reporting import Reporter, is_malformed_input

GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"


def node(name: str, memory: str = "16Gi") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": memory, "pods": "110"}},
    }


def pod(
    name: str,
    requests: dict[str, str] | None = None,
    *,
    node_name: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {
            "schedulerName": "koord-scheduler",
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": requests or {"cpu": "1"}}}],
        },
    }


def info(name: str) -> PodInfo:
    return PodInfo.of(Pod.model_validate(pod(name) | {"metadata": {"name": name, "uid": name}}))


# ---- the reporter on its own --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "malformed"),
    [
        (Status.pending("gang default/g has 1 of the 3 members it needs"), False),
        # Coscheduling's PreEnqueue answers a malformed gang annotation with a rejection code.
        (Status.unresolvable("invalid value for gang.scheduling.koordinator.sh/min-available: 'x'"), True),
        (Status.unresolvable("spec.containers[0].resources.requests.memory: 10E is outside"), True),
    ],
    ids=["waiting", "malformed-annotation", "out-of-range"],
)
def test_only_malformed_input_counts_as_refused(status: Status, malformed: bool) -> None:
    assert is_malformed_input(status) is malformed


async def test_a_waiting_gate_is_explained_without_a_warning() -> None:
    backend, store = MemoryBackend(), ExplanationStore()
    reporter = Reporter(backend, store)
    qp = QueuedPodInfo(pod=info("w"), gated_by="Coscheduling: gang has 1 of 3")
    reporter.pod_gated(qp, Status.pending("gang has 1 of 3").with_plugin("Coscheduling"))
    await asyncio.sleep(0)
    assert backend.events == []
    found = store.get("default", "w")
    assert found is not None
    assert found.result == "waiting"
    assert found.message == "Coscheduling: gang has 1 of 3"


async def test_a_refused_object_is_warned_about_once_per_message() -> None:
    backend = MemoryBackend()
    reporter = Reporter(backend, ExplanationStore())
    ref = ObjectRef(kind="Node", name="n", uid="u")
    for message in ("too big", "too big", "still too big"):
        reporter.object_refused(ref, "InvalidResourceQuantity", message)
    await asyncio.sleep(0)
    assert [e.message for e in backend.events] == ["too big", "still too big"]


def test_the_reporter_skips_writes_without_an_event_loop() -> None:
    backend = MemoryBackend()
    Reporter(backend, ExplanationStore()).pod_failed(info("p"), "no room")
    assert backend.events == []


# ---- the whole scheduler -------------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="function")
async def cluster() -> AsyncIterator[tuple[MemoryBackend, SchedulerApp]]:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    backend = MemoryBackend()
    backend.apply(NODES, node("n0"))
    backend.apply(NODES, node("huge", memory="10E"))
    backend.apply(PODS, pod("bound-a", {"memory": "5E"}, node_name="n0"))
    backend.apply(PODS, pod("bound-b", {"memory": "5E"}, node_name="n0"))
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    for _ in range(100):
        if app.ready:
            break
        await asyncio.sleep(0.01)
    yield backend, app
    stop.set()
    await task


def condition(backend: MemoryBackend, name: str) -> dict[str, Any] | None:
    found = backend.get(PODS, "default", name)
    assert found is not None
    for c in found.status.conditions or ():
        if c.type == "PodScheduled":
            return c.model_dump(by_alias=True)
    return None


def warnings(backend: MemoryBackend, name: str) -> list[str]:
    return [e.message for e in backend.events if e.type == "Warning" and e.regarding.name == name]


async def test_hostile_objects_are_refused_with_a_reason_and_healthy_pods_still_bind(
    cluster: tuple[MemoryBackend, SchedulerApp],
) -> None:
    backend, app = cluster
    assert app.ready
    # n0 holds two bound 5E pods: accounted clamped, so it is full and nothing more lands there;
    # "huge" advertises 10E and is no candidate: a healthy pod has nowhere to go until n1 comes.
    backend.apply(PODS, pod("huge-request", {"memory": "10E"}))
    backend.apply(PODS, pod("infinite-cpu", {"cpu": "1e999"}))
    backend.apply(PODS, pod("bad-gang", annotations={GANG_NAME: "g", GANG_MIN: "9" * 5000}))
    backend.apply(PODS, pod("waiting-member", annotations={GANG_NAME: "w", GANG_MIN: "3"}))
    backend.apply(NODES, node("n1"))
    backend.apply(PODS, pod("healthy"))
    for _ in range(200):
        placed = backend.get(PODS, "default", "healthy")
        if placed is not None and placed.spec.node_name:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert placed is not None
    assert placed.spec.node_name == "n1"
    assert app.ready

    for name, field in [
        ("huge-request", "spec.containers[0].resources.requests.memory: 10E is outside the range"),
        ("infinite-cpu", "spec.containers[0].resources.requests.cpu: 1e999 is outside the range"),
        ("bad-gang", "gang.scheduling.koordinator.sh/min-available"),
    ]:
        told = warnings(backend, name)
        assert len(told) == 1, name
        assert field in told[0], name
        cond = condition(backend, name)
        assert cond is not None, name
        assert cond["status"] == "False", name
        assert field in cond["message"], name
        explained = app.explanations.get("default", name)
        assert explained is not None
        assert explained.result == "unschedulable"
        assert field in explained.message

    assert warnings(backend, "waiting-member") == []  # merely waiting for its gang: no Warning
    explained = app.explanations.get("default", "waiting-member")
    assert explained is not None
    assert explained.result == "waiting"

    node_warnings = warnings(backend, "huge")
    assert len(node_warnings) == 1
    assert "status.allocatable.memory: 10E" in node_warnings[0]
    assert all(len(warnings(backend, f"bound-{x}")) == 1 for x in "ab")
    assert app.cache.table.requested_exact(app.cache.table.row["n0"], "memory") >= 2**50


async def test_a_bound_pod_gets_the_scheduled_event_kube_scheduler_writes(
    cluster: tuple[MemoryBackend, SchedulerApp],
) -> None:
    """The event is copied from a template (``binder._SCHEDULED``, ``reporting.regarding``): it
    must be the record built field by field, down to which fields count as set."""
    backend, _ = cluster
    created = backend.apply(PODS, pod("placed"))
    for _ in range(200):
        if any(e.reason == "Scheduled" for e in backend.events):
            break
        await asyncio.sleep(0.01)
    [event] = [e for e in backend.events if e.reason == "Scheduled"]
    expected = EventRecord.model_construct(
        regarding=ObjectRef.model_construct(
            kind="Pod", namespace="default", name="placed", uid=created.metadata.uid
        ),
        reason="Scheduled",
        message="Successfully assigned default/placed to n0",
        action="Binding",
    )
    assert event == expected
    assert event.regarding == expected.regarding
    assert event.model_fields_set == expected.model_fields_set
    assert event.regarding.model_fields_set == expected.regarding.model_fields_set
    assert event.to_wire() == expected.to_wire()
