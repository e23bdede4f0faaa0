"""Job-level preemption end to end on the in-memory backend: the scheduler process's own loop,
Coscheduling's PostFilter, the solver, nominations in the cache, evictions through the backend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from apis.client.backend import ELASTICQUOTAS, NODES, PDBS, PODGROUPS, PODS
from apis.extension import preemption as preemption_ext
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.queue.scheduling_queue import QueuedPodInfo

HIGH, LOW = 1_000_000, 1000

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: Coscheduling
    args:
      enablePreemption: true
      evictionMode: {mode}
"""


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
    }


def pod(
    name: str,
    *,
    cpu: str,
    priority: int,
    node_name: str | None = None,
    group: str | None = None,
    labels: dict[str, str] | None = None,
    policy: str | None = None,
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if group:
        all_labels["pod-group.scheduling.sigs.k8s.io"] = group
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if policy:
        spec["preemptionPolicy"] = policy
    return {"metadata": {"name": name, "namespace": "default", "labels": all_labels}, "spec": spec}


def pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": min_member}}


async def start(
    backend: MemoryBackend,
    mode: str = "Eviction",
    *,
    backoff: tuple[float, float] = (0.01, 0.05),
    clock: Callable[[], float] = time.monotonic,
) -> tuple[SchedulerApp, asyncio.Event, asyncio.Task[None]]:
    config = load_config(CONFIG.format(mode=mode), DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    settings = AppSettings(
        profiles=tuple(config.profiles),
        pod_initial_backoff_seconds=backoff[0],
        pod_max_backoff_seconds=backoff[1],
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics(), clock=clock)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.05)
    return app, stop, task


@pytest_asyncio.fixture(loop_scope="function")
async def filled() -> AsyncIterator[MemoryBackend]:
    """Four 4-CPU nodes, each full of four 1-CPU low-priority pods."""
    backend = MemoryBackend()
    for i in range(4):
        backend.apply(NODES, node(f"n{i}"))
        for j in range(4):
            backend.apply(PODS, pod(f"low-{i}-{j}", cpu="1", priority=LOW, node_name=f"n{i}"))
    yield backend


def names(backend: MemoryBackend) -> set[str]:
    return {p.metadata.name or "" for p in backend.list(PODS)}


def bound(backend: MemoryBackend) -> dict[str, str]:
    return {p.metadata.name or "": p.spec.node_name for p in backend.list(PODS) if p.spec.node_name}


async def until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out after 10 s")


async def test_the_v17_gang_preempts_just_enough_and_binds(filled: MemoryBackend) -> None:
    backend = filled
    app, stop, task = await start(backend)
    try:
        backend.apply(PODGROUPS, pod_group("hp-training-job", 2))
        for i in (1, 2):
            backend.apply(PODS, pod(f"hp-worker-{i}", cpu="3", priority=HIGH, group="hp-training-job"))
        await until(lambda: {"hp-worker-1", "hp-worker-2"} <= set(bound(backend)))
        gone = {f"low-{i}-{j}" for i in range(4) for j in range(4)} - names(backend)
        assert len(gone) == 6  # three 1-CPU pods on each of two nodes
        workers = bound(backend)
        assert workers["hp-worker-1"] != workers["hp-worker-2"]
        assert {g.split("-")[1] for g in gone} == {workers["hp-worker-1"][1:], workers["hp-worker-2"][1:]}
        preempted = [e for e in backend.events if e.reason == "Preempted"]
        assert len(preempted) == 6
        assert all("default/hp-worker-" in e.message for e in preempted)
        assert app.metrics.preemption_attempts._value.get() >= 1
        assert 'koord_scheduler_solver_gap_ratio_count{solver="preemption-cpsat"}' in (
            app.metrics.exposition().decode()
        )
    finally:
        stop.set()
        await task


async def test_nothing_is_evicted_when_the_job_cannot_fit_anyway(filled: MemoryBackend) -> None:
    backend = filled
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODGROUPS, pod_group("too-big", 5))
        for i in range(5):
            backend.apply(PODS, pod(f"big-{i}", cpu="3", priority=HIGH, group="too-big"))
        await until(lambda: any("nothing was evicted" in e.message for e in backend.events))
        await asyncio.sleep(0.2)
        assert len(names(backend)) == 16 + 5
        assert not [e for e in backend.events if e.reason == "Preempted"]
    finally:
        stop.set()
        await task


