"""Job-level preemption on the real API server: low-priority pods fill the tainted ``preempt`` pool
(1 spine x 2 blocks: preempt-0..3 in block pb0, preempt-4..7 in pb1; 4 CPU and 8 Gi each), then
higher-priority jobs arrive. Victims are evicted through the Eviction API and KWOK deletes them;
the session koord-scheduler runs with ``enablePreemption: true``."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.components import wait_until_ready
from e2e.scheduler_process import Scheduler, start_scheduler
from e2e.workloads import apply, bound, get_object, list_items, make_pod, pods, present, wait_for

PRIORITY_CLASSES = repo_root() / "docs" / "examples" / "v1.7" / "04-priority-classes.yaml"
TOPOLOGY = repo_root() / "docs" / "examples" / "v1.7" / "02-cluster-network-topology.yaml"
TOLERATE_POOL = [{"key": "koord-e2e/pool", "operator": "Equal", "value": "preempt", "effect": "NoSchedule"}]
HOSTNAME = "kubernetes.io/hostname"
EXTRA_CLASSES = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-never}
value: 1000000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-p100}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-p300}
value: 300
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-p500}
value: 500
"""


@pytest.fixture(scope="module")
def priority_classes(control_plane: ControlPlane) -> None:
    control_plane.apply_file(PRIORITY_CLASSES)
    control_plane.kubectl("apply", "-f", "-", input=EXTRA_CLASSES)
    control_plane.apply_file(TOPOLOGY)


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = f"preempt-{request.node.name.split('[')[0].replace('_', '-')[5:38]}".rstrip("-")
    control_plane.create_namespace(ns)
    yield ns
    control_plane.delete_namespace(ns)


def pool_pod(
    name: str,
    ns: str,
    *,
    cpu: str,
    memory: str = "1Gi",
    nodes: list[str],
    priority_class: str = "low-priority",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    pod = make_pod(
        name,
        ns,
        cpu=cpu,
        memory=memory,
        tolerations=TOLERATE_POOL,
        priority_class=priority_class,
        labels=labels,
        annotations=annotations,
    )
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": nodes}]}
                ]
            }
        }
    }
    return pod


def fill(cp: ControlPlane, ns: str, per_node: dict[str, list[tuple[str, str, dict[str, str]]]]) -> None:
    """Low-priority pods scheduled by koord-scheduler onto the named nodes:
    node -> [(cpu, priority class, labels)], then wait until every one is bound."""
    objects = []
    for node, fillers in per_node.items():
        for i, (cpu, klass, labels) in enumerate(fillers):
            objects.append(
                pool_pod(f"low-{node}-{i}", ns, cpu=cpu, nodes=[node], priority_class=klass, labels=labels)
            )
    apply(cp, objects)
    wait_for(
        lambda: len(bound(cp, ns)) == len(objects) or None, 90, f"{len(objects)} low-priority pods bound"
    )


class NominationWatch:
    """Every nominatedNodeName a pod of the namespace showed, read from ``kubectl get pods -w``
    (the API server clears the field when the pod is bound, so it is only seen while pending)."""

    def __init__(self, cp: ControlPlane, ns: str) -> None:
        argv = [
            cp.tool("kubectl"),
            "--kubeconfig",
            str(cp.kubeconfig),
            "get",
            "pods",
            "-n",
            ns,
            "-w",
            "-o",
            "json",
        ]
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.seen: dict[str, set[str]] = {}
        self._listed = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        # kubectl watches from its list's resourceVersion: once the namespace's pods (filled before)
        # are printed, no later change is missed. A job applied before that could be bound unseen.
        if not self._listed.wait(timeout=60):
            self.close()
            raise TimeoutError(f"kubectl get pods -w -n {ns} printed nothing in 60 s")

    def _read(self) -> None:
        assert self._proc.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for line in self._proc.stdout:
            buffer += line
            try:
                obj, _end = decoder.raw_decode(buffer.strip())
            except json.JSONDecodeError:
                continue
            buffer = ""
            self._listed.set()
            nominated = (obj.get("status") or {}).get("nominatedNodeName")
            if nominated:
                self.seen.setdefault(obj["metadata"]["name"], set()).add(nominated)

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)
        self._thread.join(timeout=10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def bound_all(cp: ControlPlane, ns: str, names: set[str]) -> dict[str, str] | None:
    """Where each of ``names`` is bound, once all of them are."""
    placed = {k: v for k, v in bound(cp, ns).items() if k in names}
    return placed if len(placed) == len(names) else None


def events(cp: ControlPlane, ns: str, reason: str) -> list[dict[str, Any]]:
    return list_items(cp, "events", namespace=ns, field_selector=f"reason={reason}")


def job(
    ns: str, name: str, size: int, *, cpu: str, memory: str, nodes: list[str], spec: str | None = None
) -> list[dict[str, Any]]:
    pod_group: dict[str, Any] = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": size, "scheduleTimeoutSeconds": 300},
    }
    if spec:
        pod_group["metadata"]["annotations"] = {"gang.scheduling.koordinator.sh/network-topology-spec": spec}
    members = [
        pool_pod(
            f"{name}-{i}",
            ns,
            cpu=cpu,
            memory=memory,
            nodes=nodes,
            priority_class="high-priority",
            labels={"pod-group.scheduling.sigs.k8s.io": name},
        )
        for i in range(size)
    ]
    return [pod_group, *members]


