"""InterPodAffinity through the scheduler as a whole, on the in-memory backend: a spread Deployment
never shares a node, the pod left over says why and is retried when a matching pod goes away, and
no sequence of pods ever breaks a required term of a bound pod (symmetry included)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest_asyncio
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.backend import NODES, PODGROUPS, PODS
from apis.core import Pod
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.profile import ResolvedProfile
from scheduler.framework.runtime import Framework
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from tests.examples import examples
from tests.scheduler.builders import make_node
from tests.scheduler.test_job_preemption import HIGH, LOW, start
from tests.scheduler.test_job_preemption import node as preemption_node
from tests.scheduler.test_job_preemption import pod as preemption_pod
from tests.scheduler.test_job_preemption import until as preemption_until

HOSTNAME = "kubernetes.io/hostname"


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {HOSTNAME: name}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def replica(name: str) -> dict[str, Any]:
    spread = {
        "topologyKey": HOSTNAME,
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [spread]}},
        },
    }


@pytest_asyncio.fixture(loop_scope="function")
async def cluster() -> AsyncIterator[tuple[MemoryBackend, SchedulerApp]]:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    backend = MemoryBackend()
    for i in range(2):
        backend.apply(NODES, node(f"n{i}"))
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    for _ in range(200):
        if app.ready:
            break
        await asyncio.sleep(0.01)
    assert app.ready  # the namespace watch included
    yield backend, app
    stop.set()
    await task


def bound(backend: MemoryBackend) -> dict[str, str]:
    return {p.metadata.name or "": p.spec.node_name for p in backend.list(PODS) if p.spec.node_name}


async def until(check: Any, seconds: float = 15.0) -> None:
    """Wait for ``check`` (a bound on a loaded machine's patience, not a speed requirement)."""
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / 0.02) * 100):
        if check() or time.monotonic() >= deadline:
            return
        await asyncio.sleep(0.02)


async def test_anti_affine_replicas_never_share_a_node_and_the_last_waits_for_room(
    cluster: tuple[MemoryBackend, SchedulerApp],
) -> None:
    backend, app = cluster
    for i in range(3):
        backend.apply(PODS, replica(f"web-{i}"))

    # The FailedScheduling event is written by a task of its own after the pod is parked, so the
    # wait covers it too: on a loaded machine the count was seen before the event.
    def failed() -> set[str]:
        return {e.message for e in backend.events if e.reason == "FailedScheduling"}

    await until(lambda: len(bound(backend)) == 2 and app.queue.counts().unschedulable == 1 and bool(failed()))
    placed = bound(backend)
    assert sorted(placed.values()) == ["n0", "n1"]
    (pending,) = {"web-0", "web-1", "web-2"} - set(placed)
    messages = failed()
    assert "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules." in {
        m.split(" preemption:")[0] for m in messages
    }, messages
    # a matching pod going away frees its node: the pending replica is retried at once (the
    # queue's periodic flush is minutes away) and takes it
    gone = sorted(placed)[0]
    backend.delete(PODS, "default", gone)
    await until(lambda: pending in bound(backend))
    assert bound(backend)[pending] == placed[gone]


# ---- property: no sequence of pods breaks a bound pod's required terms -----------------------------

ZONES = {"n0": "z0", "n1": "z0", "n2": "z1", "n3": None}
APPS = ("a", "b")
KEYS = (HOSTNAME, "zone")

terms = st.fixed_dictionaries(
    {"key": st.sampled_from(KEYS), "app": st.sampled_from(APPS), "anti": st.booleans()}
)
pods = st.lists(
    st.tuples(st.sampled_from(APPS), st.lists(terms, max_size=2)),
    min_size=1,
    max_size=12,
)


def pod_of(index: int, app: str, spec_terms: list[dict[str, Any]]) -> Pod:
    affinity: dict[str, Any] = {}
    for t in spec_terms:
        kind = "podAntiAffinity" if t["anti"] else "podAffinity"
        required = affinity.setdefault(kind, {}).setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", []
        )
        required.append({"topologyKey": t["key"], "labelSelector": {"matchLabels": {"app": t["app"]}}})
    return Pod.model_validate(
        {
            "metadata": {
                "name": f"p{index}",
                "namespace": "default",
                "uid": f"p{index}",
                "labels": {"app": app},
            },
            "spec": {"containers": [{"name": "c"}], "affinity": affinity or None},
        }
    )