async def test_preemption_policy_never_never_preempts(filled: MemoryBackend) -> None:
    backend = filled
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("polite", cpu="2", priority=HIGH, policy="Never"))
        await until(lambda: any("preemptionPolicy=Never" in e.message for e in backend.events))
        assert len(names(backend)) == 17
        assert "polite" not in bound(backend)
    finally:
        stop.set()
        await task


async def test_a_single_pod_is_a_job_of_one_and_a_pdb_spares_its_pods() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("a", cpu="2"))
    backend.apply(NODES, node("b", cpu="2"))
    backend.apply(PODS, pod("guarded", cpu="2", priority=LOW, node_name="a", labels={"app": "db"}))
    backend.apply(PODS, pod("plain", cpu="2", priority=LOW, node_name="b"))
    backend.apply(
        PDBS,
        {
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}, "minAvailable": 1},
            "status": {"disruptionsAllowed": 0},
        },
    )
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("urgent", cpu="2", priority=HIGH))
        await until(lambda: "urgent" in bound(backend))
        assert bound(backend)["urgent"] == "b"
        assert "guarded" in names(backend)
        assert "plain" not in names(backend)
    finally:
        stop.set()
        await task


async def test_soft_eviction_only_marks_the_victims(filled: MemoryBackend) -> None:
    backend = filled
    app, stop, task = await start(backend, mode="SoftEviction")
    try:
        backend.apply(PODS, pod("urgent", cpu="2", priority=HIGH))

        def marked() -> list[str]:
            return [
                p.metadata.name or ""
                for p in backend.list(PODS)
                if preemption_ext.ANNOTATION_SOFT_EVICTION in (p.metadata.annotations or {})
            ]

        await until(lambda: len(marked()) == 2)
        # More cycles of the preemptor while its victims are only marked: no other PostFilter
        # (DefaultPreemption after Coscheduling) evicts for it meanwhile.
        await asyncio.sleep(0.5)
        assert len(marked()) == 2
        victims = [p for p in backend.list(PODS) if (p.metadata.name or "") in marked()]
        assert len(names(backend)) == 17  # nobody deleted: a custom evictor acts on the marks
        for victim in victims:
            assert victim.metadata.labels[preemption_ext.ANNOTATION_SOFT_EVICTION] == "true"
            spec = preemption_ext.get_soft_eviction_spec(victim.metadata.annotations)
            assert spec is not None
            assert spec.reason is not None
            assert "default/urgent" in spec.reason
        assert len({v.spec.node_name for v in victims}) == 1
        assert app.cache.nominated_node(
            next(p.metadata.uid for p in backend.list(PODS) if p.metadata.name == "urgent") or ""
        )
    finally:
        stop.set()
        await task


@pytest.mark.parametrize(
    "disable_label",
    ["scheduling.koordinator.sh/disable-preemptible", "quota.scheduling.koordinator.sh/preemptible"],
)
async def test_non_preemptible_pods_are_never_victims(disable_label: str) -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("a", cpu="2"))
    value = "true" if disable_label.endswith("disable-preemptible") else "false"
    backend.apply(PODS, pod("keep", cpu="2", priority=LOW, node_name="a", labels={disable_label: value}))
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("urgent", cpu="2", priority=HIGH))
        await until(lambda: any("nothing was evicted" in e.message for e in backend.events))
        assert "keep" in names(backend)
    finally:
        stop.set()
        await task


