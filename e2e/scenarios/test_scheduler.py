"""koord-scheduler as a real process, with the chart's ServiceAccount, against the real API server.

The scheduler runs with a token of the ``koord-scheduler`` ServiceAccount bound by the chart's
RBAC (rendered with helm), so a missing permission fails these tests.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import ControlPlane
from e2e.components import http_status, wait_until_ready
from e2e.scheduler_process import Scheduler, start_scheduler
from e2e.workloads import apply, list_items, make_pod, node_overcommit, pods, wait_for


def _bound(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in items if p["spec"].get("nodeName")]


def _events(cp: ControlPlane, namespace: str, reason: str) -> dict[str, list[str]]:
    """Pod name -> messages of its events with ``reason``."""
    out: dict[str, list[str]] = {}
    raw = list_items(cp, "events", namespace=namespace)
    for event in raw:
        if event.get("reason") == reason:
            out.setdefault(event["involvedObject"]["name"], []).append(
                event.get("message") or event.get("note", "")
            )
    return out


# ---- a mixed workload on tens of nodes -----------------------------------------------------------

MIXED = "sched-mixed"
SIZES = [("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi"), ("2", "2Gi")]
HITS = 200
"""Cycles of the mixed workload that its equivalence classes serve, at least: its 250 bound pods are
six templates (web in four sizes, gpu-job, infra), so all but six could be (251 were, measured)."""


NAMESPACES = (MIXED, "sched-sigkill", "sched-apiserver", "sched-leader", "sched-gates")


@pytest.fixture(scope="module", autouse=True)
def _free_the_cpu_pool(control_plane: ControlPlane) -> Iterator[None]:
    """This module's pods fill the cpu pool; the files that run after it on the same cluster
    (under xdist, not in alphabetical order: test_gangs' small pool is cpu-22 and cpu-23) need the
    pool as the session made it."""
    yield
    existing = {n["metadata"]["name"] for n in list_items(control_plane, "namespaces")}
    for namespace in NAMESPACES:
        if namespace in existing:
            control_plane.delete_namespace(namespace)


@pytest.fixture(scope="module")
def mixed_workload(
    control_plane: ControlPlane, scheduler_kubeconfig: Path, _scheduler_process: Scheduler
) -> list[dict[str, Any]]:
    _scheduler_process.ensure_running(control_plane, scheduler_kubeconfig)
    control_plane.create_namespace(MIXED)
    workload = [
        make_pod(
            f"web-{i}", MIXED, cpu=SIZES[i % 4][0], memory=SIZES[i % 4][1], node_selector={"node-type": "cpu"}
        )
        for i in range(200)
    ]
    workload += [
        make_pod(
            f"gpu-job-{i}",
            MIXED,
            cpu="4",
            memory="16Gi",
            extra={"nvidia.com/gpu": "1"},
            node_selector={"node-type": "gpu"},
        )
        for i in range(40)
    ]
    toleration = [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]
    on_tainted = {"kubernetes.io/hostname": "tainted-0"}
    workload += [
        make_pod(f"infra-{i}", MIXED, node_selector=on_tainted, tolerations=toleration) for i in range(10)
    ]
    workload += [make_pod(f"intolerant-{i}", MIXED, node_selector=on_tainted) for i in range(5)]
    workload += [make_pod(f"huge-{i}", MIXED, cpu="100000") for i in range(3)]
    workload += [make_pod(f"other-{i}", MIXED, scheduler="other-scheduler") for i in range(5)]
    # Malformed input the loop must survive: a sub-priority that is no number (ordered as if it had
    # none, and bound), a reservation affinity that is no JSON (refused with the key named, as
    # Koordinator refuses it, while everything else binds).
    workload += [make_pod("bad-priority", MIXED, labels={"koordinator.sh/priority": "high"})]
    workload += [
        make_pod("bad-annotation", MIXED, annotations={"scheduling.koordinator.sh/reservation-affinity": "{"})
    ]
    apply(control_plane, workload)
    expected_bound = 200 + 32 + 10 + 1
    wait_for(
        lambda: len(_bound(pods(control_plane, MIXED))) >= expected_bound,
        timeout=120,
        what=f"{expected_bound} pods of {MIXED} bound",
    )
    return pods(control_plane, MIXED)


def test_every_pod_that_fits_is_bound(mixed_workload: list[dict[str, Any]]) -> None:
    by_name = {p["metadata"]["name"]: p for p in mixed_workload}
    bound = {name for name, p in by_name.items() if p["spec"].get("nodeName")}
    assert {f"web-{i}" for i in range(200)} <= bound
    assert {f"infra-{i}" for i in range(10)} <= bound
    assert "bad-priority" in bound
    assert "bad-annotation" not in bound
    assert len([n for n in bound if n.startswith("gpu-job-")]) == 32  # 4 nodes x 8 GPUs


def test_selectors_and_taints_are_honoured(mixed_workload: list[dict[str, Any]]) -> None:
    for pod in _bound(mixed_workload):
        name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
        if name.startswith("web-"):
            assert node.startswith("cpu-"), name
        elif name.startswith("gpu-job-"):
            assert node.startswith("gpu-"), name
        elif name.startswith("infra-"):
            assert node == "tainted-0", name
        else:
            assert node != "tainted-0", f"{name} landed on the tainted node without a toleration"


def test_no_node_is_over_its_allocatable(
    control_plane: ControlPlane, mixed_workload: list[dict[str, Any]]
) -> None:
    assert node_overcommit(control_plane) == []


def test_pods_that_do_not_fit_stay_pending_with_the_reasons(
    control_plane: ControlPlane, mixed_workload: list[dict[str, Any]]
) -> None:
    node_count = len(list_items(control_plane, "nodes"))
    pending_gpu = [
        p["metadata"]["name"]
        for p in mixed_workload
        if p["metadata"]["name"].startswith("gpu-job-") and not p["spec"].get("nodeName")
    ]
    assert len(pending_gpu) == 8

    def reported() -> dict[str, list[str]] | None:
        events = _events(control_plane, MIXED, "FailedScheduling")
        return events if {"huge-0", "intolerant-0", "bad-annotation", *pending_gpu} <= set(events) else None

    failed = wait_for(reported, timeout=60, what="FailedScheduling events for every pending pod")
    # kube-scheduler's semantics: a node is counted once, for the first Filter that rejects it;
    # the tainted node fails TaintToleration before NodeResourcesFit runs.
    assert "scheduling.koordinator.sh/reservation-affinity" in failed["bad-annotation"][-1]
    huge = failed["huge-0"][-1]
    assert re.match(rf"0/{node_count} nodes are available: ", huge), huge
    assert "1 node(s) had untolerated taint {dedicated: infra}" in huge
    untainted = sum(1 for n in list_items(control_plane, "nodes") if not n["spec"].get("taints"))
    assert f"{untainted} Insufficient cpu" in huge
    intolerant = failed["intolerant-0"][-1]
    assert "1 node(s) had untolerated taint {dedicated: infra}" in intolerant
    assert "node(s) didn't match Pod's node affinity/selector" in intolerant
    messages = [failed[name][-1] for name in pending_gpu]
    assert all("4 Insufficient nvidia.com/gpu" in m for m in messages), messages
    huge_pod = next(p for p in pods(control_plane, MIXED) if p["metadata"]["name"] == "huge-0")
    condition = huge_pod["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )


def test_pods_of_another_scheduler_are_left_alone(
    control_plane: ControlPlane, mixed_workload: list[dict[str, Any]]
) -> None:
    others = [p for p in pods(control_plane, MIXED) if p["metadata"]["name"].startswith("other-")]
    assert len(others) == 5
    assert all(not p["spec"].get("nodeName") for p in others)
    assert all(not p.get("status", {}).get("conditions") for p in others)
    events = _events(control_plane, MIXED, "FailedScheduling")
    assert not [name for name in events if name.startswith("other-")]


def test_koordctl_explains_a_pending_pod(scheduler: Scheduler, mixed_workload: list[dict[str, Any]]) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler.koordctl",
            "explain",
            "pod",
            "huge-1",
            "-n",
            MIXED,
            "--server",
            scheduler.url,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Result:    unschedulable" in result.stdout
    assert "Insufficient cpu" in result.stdout
    as_json = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler.koordctl",
            "explain",
            "pod",
            "web-0",
            "-n",
            MIXED,
            "--server",
            scheduler.url,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(as_json.stdout)["result"] == "scheduled"


def test_metrics_count_the_attempts(scheduler: Scheduler, mixed_workload: list[dict[str, Any]]) -> None:
    assert (
        scheduler.metric('scheduler_schedule_attempts_total{profile="koord-scheduler",result="scheduled"}')
        >= 243
    )
    assert scheduler.metric("scheduler_schedule_attempts_total") > 0


def test_every_exported_metric_family_is_recorded(
    scheduler: Scheduler, mixed_workload: list[dict[str, Any]]
) -> None:
    """Scraped from the running koord-scheduler after the mixed workload (243 bound, the intolerant
    and huge pods unschedulable): the families kube-scheduler users chart are not left at zero."""
    bound = 243
    assert scheduler.metric("scheduler_pod_scheduling_sli_duration_seconds_count") >= bound
    assert scheduler.metric("scheduler_pod_scheduling_attempts_count") >= bound
    assert scheduler.metric("scheduler_pod_scheduling_attempts_sum") >= bound  # one attempt each, at least
    assert scheduler.metric('scheduler_binding_duration_seconds_count{result="scheduled"}') >= bound
    assert scheduler.metric('scheduler_permit_wait_duration_seconds_count{result="scheduled"}') >= bound
    assert scheduler.metric('scheduler_queue_incoming_pods_total{event="PodAdd",queue="active"}') >= bound
    assert (
        scheduler.metric(
            'scheduler_queue_incoming_pods_total{event="ScheduleAttemptFailure",queue="unschedulable"}'
        )
        > 0
    )
    wait_for(
        lambda: (
            scheduler.metric(
                'scheduler_unschedulable_pods{plugin="TaintToleration",profile="koord-scheduler"}'
            )
            >= 5
        ),
        timeout=10,
        what="the 5 intolerant pods counted under TaintToleration (the gauge is set every second)",
    )
    assert (
        scheduler.metric('scheduler_unschedulable_pods{plugin="NodeResourcesFit",profile="koord-scheduler"}')
        >= 3
    )
    # The pods are six templates as the API server defaulted them (a service-account token volume
    # of its own on each): all but a class's first pods reuse its row-local answers.
    wait_for(
        lambda: scheduler.metric("koord_scheduler_equivalence_class_hits_total") >= HITS,
        timeout=10,
        what="the web pods' cycles served from their classes (the counter is set every second)",
    )


# ---- failures: the scheduler killed, the API server restarted, the leader replaced ----------------


@pytest.mark.full  # the fast tier's smoke of kills and restarts is test_chaos.py's first schedule
def test_sigkill_mid_run_then_restart_binds_everything_once(
    control_plane: ControlPlane, scheduler_kubeconfig: Path, scheduler: Scheduler
) -> None:
    namespace = "sched-sigkill"
    control_plane.create_namespace(namespace)
    apply(
        control_plane,
        [
            make_pod(f"p-{i}", namespace, cpu="100m", memory="64Mi", node_selector={"node-type": "cpu"})
            for i in range(150)
        ],
    )
    wait_for(
        lambda: len(_bound(pods(control_plane, namespace))) >= 20,
        timeout=60,
        what="the first bindings",
        interval=0.05,
    )
    scheduler.component.stop_now(signal.SIGKILL)
    restarted = start_scheduler(control_plane, scheduler_kubeconfig, "koord-scheduler")
    scheduler.component, scheduler.port = restarted.component, restarted.port
    wait_until_ready(scheduler.component, scheduler.port, timeout=60)
    wait_for(
        lambda: len(_bound(pods(control_plane, namespace))) == 150, timeout=120, what="all 150 pods bound"
    )
    scheduled = _events(control_plane, namespace, "Scheduled")
    assert all(len(messages) <= 1 for messages in scheduled.values()), {
        k: v for k, v in scheduled.items() if len(v) > 1
    }
    assert node_overcommit(control_plane) == []


@pytest.mark.full  # the fast tier restarts kube-apiserver under load in test_chaos.py's first schedule
def test_apiserver_restart_mid_run(control_plane: ControlPlane, scheduler: Scheduler) -> None:
    namespace = "sched-apiserver"
    control_plane.create_namespace(namespace)
    apply(
        control_plane,
        [
            make_pod(f"p-{i}", namespace, cpu="100m", memory="64Mi", node_selector={"node-type": "cpu"})
            for i in range(100)
        ],
    )
    control_plane.restart_apiserver()
    wait_for(lambda: control_plane.is_running(), timeout=60, what="the API server to answer again")
    apply(
        control_plane,
        [
            make_pod(f"q-{i}", namespace, cpu="100m", memory="64Mi", node_selector={"node-type": "cpu"})
            for i in range(50)
        ],
    )
    wait_for(
        lambda: len(_bound(pods(control_plane, namespace))) == 150, timeout=120, what="all 150 pods bound"
    )
    assert scheduler.component.pid() is not None, "the scheduler must survive an API server restart"


def test_standby_takes_over_when_the_leader_dies(
    control_plane: ControlPlane, scheduler_kubeconfig: Path, scheduler: Scheduler
) -> None:
    standby = start_scheduler(control_plane, scheduler_kubeconfig, "koord-scheduler-standby")
    try:
        wait_for(
            lambda: http_status(f"{standby.url}/healthz") == 200, timeout=60, what="the standby to serve"
        )
        namespace = "sched-leader"
        control_plane.create_namespace(namespace)
        apply(control_plane, [make_pod(f"a-{i}", namespace, cpu="100m", memory="64Mi") for i in range(20)])
        wait_for(
            lambda: len(_bound(pods(control_plane, namespace))) == 20, timeout=60, what="the leader to bind"
        )
        assert http_status(f"{standby.url}/readyz") == 503
        assert standby.metric("scheduler_schedule_attempts_total{") == 0

        scheduler.component.stop_now(signal.SIGKILL)
        wait_until_ready(standby.component, standby.port, timeout=60)
        apply(control_plane, [make_pod(f"b-{i}", namespace, cpu="100m", memory="64Mi") for i in range(20)])
        wait_for(
            lambda: len(_bound(pods(control_plane, namespace))) == 40, timeout=60, what="the standby to bind"
        )
        assert standby.metric("scheduler_schedule_attempts_total{") >= 20
    finally:
        standby.component.stop()


def test_gated_pod_waits_until_its_gates_are_removed(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    namespace = "sched-gates"
    control_plane.create_namespace(namespace)
    gated = make_pod("gated", namespace, cpu="100m", memory="64Mi")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota-check"}]
    apply(control_plane, [gated, make_pod("free", namespace, cpu="100m", memory="64Mi")])
    wait_for(
        lambda: len(_bound(pods(control_plane, namespace))) == 1, timeout=60, what="the ungated pod bound"
    )
    assert not next(p for p in pods(control_plane, namespace) if p["metadata"]["name"] == "gated")[
        "spec"
    ].get("nodeName")
    control_plane.kubectl(
        "patch",
        "pod",
        "gated",
        "-n",
        namespace,
        "--type=json",
        "-p",
        '[{"op": "remove", "path": "/spec/schedulingGates"}]',
    )
    wait_for(
        lambda: len(_bound(pods(control_plane, namespace))) == 2, timeout=60, what="the ungated pod bound"
    )