def required_of(pod: Pod, anti: bool) -> list[tuple[str, str]]:
    affinity = pod.spec.affinity
    group = None if affinity is None else (affinity.pod_anti_affinity if anti else affinity.pod_affinity)
    if group is None:
        return []
    out = []
    for t in group.required_during_scheduling_ignored_during_execution or ():
        assert t.label_selector is not None
        assert t.label_selector.match_labels is not None
        out.append((t.topology_key, t.label_selector.match_labels["app"]))
    return out


def violations(placed: dict[str, tuple[Pod, str]], labels: dict[str, dict[str, str]]) -> list[str]:
    out = []
    for name, (pod, node_name) in placed.items():
        for key, app in required_of(pod, anti=True):
            domain = labels[node_name].get(key)
            if domain is None:
                continue
            for other, (other_pod, other_node) in placed.items():
                selected = (other_pod.metadata.labels or {}).get("app") == app
                if other != name and selected and labels[other_node].get(key) == domain:
                    out.append(f"{other} on {other_node} breaks {name}'s anti-affinity on {key}")
        affinity = required_of(pod, anti=False)
        for key, _ in affinity:
            domain = labels[node_name].get(key)
            matched = any(
                all((q.metadata.labels or {}).get("app") == a for _, a in affinity)
                and labels[q_node].get(key) == domain
                for q, q_node in placed.values()
            )
            if domain is None or not matched:
                out.append(f"{name} on {node_name} has no pod matching its affinity in {key}={domain}")
    return out


@settings(max_examples=examples(60), deadline=None)
@given(sequence=pods)
def test_no_sequence_of_pods_breaks_a_bound_pods_required_terms(
    sequence: list[tuple[str, list[dict[str, Any]]]],
) -> None:
    cache = Cache()
    labels: dict[str, dict[str, str]] = {}
    for name, zone in ZONES.items():
        builder = make_node(name).alloc(cpu="8", memory="16Gi").label(HOSTNAME, name)
        if zone is not None:
            builder = builder.label("zone", zone)
        cache.upsert_node(builder.obj())
        labels[name] = {HOSTNAME: name, **({"zone": zone} if zone else {})}
    snapshot = Snapshot(cache)
    fw = Framework(
        ResolvedProfile(scheduler_name="koord-scheduler", plugins=DEFAULT_PLUGINS),
        DEFAULT_REGISTRY,
        Handle(backend=MemoryBackend(), snapshot=lambda: snapshot),
    )
    placed: dict[str, tuple[Pod, str]] = {}
    for index, (app, spec_terms) in enumerate(sequence):
        pod = pod_of(index, app, spec_terms)
        info = PodInfo.of(pod)
        state = CycleState()
        status, _ = fw.run_pre_filter(state, info, snapshot)
        assert status.ok, status
        rows, status = fw.run_filter(state, info, snapshot, snapshot.candidate_rows(), Diagnosis())
        assert status.ok, status
        if rows.size == 0:
            continue
        assert fw.run_pre_score(state, info, snapshot, rows).ok
        total, _, status = fw.run_score(state, info, snapshot, rows)
        assert status.ok
        chosen = snapshot.table.names[int(rows[int(np.argmax(total))])]
        bound_pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": chosen})})
        cache.upsert_pod(PodInfo.of(bound_pod))
        placed[pod.metadata.name or ""] = (bound_pod, chosen)
        assert violations(placed, labels) == []


# ---- preemption: a victim frees room only if its removal satisfies the anti-affinity -------------