async def test_nominated_resources_are_held_for_the_preemptor_against_lower_priorities() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("a", cpu="4"))
    app, stop, task = await start(backend)
    try:
        # A preemptor nominated to node a (as after an eviction), not yet bound: a pending pod of
        # its scheduler that the loop keeps out of the way with a gate.
        preemptor = pod("preemptor", cpu="3", priority=HIGH)
        preemptor["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
        backend.apply(PODS, preemptor)
        await until(lambda: "preemptor" in {p.name for p in app.handlers._pending.values()})
        info = next(p for p in app.handlers._pending.values() if p.name == "preemptor")
        assert app.cache.nominate(info, "a")

        backend.apply(PODS, pod("lower", cpu="2", priority=LOW))
        backend.apply(PODS, pod("small", cpu="1", priority=LOW))
        await until(lambda: "small" in bound(backend))
        await asyncio.sleep(0.2)
        assert "lower" not in bound(backend)  # 4 - 3 held = 1 CPU left for lower priorities

        backend.apply(PODS, pod("higher", cpu="2", priority=HIGH + 1))
        await until(lambda: "higher" in bound(backend))  # a higher priority ignores the hold
    finally:
        stop.set()
        await task


NON_PREEMPTIBLE = "quota.scheduling.koordinator.sh/preemptible"


def elastic_quota(name: str, *, min_cpu: str, max_cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"min": {"cpu": min_cpu}, "max": {"cpu": max_cpu}},
    }


def tenant_pod(
    name: str, quota: str, *, cpu: str, node_name: str | None = None, **labels: str
) -> dict[str, Any]:
    return pod(
        name,
        cpu=cpu,
        priority=0,
        node_name=node_name,
        labels={"quota.scheduling.koordinator.sh/name": quota, **labels},
    )