def nodes(*indexes: int) -> list[str]:
    return [f"preempt-{i}" for i in indexes]


def test_the_v17_job_preempts_just_enough_and_every_member_is_nominated_then_bound(
    control_plane: ControlPlane, scheduler: Scheduler, priority_classes: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    pool = nodes(0, 1, 2, 3)
    fill(cp, ns, {n: [("1", "low-priority", {})] * 4 for n in pool})
    watch = NominationWatch(cp, ns)
    try:
        apply(cp, job(ns, "hp-training-job", 2, cpu="3", memory="4Gi", nodes=pool))
        members = {"hp-training-job-0", "hp-training-job-1"}
        placed = wait_for(
            lambda: bound_all(cp, ns, members), 120, "both members of the high-priority job bound"
        )
    finally:
        watch.close()
    assert placed["hp-training-job-0"] != placed["hp-training-job-1"]
    survivors = {n for n in present(cp, ns) if n.startswith("low-")}
    assert len(survivors) == 16 - 6, sorted(survivors)  # three 1-CPU pods on each of two nodes
    for node in pool:
        left = [n for n in survivors if n.startswith(f"low-{node}-")]
        assert len(left) == (1 if node in placed.values() else 4), (node, left)
    # Both members were nominated (to the nodes whose victims went) before they were bound.
    assert {m: watch.seen.get(m, set()) for m in members} == {m: {placed[m]} for m in members}
    preempted = events(cp, ns, "Preempted")
    assert len({e["involvedObject"]["name"] for e in preempted}) == 6
    assert all(f"{ns}/hp-training-job-" in e["message"] for e in preempted)


def test_nothing_is_evicted_when_even_every_victim_would_leave_a_member_unplaced(
    control_plane: ControlPlane, scheduler: Scheduler, priority_classes: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    pool = nodes(4, 5)
    fill(cp, ns, {n: [("1", "low-priority", {})] * 4 for n in pool})
    apply(cp, job(ns, "too-big", 3, cpu="3", memory="4Gi", nodes=pool))
    wait_for(
        lambda: any(
            "nothing was evicted" in (e.get("message") or "") for e in events(cp, ns, "FailedScheduling")
        ),
        60,
        "a FailedScheduling event saying nothing was evicted",
    )
    time.sleep(2)
    assert len([n for n in present(cp, ns) if n.startswith("low-")]) == 8
    assert events(cp, ns, "Preempted") == []
    assert not any(n.startswith("too-big") for n in bound(cp, ns))


def test_preemption_policy_never_never_preempts(
    control_plane: ControlPlane, scheduler: Scheduler, priority_classes: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    pool = nodes(6, 7)
    fill(cp, ns, {n: [("2", "low-priority", {})] * 2 for n in pool})
    apply(cp, [pool_pod("polite", ns, cpu="2", nodes=pool, priority_class="e2e-never")])
    wait_for(
        lambda: any(
            "preemptionPolicy=Never" in (e.get("message") or "") for e in events(cp, ns, "FailedScheduling")
        ),
        60,
        "a FailedScheduling event naming preemptionPolicy=Never",
    )
    time.sleep(2)
    assert len([n for n in present(cp, ns) if n.startswith("low-")]) == 4
    assert "polite" not in bound(cp, ns)


def test_a_pdb_protected_victim_is_spared_when_another_choice_exists(
    control_plane: ControlPlane, scheduler: Scheduler, priority_classes: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    pool = nodes(6, 7)
    fill(
        cp,
        ns,
        {"preempt-6": [("4", "low-priority", {"app": "db"})], "preempt-7": [("4", "low-priority", {})]},
    )
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": ns},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
    }
    apply(cp, [pdb])
    wait_for(
        lambda: get_object(cp, "pdb", "db", namespace=ns).get("status", {}).get("currentHealthy") == 1,
        60,
        "the disruption controller to count the guarded pod",
    )
    # The guarded pod sorts first by node name: a name-ordered greedy would pick it.
    apply(cp, [pool_pod("urgent", ns, cpu="4", nodes=pool, priority_class="high-priority")])
    placed = wait_for(lambda: bound(cp, ns).get("urgent"), 90, "the urgent pod bound")
    assert placed == "preempt-7"
    assert "low-preempt-6-0" in present(cp, ns)


def test_victims_of_a_gang_are_counted_as_the_whole_gang(
    control_plane: ControlPlane, scheduler: Scheduler, priority_classes: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    pool = nodes(4, 5, 6, 7)
    low_gang = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "low-gang", "namespace": ns},
        "spec": {"minMember": 3},
    }
    apply(cp, [low_gang])
    member = {"pod-group.scheduling.sigs.k8s.io": "low-gang"}
    fill(
        cp,
        ns,
        {
            "preempt-4": [("4", "low-priority", member)],
            "preempt-5": [("4", "low-priority", member)],
            "preempt-6": [("4", "low-priority", member)],
            "preempt-7": [("4", "low-priority", {})],
        },
    )
    # Every node costs one job of the same priority; evicting a gang member breaks a 3-pod job.
    apply(cp, [pool_pod("urgent", ns, cpu="4", nodes=pool, priority_class="high-priority")])
    placed = wait_for(lambda: bound(cp, ns).get("urgent"), 90, "the urgent pod bound")
    assert placed == "preempt-7"
    assert {"low-preempt-4-0", "low-preempt-5-0", "low-preempt-6-0"} <= present(cp, ns)


def test_a_must_gather_job_preempts_inside_a_single_block(
    control_plane: ControlPlane, scheduler: Scheduler, priority_classes: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    # Block pb0 (preempt-0..3): two nodes of the lowest priority and two of a higher one; block
    # pb1 (preempt-4..7): all four in between. Across blocks the cheapest four would mix them.
    fill(
        cp,
        ns,
        {
            "preempt-0": [("4", "e2e-p100", {})],
            "preempt-1": [("4", "e2e-p100", {})],
            "preempt-2": [("4", "e2e-p500", {})],
            "preempt-3": [("4", "e2e-p500", {})],
            **{n: [("4", "e2e-p300", {})] for n in nodes(4, 5, 6, 7)},
        },
    )
    spec = json.dumps({"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]})
    apply(cp, job(ns, "gathered", 4, cpu="4", memory="1Gi", nodes=nodes(*range(8)), spec=spec))
    members = {f"gathered-{i}" for i in range(4)}
    placed = wait_for(lambda: bound_all(cp, ns, members), 120, "all four members of the MustGather job bound")
    assert set(placed.values()) == set(nodes(4, 5, 6, 7)), placed
    assert {f"low-preempt-{i}-0" for i in range(4)} <= present(cp, ns)


SOFT_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler-soft
  pluginConfig:
  - name: Coscheduling
    args:
      enablePreemption: true
      evictionMode: SoftEviction
"""
SOFT_EVICTION = "scheduling.koordinator.sh/soft-eviction"


@pytest.fixture
def soft_scheduler(control_plane: ControlPlane, scheduler_kubeconfig: Path) -> Iterator[Scheduler]:
    """A second koord-scheduler serving ``koord-scheduler-soft`` with soft eviction."""
    running = start_scheduler(
        control_plane,
        scheduler_kubeconfig,
        "koord-scheduler-soft",
        config_text=SOFT_CONFIG,
        leader_elect=False,
    )
    try:
        wait_until_ready(running.component, running.port)
        yield running
    finally:
        running.component.stop()


def test_soft_eviction_marks_the_victims_for_a_custom_evictor(
    control_plane: ControlPlane,
    scheduler: Scheduler,
    priority_classes: None,
    namespace: str,
    soft_scheduler: Scheduler,
) -> None:
    cp, ns = control_plane, namespace
    pool = nodes(4)
    fill(cp, ns, {"preempt-4": [("2", "low-priority", {})] * 2})
    urgent = pool_pod("urgent", ns, cpu="2", nodes=pool, priority_class="high-priority")
    urgent["spec"]["schedulerName"] = "koord-scheduler-soft"
    apply(cp, [urgent])

    def marked() -> list[dict[str, Any]] | None:
        found = [p for p in pods(cp, ns) if SOFT_EVICTION in (p["metadata"].get("annotations") or {})]
        return found or None

    victims = wait_for(marked, 90, "a victim marked for soft eviction")
    time.sleep(2)
    assert len(marked() or []) == 1  # one 2-CPU pod frees room for the 2-CPU preemptor
    victim = victims[0]
    assert victim["metadata"]["labels"][SOFT_EVICTION] == "true"
    spec = json.loads(victim["metadata"]["annotations"][SOFT_EVICTION])
    assert f"{ns}/urgent" in spec["reason"]
    assert spec["initiator"] == "koord-scheduler-soft"
    assert not victim["metadata"].get("deletionTimestamp")  # soft: nothing was evicted by the scheduler
    assert "urgent" not in bound(cp, ns)

    # The custom evictor acts on the mark; the preemptor then takes the room it was nominated to.
    cp.kubectl("delete", "pod", victim["metadata"]["name"], "-n", ns, "--wait=true")
    assert wait_for(lambda: bound(cp, ns).get("urgent"), 90, "the preemptor bound") == "preempt-4"