def avoiding_db(name: str, cpu: str) -> dict[str, Any]:
    web = preemption_pod(name, cpu=cpu, priority=HIGH)
    avoid = {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "db"}}}
    web["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [avoid]}}
    return web


def hostname_node(name: str) -> dict[str, Any]:
    out = preemption_node(name)
    out["metadata"]["labels"] = {HOSTNAME: name}
    return out


async def test_a_victim_whose_removal_leaves_the_anti_affinity_broken_frees_nothing() -> None:
    """n0's db pod is not preemptible (same priority): evicting n0's filler would make room but
    not satisfy the anti-affinity, so n1's filler goes, although its priority is higher."""
    backend = MemoryBackend()
    for name in ("n0", "n1"):
        backend.apply(NODES, hostname_node(name))
    backend.apply(PODS, preemption_pod("db", cpu="1", priority=HIGH, node_name="n0", labels={"app": "db"}))
    backend.apply(PODS, preemption_pod("pad-0", cpu="3", priority=LOW, node_name="n0"))
    backend.apply(PODS, preemption_pod("pad-1", cpu="4", priority=LOW + 1, node_name="n1"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, avoiding_db("web", cpu="2"))
        await preemption_until(lambda: bound(backend).get("web") == "n1")
        assert "pad-0" in {p.metadata.name for p in backend.list(PODS)}
        assert "pad-1" not in {p.metadata.name for p in backend.list(PODS)}
    finally:
        stop.set()
        await task


async def test_a_victim_that_breaks_the_anti_affinity_is_evicted_even_when_room_is_free() -> None:
    """n0 has room for web, but its low-priority db pod repels it: kube-scheduler's preemption
    removes the lower-priority pods and keeps the db pod a victim because web fails Filter with
    it back; evicting it is cheaper than n1's higher-priority filler."""
    backend = MemoryBackend()
    for name in ("n0", "n1"):
        backend.apply(NODES, hostname_node(name))
    backend.apply(PODS, preemption_pod("db", cpu="1", priority=LOW, node_name="n0", labels={"app": "db"}))
    backend.apply(PODS, preemption_pod("pad-1", cpu="4", priority=LOW + 1, node_name="n1"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, avoiding_db("web", cpu="2"))
        await preemption_until(lambda: bound(backend).get("web") == "n0")
        remaining = {p.metadata.name for p in backend.list(PODS)}
        assert "db" not in remaining
        assert "pad-1" in remaining
    finally:
        stop.set()
        await task


# ---- gangs: members' anti-affinity among themselves --------------------------------------------


async def test_a_gang_with_hostname_anti_affinity_lands_one_member_per_node() -> None:
    """Each node has room for the whole gang (and binpacking-free scores would not keep it
    apart): the placement model keeps one worker per hostname."""
    backend = MemoryBackend()
    for i in range(3):
        backend.apply(NODES, hostname_node(f"n{i}"))
    backend.apply(
        PODGROUPS, {"metadata": {"name": "train", "namespace": "default"}, "spec": {"minMember": 3}}
    )
    app, stop, task = await start(backend)
    try:
        one_per_node = {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"role": "worker"}}}
        for i in range(3):
            worker = preemption_pod(
                f"w{i}",
                cpu="500m",
                priority=LOW,
                group="train",
                labels={"role": "worker"},
            )
            worker["spec"]["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [one_per_node]}
            }
            backend.apply(PODS, worker)
        await preemption_until(lambda: len(bound(backend)) == 3)
        assert sorted(bound(backend).values()) == ["n0", "n1", "n2"]
        assert app.queue.counts().unschedulable == 0
    finally:
        stop.set()
        await task


async def test_a_gang_whose_workers_take_the_same_host_port_lands_one_member_per_node() -> None:
    """NodePorts among members: every node has room for the whole gang, but the workers all take
    hostPort 29500 (a rendezvous port), so the placement model puts them on three nodes rather than
    planning them together for NodePorts to refuse member by member."""
    backend = MemoryBackend()
    for i in range(3):
        backend.apply(NODES, hostname_node(f"n{i}"))
    backend.apply(PODGROUPS, {"metadata": {"name": "mpi", "namespace": "default"}, "spec": {"minMember": 3}})
    app, stop, task = await start(backend)
    try:
        for i in range(3):
            worker = preemption_pod(f"w{i}", cpu="500m", priority=LOW, group="mpi")
            worker["spec"]["containers"][0]["ports"] = [{"containerPort": 29500, "hostPort": 29500}]
            backend.apply(PODS, worker)
        await preemption_until(lambda: len(bound(backend)) == 3)
        assert sorted(bound(backend).values()) == ["n0", "n1", "n2"]
        assert app.queue.counts().unschedulable == 0
    finally:
        stop.set()
        await task