async def test_a_lender_takes_its_min_back_from_the_borrower_only() -> None:
    """team-b borrowed team-a's idle min (all 16 CPU); team-a's job (8 CPU, within its min) evicts
    just 8 CPU of team-b's pods, never team-c's (within its own min) nor non-preemptible ones."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n0", cpu="10"))
    backend.apply(NODES, node("n1", cpu="10"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-a", min_cpu="8", max_cpu="20"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-b", min_cpu="8", max_cpu="20"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-c", min_cpu="4", max_cpu="4"))
    for i in range(3):
        backend.apply(PODS, tenant_pod(f"b-{i}", "team-b", cpu="4", node_name=f"n{i % 2}"))
    backend.apply(
        PODS,
        tenant_pod(
            "b-keep",
            "team-b",
            cpu="4",
            node_name="n1",
            **{"quota.scheduling.koordinator.sh/preemptible": "false"},
        ),
    )
    backend.apply(PODS, tenant_pod("c-0", "team-c", cpu="2", node_name="n0"))
    backend.apply(PODS, tenant_pod("c-1", "team-c", cpu="2", node_name="n1"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODGROUPS, pod_group("a-job", 2))
        for i in range(2):
            member = tenant_pod(f"a-{i}", "team-a", cpu="4")
            member["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "a-job"
            backend.apply(PODS, member)
        await until(lambda: {"a-0", "a-1"} <= set(bound(backend)))
        left = names(backend)
        assert {"c-0", "c-1", "b-keep"} <= left  # team-c stays within its min; non-preemptible stays
        assert len({"b-0", "b-1", "b-2"} - left) == 2  # 8 CPU taken back, no more
    finally:
        stop.set()
        await task


async def test_a_claim_beyond_min_takes_back_only_the_fair_share() -> None:
    """team-a (min 2) asks 4 of an 8-CPU cluster that team-b (min 2) fills: sharing the spare by
    weight gives each a runtime of 4, so team-b gives back 4 CPU, not more."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n0", cpu="8"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-a", min_cpu="2", max_cpu="8"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-b", min_cpu="2", max_cpu="8"))
    for i in range(4):
        backend.apply(PODS, tenant_pod(f"b-{i}", "team-b", cpu="2", node_name="n0"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, tenant_pod("a-0", "team-a", cpu="4"))
        await until(lambda: "a-0" in bound(backend))
        assert len({f"b-{i}" for i in range(4)} - names(backend)) == 2
    finally:
        stop.set()
        await task


async def test_no_reclaim_from_a_quota_within_its_min_nor_from_the_default_quota() -> None:
    """The node is full: 4 CPU of the default quota (outside the sharing) and team-b's 4 (its
    min). team-a's pod is within team-a's quota, yet nothing may be taken: team-b holds no more
    than its min and the default quota is never reclaimed, so the pod waits, nobody is evicted."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n0", cpu="8"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-a", min_cpu="4", max_cpu="8"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-b", min_cpu="4", max_cpu="8"))
    backend.apply(PODS, pod("other", cpu="4", priority=0, node_name="n0"))
    for i in range(2):
        backend.apply(PODS, tenant_pod(f"b-{i}", "team-b", cpu="2", node_name="n0"))
    app, stop, task = await start(backend)
    try:
        backend.apply(PODS, tenant_pod("a-0", "team-a", cpu="2"))
        await until(lambda: any("nothing was evicted" in e.message for e in backend.events))
        assert {"b-0", "b-1", "other"} <= names(backend)
        assert "a-0" not in bound(backend)
        assert not [e for e in backend.events if e.reason == "Preempted"]
        quota = app.frameworks["koord-scheduler"].plugins["ElasticQuota"]
        assert quota.quota_figures()["team-a"].runtime["cpu"] >= 2000  # the quota itself admits it
    finally:
        stop.set()
        await task


async def test_while_victims_terminate_the_job_waits_nominated_and_lower_priorities_stay_out() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("a", cpu="4"))
    backend.apply(NODES, node("b", cpu="4"))
    for n in ("a", "b"):
        victim = pod(f"slow-{n}", cpu="4", priority=LOW, node_name=n)
        victim["metadata"]["finalizers"] = ["example.com/drain"]  # terminates until removed
        backend.apply(PODS, victim)
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODGROUPS, pod_group("job", 2))
        for i in range(2):
            backend.apply(PODS, pod(f"job-{i}", cpu="4", priority=HIGH, group="job"))
        await until(lambda: len([e for e in backend.events if e.reason == "Preempted"]) == 2)
        await until(lambda: any("waiting for 2 victim(s)" in e.message for e in backend.events))
        # The freed room is held for the job: a lower-priority pod (that would fit once the victims
        # are gone) is not placed there, and nobody else is preempted.
        backend.apply(PODS, pod("opportunist", cpu="4", priority=LOW + 1))
        await asyncio.sleep(0.5)
        assert set(bound(backend)) == {"slow-a", "slow-b"}
        assert len([e for e in backend.events if e.reason == "Preempted"]) == 2
        nominated = {p.metadata.name: p.status.nominated_node_name for p in backend.list(PODS)}
        assert {nominated["job-0"], nominated["job-1"]} == {"a", "b"}

        for n in ("a", "b"):
            backend.finish_termination("default", f"slow-{n}")
        await until(lambda: {"job-0", "job-1"} <= set(bound(backend)))
        await asyncio.sleep(0.3)
        assert "opportunist" not in bound(backend)
    finally:
        stop.set()
        await task


async def test_the_job_binds_within_a_few_cycles_of_its_last_victim_going_not_after_a_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The members' cycles while the victims terminate (planning, waiting) must not leave them in a
    backoff when the victims are gone: as kube-scheduler requeues a preemptor whose victims' deletion
    freed its room, the last victim's deletion puts them straight into the active queue. The clock
    is frozen with kube-scheduler's backoff (1 s doubling to 10 s): a member sent to backoff would
    never come back, so the job binds only if the deletion requeues it without one."""
    backend = MemoryBackend()
    for n in ("a", "b"):
        backend.apply(NODES, node(n, cpu="4"))
        for j in range(2):
            victim = pod(f"slow-{n}-{j}", cpu="2", priority=LOW, node_name=n)
            victim["metadata"]["finalizers"] = ["example.com/drain"]  # terminates until removed
            backend.apply(PODS, victim)
    app, stop, task = await start(backend, backoff=(1.0, 10.0), clock=lambda: 1000.0)
    cycles = 0
    pop = app.queue.pop

    async def counting_pop() -> QueuedPodInfo:
        nonlocal cycles
        qp = await pop()
        cycles += 1
        return qp

    monkeypatch.setattr(app.queue, "pop", counting_pop)
    try:
        backend.apply(PODGROUPS, pod_group("job", 2))
        for i in range(2):
            backend.apply(PODS, pod(f"job-{i}", cpu="4", priority=HIGH, group="job"))
        await until(lambda: len([e for e in backend.events if e.reason == "Preempted"]) == 4)
        await until(lambda: any("waiting for 4 victim(s)" in e.message for e in backend.events))
        for name in ("slow-a-0", "slow-a-1", "slow-b-0"):
            backend.finish_termination("default", name)
        await asyncio.sleep(0.3)
        assert not {"job-0", "job-1"} & set(bound(backend))  # one victim is still going

        before = cycles
        backend.finish_termination("default", "slow-b-1")
        await until(lambda: {"job-0", "job-1"} <= set(bound(backend)))
        # Per member: a cycle that starts the group's placement (PENDING), one that takes its place.
        assert cycles - before <= 4
    finally:
        stop.set()
        await task


async def test_a_restarted_scheduler_takes_nominations_back_from_the_pods() -> None:
    """A pending pod listed with status.nominatedNodeName holds that room again after a restart."""
    backend = MemoryBackend()
    backend.apply(NODES, node("a", cpu="4"))
    nominated = pod("preemptor", cpu="3", priority=HIGH)
    nominated["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    nominated["status"] = {"nominatedNodeName": "a"}
    backend.apply(PODS, nominated)
    app, stop, task = await start(backend)
    try:
        uid = next(p.metadata.uid for p in backend.list(PODS) if p.metadata.name == "preemptor")
        assert app.cache.nominated_node(uid or "") == "a"
        backend.apply(PODS, pod("lower", cpu="2", priority=LOW))
        await until(lambda: any(e.regarding.name == "lower" for e in backend.events))
        assert "lower" not in bound(backend)
    finally:
        stop.set()
        await task


async def test_a_pod_its_quota_rejects_preempts_lower_priority_pods_of_that_quota_only() -> None:
    """Koordinator's ElasticQuota preemption, as a job: team-a is at its max with low-priority
    pods; a high-priority team-a pod evicts just one of them (the node has room: only the quota
    was short), never team-b's pods of even lower priority."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n0", cpu="16"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-a", min_cpu="4", max_cpu="4"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-b", min_cpu="4", max_cpu="8"))
    for i in range(2):
        low = tenant_pod(f"a-low-{i}", "team-a", cpu="2", node_name="n0")
        low["spec"]["priority"] = LOW
        backend.apply(PODS, low)
    lowest = tenant_pod("b-lowest", "team-b", cpu="2", node_name="n0")
    lowest["spec"]["priority"] = LOW - 1
    backend.apply(PODS, lowest)
    _app, stop, task = await start(backend)
    try:
        urgent = tenant_pod("a-urgent", "team-a", cpu="2")
        urgent["spec"]["priority"] = HIGH
        backend.apply(PODS, urgent)
        await until(lambda: "a-urgent" in bound(backend))
        assert "b-lowest" in names(backend)
        assert len({"a-low-0", "a-low-1"} - names(backend)) == 1
    finally:
        stop.set()
        await task


async def test_a_quota_rejection_that_no_eviction_can_fix_evicts_nothing() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n0", cpu="16"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-a", min_cpu="4", max_cpu="4"))
    low = tenant_pod("a-low", "team-a", cpu="2", node_name="n0")
    low["spec"]["priority"] = LOW
    backend.apply(PODS, low)
    _app, stop, task = await start(backend)
    try:
        big = tenant_pod("a-big", "team-a", cpu="6")  # more than team-a's max even alone
        big["spec"]["priority"] = HIGH
        backend.apply(PODS, big)
        await until(lambda: any(e.regarding.name == "a-big" for e in backend.events))
        await asyncio.sleep(0.3)
        assert "a-low" in names(backend)
        assert "a-big" not in bound(backend)
    finally:
        stop.set()
        await task


async def test_a_gang_group_preempts_as_one_job(filled: MemoryBackend) -> None:
    """A master PodGroup and a worker PodGroup in one gang group: victims are chosen so that the
    whole group fits (1 x 4 CPU master + 2 x 3 CPU workers on four full 4-CPU nodes)."""
    backend = filled
    groups = '["default/master", "default/worker"]'
    _app, stop, task = await start(backend)
    try:
        for name, size in (("master", 1), ("worker", 2)):
            group = pod_group(name, size)
            group["metadata"]["annotations"] = {"gang.scheduling.koordinator.sh/groups": groups}
            backend.apply(PODGROUPS, group)
        backend.apply(PODS, pod("master-0", cpu="4", priority=HIGH, group="master"))
        for i in range(2):
            backend.apply(PODS, pod(f"worker-{i}", cpu="3", priority=HIGH, group="worker"))
        await until(lambda: {"master-0", "worker-0", "worker-1"} <= set(bound(backend)))
        placed = bound(backend)
        assert len({placed["master-0"], placed["worker-0"], placed["worker-1"]}) == 3
        gone = {f"low-{i}-{j}" for i in range(4) for j in range(4)} - names(backend)
        assert len(gone) == 4 + 3 + 3  # the whole node for the master, three pods per worker
    finally:
        stop.set()
        await task


async def test_a_stale_nomination_is_cleared_when_preemption_finds_nothing_to_evict() -> None:
    """A gang left nominated by an earlier scheduler (its victims long gone) whose members still do
    not fit, and nothing lower-priority to evict: the nominations are cleared (held room and
    ``status.nominatedNodeName``), as kube-scheduler clears a pod's nominated node when its
    preemption finds no candidates, instead of holding room on that node for nothing."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n0"))
    backend.apply(PODS, pod("equal", cpu="3", priority=HIGH, node_name="n0"))
    backend.apply(PODGROUPS, pod_group("stuck", 2))
    for i in range(2):
        member = pod(f"stuck-{i}", cpu="2", priority=HIGH, group="stuck")
        member["status"] = {"nominatedNodeName": "n0"}
        backend.apply(PODS, member)
    app, stop, task = await start(backend)
    try:

        def nominated() -> set[str]:
            return {
                p.metadata.name or ""
                for p in backend.list(PODS)
                if p.status.nominated_node_name and not p.spec.node_name
            }

        await until(lambda: not nominated())
        assert app.cache.nominated_node(backend.get(PODS, "default", "stuck-0").metadata.uid or "") is None  # type: ignore[union-attr]
        assert "stuck-0" not in bound(backend)
    finally:
        stop.set()
        await task


