"""Gangs end to end on the in-memory backend: nothing of a gang is bound before minMember members
have a place, Strict rolls back, gang groups go together."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from apis.client.backend import NODES, PODGROUPS, PODS, BackendError
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
    }


def member(
    name: str, *, group: str | None = None, cpu: str = "2", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    labels = {"pod-group.scheduling.sigs.k8s.io": group} if group else {}
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": labels,
            "annotations": annotations or {},
        },
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        },
    }


def pod_group(
    name: str, min_member: int, annotations: dict[str, str] | None = None, timeout: int = 0
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout:
        spec["scheduleTimeoutSeconds"] = timeout
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": spec,
    }


@pytest_asyncio.fixture(loop_scope="function")
async def cluster() -> AsyncIterator[tuple[MemoryBackend, SchedulerApp]]:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    backend = MemoryBackend()
    for i in range(3):
        backend.apply(NODES, node(f"n{i}"))
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.05)  # the PodGroup informer's first list
    yield backend, app
    stop.set()
    await task


def bound(backend: MemoryBackend) -> dict[str, str]:
    return {p.metadata.name or "": p.spec.node_name for p in backend.list(PODS) if p.spec.node_name}


async def settle(seconds: float = 0.3) -> None:
    await asyncio.sleep(seconds)


async def test_gang_waits_for_min_member_pods_then_binds_all(
    cluster: tuple[MemoryBackend, SchedulerApp],
) -> None:
    backend, _ = cluster
    backend.apply(PODGROUPS, pod_group("train", 4))
    for i in range(3):
        backend.apply(PODS, member(f"w{i}", group="train", cpu="1"))
    await settle()
    assert bound(backend) == {}
    backend.apply(PODS, member("w3", group="train", cpu="1"))
    for _ in range(100):
        if len(bound(backend)) == 4:
            break
        await asyncio.sleep(0.02)
    assert sorted(bound(backend)) == ["w0", "w1", "w2", "w3"]


async def test_gang_that_cannot_fit_binds_nothing(cluster: tuple[MemoryBackend, SchedulerApp]) -> None:
    backend, _ = cluster
    backend.apply(PODGROUPS, pod_group("big", 4, timeout=1))
    for i in range(4):
        backend.apply(PODS, member(f"b{i}", group="big", cpu="3"))  # 3 nodes x 4 CPU: only 3 fit
    await settle(1.5)
    assert bound(backend) == {}
    messages = {e.message for e in backend.events if e.reason == "FailedScheduling"}
    # The whole gang is placed (or not) at once, and the reason names the gang and the shortfall.
    assert any("gang default/big needs 4 members" in m and "hold 3" in m for m in messages), messages


async def test_pods_wait_for_their_pod_group(cluster: tuple[MemoryBackend, SchedulerApp]) -> None:
    backend, app = cluster
    backend.apply(PODS, member("early", group="late-pg", cpu="1"))
    await settle()
    assert bound(backend) == {}
    assert app.queue.counts().gated == 1
    backend.apply(PODGROUPS, pod_group("late-pg", 1))
    for _ in range(100):
        if bound(backend):
            break
        await asyncio.sleep(0.02)
    assert list(bound(backend)) == ["early"]


async def test_lightweight_gang_from_annotations(cluster: tuple[MemoryBackend, SchedulerApp]) -> None:
    backend, _ = cluster
    annotations = {
        "gang.scheduling.koordinator.sh/name": "light",
        "gang.scheduling.koordinator.sh/min-available": "2",
    }
    backend.apply(PODS, member("l0", cpu="1", annotations=annotations))
    await settle()
    assert bound(backend) == {}
    backend.apply(PODS, member("l1", cpu="1", annotations=annotations))
    for _ in range(100):
        if len(bound(backend)) == 2:
            break
        await asyncio.sleep(0.02)
    assert sorted(bound(backend)) == ["l0", "l1"]
    annotations_written = backend.get(PODS, "default", "l0").metadata.annotations  # type: ignore[union-attr]
    assert annotations_written is not None
    assert annotations_written["internal.scheduling.koordinator.sh/bind-gang-group-id"] == "default/light"
    assert annotations_written["scheduling.koordinator.sh/bind-gang-member-count"] == "2"


async def test_gang_group_binds_together(cluster: tuple[MemoryBackend, SchedulerApp]) -> None:
    backend, _ = cluster
    groups = '["default/master", "default/worker"]'
    backend.apply(PODGROUPS, pod_group("master", 1, {"gang.scheduling.koordinator.sh/groups": groups}))
    backend.apply(PODS, member("m0", group="master", cpu="1"))
    await settle()
    assert bound(backend) == {}, "the master waits for its group's workers"
    backend.apply(PODGROUPS, pod_group("worker", 2, {"gang.scheduling.koordinator.sh/groups": groups}))
    backend.apply(PODS, member("w0", group="worker", cpu="1"))
    backend.apply(PODS, member("w1", group="worker", cpu="1"))
    for _ in range(100):
        if len(bound(backend)) == 3:
            break
        await asyncio.sleep(0.02)
    assert sorted(bound(backend)) == ["m0", "w0", "w1"]


def member_count(backend: MemoryBackend, name: str) -> tuple[str | None, str | None]:
    annotations = backend.get(PODS, "default", name).metadata.annotations or {}  # type: ignore[union-attr]
    return (
        annotations.get("internal.scheduling.koordinator.sh/bind-gang-member-count"),
        annotations.get("scheduling.koordinator.sh/bind-gang-member-count"),
    )


async def test_oversubscribed_gang_writes_min_member_as_member_count_on_every_member(
    cluster: tuple[MemoryBackend, SchedulerApp],
) -> None:
    """Koordinator's oversubscribed gang: 3 pods for minMember 2, every member says 2, the one bound
    after the gang was satisfied included."""
    backend, _ = cluster
    backend.apply(PODGROUPS, pod_group("over", 2))
    for i in range(3):
        backend.apply(PODS, member(f"o{i}", group="over", cpu="1"))
    for _ in range(150):
        if len(bound(backend)) == 3:
            break
        await asyncio.sleep(0.02)
    assert sorted(bound(backend)) == ["o0", "o1", "o2"]
    assert {name: member_count(backend, name) for name in ("o0", "o1", "o2")} == {
        name: ("2", "2") for name in ("o0", "o1", "o2")
    }
    backend.apply(PODS, member("o3", group="over", cpu="1"))
    for _ in range(150):
        if "o3" in bound(backend):
            break
        await asyncio.sleep(0.02)
    assert member_count(backend, "o3") == ("2", "2")


async def test_gang_group_member_count_is_the_sum_of_its_gangs_min_members(
    cluster: tuple[MemoryBackend, SchedulerApp],
) -> None:
    backend, _ = cluster
    groups = '["default/lead", "default/crew"]'
    backend.apply(PODGROUPS, pod_group("lead", 1, {"gang.scheduling.koordinator.sh/groups": groups}))
    backend.apply(PODGROUPS, pod_group("crew", 2, {"gang.scheduling.koordinator.sh/groups": groups}))
    backend.apply(PODS, member("lead-0", group="lead", cpu="1"))
    for i in range(3):
        backend.apply(PODS, member(f"crew-{i}", group="crew", cpu="1"))
    for _ in range(150):
        if len(bound(backend)) == 4:
            break
        await asyncio.sleep(0.02)
    assert sorted(bound(backend)) == ["crew-0", "crew-1", "crew-2", "lead-0"]
    for name in ("lead-0", "crew-0", "crew-1", "crew-2"):
        assert member_count(backend, name) == ("3", "3"), name


async def test_malformed_gang_annotation_keeps_the_pod_pending_and_the_loop_alive(
    cluster: tuple[MemoryBackend, SchedulerApp],
) -> None:
    backend, app = cluster
    bad = {
        "gang.scheduling.koordinator.sh/name": "bad",
        "gang.scheduling.koordinator.sh/min-available": "many",
    }
    backend.apply(PODS, member("bad", cpu="1", annotations=bad))
    backend.apply(PODS, member("plain", cpu="1"))
    for _ in range(100):
        if bound(backend):
            break
        await asyncio.sleep(0.02)
    assert list(bound(backend)) == ["plain"]
    assert app.queue.counts().gated == 1


MOST_ALLOCATED = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}]
"""


@pytest.mark.parametrize(
    ("config", "expected"), [(DEFAULT_CONFIG_YAML, {"n1", "n2"}), (MOST_ALLOCATED, {"n0"})]
)
async def test_the_score_plugins_decide_among_equally_good_placements(
    config: str, expected: set[str]
) -> None:
    """After the topology, the solver follows the profile's scores: spread by default
    (LeastAllocated), binpack onto the busy node with MostAllocated."""
    profiles = load_config(config, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements).profiles
    backend = MemoryBackend()
    for i in range(3):
        backend.apply(NODES, node(f"n{i}", cpu="8"))
    busy = member("busy", cpu="4")
    busy["spec"]["nodeName"] = "n0"
    backend.apply(PODS, busy)
    settings = AppSettings(
        profiles=tuple(profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        await app.handlers.synced_pods.wait()
        await asyncio.sleep(0.05)
        backend.apply(PODGROUPS, pod_group("pair", 2))
        for i in range(2):
            backend.apply(PODS, member(f"p{i}", group="pair", cpu="1"))
        for _ in range(100):
            placed = {k: v for k, v in bound(backend).items() if k.startswith("p")}
            if len(placed) == 2:
                break
            await asyncio.sleep(0.02)
        assert set(placed.values()) <= expected, placed
    finally:
        stop.set()
        await task


async def test_plain_pods_keep_binding_while_a_gang_placement_is_solved(
    cluster: tuple[MemoryBackend, SchedulerApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gang's solve runs in a worker thread: while it is held open, the scheduling loop goes
    on binding other pods; the gang's members wait quietly (no FailedScheduling) and bind after."""
    import threading

    from scheduler import solver

    backend, _ = cluster
    release = threading.Event()
    entered = threading.Event()
    real_solve = solver.solve

    def slow_solve(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(timeout=10)
        return real_solve(*args, **kwargs)

    monkeypatch.setattr(solver, "solve", slow_solve)
    backend.apply(PODGROUPS, pod_group("job", 2))
    for i in range(2):
        backend.apply(PODS, member(f"w{i}", group="job", cpu="1"))
    for _ in range(250):
        if entered.is_set():
            break
        await asyncio.sleep(0.02)
    assert entered.is_set(), "the gang's placement never started"
    for i in range(3):
        backend.apply(PODS, member(f"plain-{i}", cpu="1"))
    for _ in range(250):
        if {"plain-0", "plain-1", "plain-2"} <= set(bound(backend)):
            break
        await asyncio.sleep(0.02)
    assert {"plain-0", "plain-1", "plain-2"} <= set(bound(backend)), "the loop waited for the gang's solve"
    assert not {"w0", "w1"} & set(bound(backend))
    failed = [
        e for e in backend.events if e.reason == "FailedScheduling" and e.regarding.name in ("w0", "w1")
    ]
    assert not failed, [e.message for e in failed]
    release.set()
    for _ in range(250):
        if {"w0", "w1"} <= set(bound(backend)):
            break
        await asyncio.sleep(0.02)
    assert {"w0", "w1"} <= set(bound(backend))


async def test_every_extension_point_of_a_cycle_is_timed(cluster: tuple[MemoryBackend, SchedulerApp]) -> None:
    """``scheduler_framework_extension_point_duration_seconds`` is observed by the runtime, per
    extension point and profile, as kube-scheduler observes it."""
    backend, app = cluster
    backend.apply(PODS, member("timed", cpu="1"))
    for _ in range(250):
        if "timed" in bound(backend):
            break
        await asyncio.sleep(0.02)
    text = app.metrics.exposition().decode()
    for point in ("PreFilter", "Filter", "Score", "Reserve", "Permit", "PreBind", "Bind"):
        line = (
            "scheduler_framework_extension_point_duration_seconds_count"
            f'{{extension_point="{point}",profile="koord-scheduler",status="Success"}}'
        )
        assert line in text, point


async def test_the_cache_size_gauge_follows_the_cache(cluster: tuple[MemoryBackend, SchedulerApp]) -> None:
    """``scheduler_scheduler_cache_size`` (nodes, pods, assumed pods) is set by the housekeeping loop."""
    backend, app = cluster
    backend.apply(PODS, member("sized", cpu="1"))
    line = 'scheduler_scheduler_cache_size{type="pods"} 1.0'
    for _ in range(150):
        text = app.metrics.exposition().decode()
        if line in text:
            break
        await asyncio.sleep(0.02)
    assert 'scheduler_scheduler_cache_size{type="nodes"} 3.0' in text
    assert line in text


async def test_a_gang_solve_reports_its_status_time_and_proven_gap(
    cluster: tuple[MemoryBackend, SchedulerApp],
) -> None:
    """The placement's solve is recorded with its status and wall time, and its proven relative
    gap (``koord_scheduler_solver_gap_ratio``; 0 for a proven optimum)."""
    backend, app = cluster
    backend.apply(PODGROUPS, pod_group("measured", 2))
    for i in range(2):
        backend.apply(PODS, member(f"m{i}", group="measured", cpu="1"))
    for _ in range(250):
        if {"m0", "m1"} <= set(bound(backend)):
            break
        await asyncio.sleep(0.02)
    assert {"m0", "m1"} <= set(bound(backend))
    text = app.metrics.exposition().decode()
    # one solve, or more if the plan went stale before binding: every one proven optimal
    solves = re.search(
        r'koord_scheduler_solver_duration_seconds_count\{solver="cpsat",status="OPTIMAL"\} (\S+)', text
    )
    exact = re.search(r'koord_scheduler_solver_gap_ratio_bucket\{le="0.0",solver="cpsat"\} (\S+)', text)
    assert solves is not None
    assert exact is not None
    assert float(solves.group(1)) >= 1
    assert float(exact.group(1)) == float(solves.group(1))


async def test_a_member_whose_binding_fails_keeps_its_room_so_the_gang_is_not_left_part_bound() -> None:
    """The API server refuses one member's Binding (it restarts) after its gang was released at
    Permit and another member is bound; pods arriving while the member backs off must not take its
    room, or the gang stays part bound for good."""
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    backend = MemoryBackend()
    for i in range(3):
        backend.apply(NODES, node(f"n{i}"))
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=1.0, pod_max_backoff_seconds=1.0
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.05)

    real_bind = backend.bind
    failed: list[str] = []

    def competitors_arrive() -> None:
        # Two whole-node pods, while the member backs off (1 s): one node is free for them.
        backend.apply(PODS, member("c0", cpu="4"))
        backend.apply(PODS, member("c1", cpu="4"))

    async def bind_failing_once(pod: Any, node_name: str, **kwargs: Any) -> None:
        if pod.metadata.name == "g1" and not failed:
            failed.append(node_name)
            asyncio.get_running_loop().call_soon(competitors_arrive)  # after the failure is handled
            raise BackendError("the API server is restarting", status=503)
        await real_bind(pod, node_name, **kwargs)

    backend.bind = bind_failing_once  # type: ignore[method-assign]
    try:
        backend.apply(PODGROUPS, pod_group("pair", 2))
        backend.apply(PODS, member("g0", group="pair", cpu="4"))
        backend.apply(PODS, member("g1", group="pair", cpu="4"))
        for _ in range(200):
            if {"g0", "g1"} <= set(bound(backend)):
                break
            await asyncio.sleep(0.02)
        await settle()
        placed = bound(backend)
        assert failed, "the failing binding was never attempted"
        assert {"g0", "g1"} <= set(placed), f"the gang was left part bound: {placed}"
        assert placed["g1"] == failed[0], "the member is retried on the node whose room it kept"
        assert len({"c0", "c1"} & set(placed)) == 1, placed
    finally:
        stop.set()
        await task


async def start_on(backend: MemoryBackend) -> tuple[SchedulerApp, asyncio.Event, asyncio.Task[None]]:
    """A scheduler (re)started on a cluster that already holds pods."""
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.05)
    return app, stop, task


def part_bound_trio(free_nodes: int, waiting: tuple[dict[str, Any], ...] = ()) -> MemoryBackend:
    """A gang of minMember 3 of which a killed scheduler bound one member (g0) before dying: g1 and
    g2 are pending; ``free_nodes`` whole nodes are free for them. ``waiting``: pending pods created
    before the gang."""
    backend = MemoryBackend()
    for pod in waiting:
        backend.apply(PODS, pod)
    for i in range(1 + free_nodes):
        backend.apply(NODES, node(f"n{i}"))
    backend.apply(PODGROUPS, pod_group("trio", 3))
    first = member("g0", group="trio", cpu="4")
    first["spec"]["nodeName"] = "n0"
    backend.apply(PODS, first)
    backend.apply(PODS, member("g1", group="trio", cpu="4"))
    backend.apply(PODS, member("g2", group="trio", cpu="4"))
    return backend


async def test_a_restarted_scheduler_counts_the_bound_member_and_places_the_rest_of_the_gang() -> None:
    backend = part_bound_trio(free_nodes=2)
    _app, stop, task = await start_on(backend)
    try:
        for _ in range(200):
            if len(bound(backend)) == 3:
                break
            await asyncio.sleep(0.02)
        assert sorted(bound(backend)) == ["g0", "g1", "g2"]
    finally:
        stop.set()
        await task


async def test_a_restarted_scheduler_places_the_rest_of_a_part_bound_gang_together_or_not_at_all() -> None:
    """Room for one of the two members the gang lacks: neither is bound (a member bound alone would
    take room and leave the gang short all the same), as a gang that never ran would not be."""
    backend = part_bound_trio(free_nodes=1)
    _app, stop, task = await start_on(backend)
    try:
        for _ in range(100):
            if any(e.reason == "FailedScheduling" for e in backend.events):
                break
            await asyncio.sleep(0.02)
        await settle()
        assert sorted(bound(backend)) == ["g0"]
    finally:
        stop.set()
        await task


async def test_a_restarted_scheduler_places_the_rest_of_a_part_bound_gang_before_older_pods() -> None:
    """A scheduler killed between a gang's bindings leaves it part bound, its bound member idle until
    the rest runs. Restarted, it must place that rest before pods of the same priority that were
    waiting longer for room (c0, created first), or they take it and the gang stays part bound."""
    backend = part_bound_trio(free_nodes=2, waiting=(member("c0", cpu="4"),))
    _app, stop, task = await start_on(backend)
    try:
        for _ in range(200):
            if len(bound(backend)) >= 3:
                break
            await asyncio.sleep(0.02)
        await settle()
        assert sorted(bound(backend)) == ["g0", "g1", "g2"]
    finally:
        stop.set()
        await task


async def test_members_a_relist_no_longer_lists_are_gone_from_their_gang() -> None:
    """The API server restarts and the pod watch relists: the two running members of a gang were
    deleted meanwhile (no DELETED event reached us). Its third member, pending, is all that is left
    of a gang of minMember 2 and must not be bound alone in the room they left."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n0"))
    backend.apply(NODES, node("n1"))
    backend.apply(PODGROUPS, pod_group("trio", 2))
    for i in range(2):
        running = member(f"t{i}", group="trio", cpu="4")
        running["spec"]["nodeName"] = f"n{i}"
        backend.apply(PODS, running)
    backend.apply(PODS, member("t2", group="trio", cpu="4"))
    _app, stop, task = await start_on(backend)
    try:
        for _ in range(100):
            if any(e.reason == "FailedScheduling" for e in backend.events):
                break
            await asyncio.sleep(0.02)
        for name in ("t0", "t1"):  # gone while the watch was down
            backend._objects(PODS).pop(f"default/{name}")
        backend.force_relist(PODS)
        await settle(0.5)
        assert bound(backend) == {}
    finally:
        stop.set()
        await task