async def test_a_victim_gang_left_below_its_min_member_goes_whole() -> None:
    """One member's node is all the preemptor needs, but a gang of minMember 2 with one member
    left running is of no use and could never be whole again: its other member goes too."""
    backend = MemoryBackend()
    backend.apply(NODES, node("a", cpu="2"))
    backend.apply(NODES, node("b", cpu="2"))
    backend.apply(PODGROUPS, pod_group("pair", 2))
    backend.apply(PODS, pod("pair-0", cpu="2", priority=LOW, node_name="a", group="pair"))
    backend.apply(PODS, pod("pair-1", cpu="2", priority=LOW, node_name="b", group="pair"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("urgent", cpu="2", priority=HIGH))
        await until(lambda: "urgent" in bound(backend))
        await until(lambda: not names(backend) & {"pair-0", "pair-1"})
    finally:
        stop.set()
        await task


async def test_a_victim_gang_with_members_to_spare_keeps_them() -> None:
    """An oversubscribed gang (three running, minMember 2) loses one member and keeps running."""
    backend = MemoryBackend()
    for name in ("a", "b", "c"):
        backend.apply(NODES, node(name, cpu="2"))
    backend.apply(PODGROUPS, pod_group("trio", 2))
    for i, name in enumerate(("a", "b", "c")):
        backend.apply(PODS, pod(f"trio-{i}", cpu="2", priority=LOW, node_name=name, group="trio"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("urgent", cpu="2", priority=HIGH))
        await until(lambda: "urgent" in bound(backend))
        await asyncio.sleep(0.3)
        assert len(names(backend) & {"trio-0", "trio-1", "trio-2"}) == 2
    finally:
        stop.set()
        await task


async def test_the_spare_member_of_a_preempted_gang_is_not_bound_alone() -> None:
    """An oversubscribed gang (minMember 2, three pods) runs two members; its third waits for room.
    A higher-priority pod evicts one running member, and the other goes too (a broken gang goes
    whole). The spare member must not then take the room left over by itself: that would leave the
    gang 1 of minMember 2 bound for good (the chaos test's partial gang)."""
    backend = MemoryBackend()
    backend.apply(NODES, node("a", cpu="2"))
    backend.apply(NODES, node("b", cpu="2"))
    backend.apply(PODGROUPS, pod_group("trio", 2))
    backend.apply(PODS, pod("trio-0", cpu="2", priority=LOW, node_name="a", group="trio"))
    backend.apply(PODS, pod("trio-1", cpu="2", priority=LOW, node_name="b", group="trio"))
    backend.apply(PODS, pod("trio-2", cpu="2", priority=LOW, group="trio"))
    _app, stop, task = await start(backend)
    try:
        await until(lambda: any(e.regarding.name == "trio-2" for e in backend.events))
        backend.apply(PODS, pod("urgent", cpu="2", priority=HIGH))
        await until(lambda: "urgent" in bound(backend))
        await until(lambda: not names(backend) & {"trio-0", "trio-1"})
        await asyncio.sleep(0.5)  # a node is free: time enough for the spare to be bound
        assert "trio-2" not in bound(backend), bound(backend)
    finally:
        stop.set()
        await task


async def test_a_member_left_of_a_part_bound_gang_is_not_bound_alone_once_the_bound_one_goes() -> None:
    """A restarted scheduler finds a gang part bound (it was killed between two members' bindings):
    pair-0 runs, pair-1 waits for room. A higher-priority pod evicts pair-0. pair-1 is all that is
    left of the gang, one of minMember 2: when room frees it must stay pending, not run alone."""
    backend = MemoryBackend()
    backend.apply(NODES, node("a", cpu="2"))
    backend.apply(NODES, node("b", cpu="2"))
    backend.apply(PODGROUPS, pod_group("pair", 2))
    backend.apply(PODS, pod("pair-0", cpu="2", priority=LOW, node_name="a", group="pair"))
    keep = {preemption_ext.LABEL_DISABLE_PREEMPTIBLE: "true"}
    backend.apply(PODS, pod("filler", cpu="2", priority=LOW, node_name="b", labels=keep))
    backend.apply(PODS, pod("pair-1", cpu="2", priority=LOW, group="pair"))
    _app, stop, task = await start(backend)
    try:
        await until(lambda: any(e.regarding.name == "pair-1" for e in backend.events))
        backend.apply(PODS, pod("urgent", cpu="2", priority=HIGH))
        await until(lambda: "urgent" in bound(backend) and "pair-0" not in names(backend))
        backend.delete(PODS, "default", "filler")  # room for pair-1 alone
        await asyncio.sleep(0.5)
        assert "pair-1" not in bound(backend), bound(backend)
    finally:
        stop.set()
        await task
