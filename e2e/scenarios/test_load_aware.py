"""LoadAwareScheduling on the real API server: NodeMetric status, reported by koordlet, decides where
pods go.

A koord-scheduler of its own (``koord-scheduler-load``, the chart's RBAC) runs the configuration
of ``docs/load-aware.md``: LoadAwareScheduling enabled (it is not in the default set) and the only
scorer, so that what the placements show is that plugin, not NodeResourcesFit spreading by
requests. Six fake nodes of its own, tainted so no other scenario's pods land there: a hot one, a
cool one, a warm one, one koordlet does not report for (its NodeMetric, created by koord-manager,
stays expired), and an idle and a warm one for the burst. The usage is reported by
``koordlet --simulate`` from load files, as on a KWOK cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koordlet_simulation, wait_until_ready
from e2e.scheduler_process import Scheduler, start_scheduler
from e2e.workloads import apply, failed_scheduling, get_object, make_pod, pods, wait_for

NAMESPACE = "load-aware"
SCHEDULER = "koord-scheduler-load"
TAINT = {"key": "koord-e2e/pool", "value": "load", "effect": "NoSchedule"}
NODES = ("load-hot", "load-cool", "load-warm", "load-stale", "load-idle", "load-busy")
CONFIG = f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
clientConnection: {{qps: 500, burst: 1000}}
profiles:
- schedulerName: {SCHEDULER}
  plugins:
    multiPoint:
      enabled: [{{name: LoadAwareScheduling}}]
    score:
      disabled: [{{name: "*"}}]
      enabled: [{{name: LoadAwareScheduling, weight: 1}}]
  pluginConfig:
  - name: LoadAwareScheduling
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: LoadAwareSchedulingArgs
      usageThresholds: {{cpu: 65, memory: 95}}
      nodeMetricExpirationSeconds: 180
      enableScheduleWhenNodeMetricsExpired: false
      estimatedScalingFactors: {{cpu: 85, memory: 70}}
"""


def _node(name: str, role: str) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "load-role": role},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _koordlet(
    cp: ControlPlane, directory: Path, name: str, cpu: dict[str, str], interval: float
) -> LocalComponent:
    """``koordlet --simulate`` reporting ``cpu`` (node -> usage) every ``interval`` seconds, once the
    NodeMetrics koord-manager creates for those nodes exist; returns when each has a report."""
    wait_for(
        lambda: all(cp.read("nodemetric", node) is not None for node in cpu),
        timeout=60,
        what=f"koord-manager's NodeMetrics for {sorted(cpu)}",
    )
    load = {
        "reportIntervalSeconds": interval,
        "nodes": [{"name": node, "usage": {"cpu": usage, "memory": "1Gi"}} for node, usage in cpu.items()],
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(load))
    component = koordlet_simulation(cp, path, report_interval_seconds=None, name=name)
    component.start()

    def reported() -> bool:
        for node in cpu:
            metric = get_object(cp, "nodemetric", node)
            if not (metric.get("status") or {}).get("updateTime"):
                return False
        return True

    wait_for(reported, timeout=60, what=f"koordlet's reports for {sorted(cpu)}")
    return component


def _pod(name: str, role_in: list[str], cpu: str = "500m") -> dict[str, Any]:
    pod = make_pod(name, NAMESPACE, cpu=cpu, memory="256Mi", scheduler=SCHEDULER, tolerations=[TAINT])
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "load-role", "operator": "In", "values": role_in}]}
                ]
            }
        }
    }
    return pod


def _node_of(cp: ControlPlane, name: str) -> str | None:
    for p in pods(cp, NAMESPACE):
        if p["metadata"]["name"] == name:
            node: str | None = p["spec"].get("nodeName")
            return node
    return None


@pytest.fixture(scope="module")
def load_scheduler(
    control_plane: ControlPlane, scheduler_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Scheduler, Path]]:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    roles = ("hot", "cool", "warm", "stale", "idle", "busy")
    apply(cp, [_node(name, role) for name, role in zip(NODES, roles, strict=True)])
    wait_nodes_ready(cp)
    directory = tmp_path_factory.mktemp("load-aware")
    # 80%, 10% and 40% of 4 CPUs; load-stale is not reported: its NodeMetric stays expired.
    usage = {"load-hot": "3200m", "load-cool": "400m", "load-warm": "1600m"}
    koordlet = _koordlet(cp, directory, "koordlet-load", usage, interval=5)
    running = start_scheduler(cp, scheduler_kubeconfig, SCHEDULER, config_text=CONFIG, leader_elect=False)
    try:
        wait_until_ready(running.component, running.port)
        yield running, directory
    finally:
        running.component.stop()
        koordlet.stop()
        cp.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cp.kubectl("delete", "node", *NODES, "--ignore-not-found")


def test_load_aware_scheduling(control_plane: ControlPlane, load_scheduler: tuple[Scheduler, Path]) -> None:
    cp = control_plane

    # A hot node is filtered, and FailedScheduling says why.
    apply(cp, [_pod("to-hot", ["hot"])])
    messages = wait_for(
        lambda: [m for m in failed_scheduling(cp, NAMESPACE, "to-hot") if "usage exceed threshold" in m],
        timeout=60,
        what="a FailedScheduling event for to-hot naming the usage threshold",
    )
    assert "1 node(s) cpu usage exceed threshold" in messages[-1], messages[-1]
    assert _node_of(cp, "to-hot") is None

    # Among cool nodes the less loaded is preferred (the hot one is not a candidate).
    apply(cp, [_pod("prefers-cool", ["hot", "cool", "warm"])])
    assert wait_for(lambda: _node_of(cp, "prefers-cool"), 60, "prefers-cool bound") == "load-cool"

    # An expired NodeMetric keeps pods off its node (enableScheduleWhenNodeMetricsExpired: false) ...
    apply(cp, [_pod("to-stale", ["stale"])])
    messages = wait_for(
        lambda: [m for m in failed_scheduling(cp, NAMESPACE, "to-stale") if "nodeMetric expired" in m],
        timeout=60,
        what="a FailedScheduling event for to-stale naming the expired NodeMetric",
    )
    assert "1 node(s) nodeMetric expired" in messages[-1], messages[-1]
    assert _node_of(cp, "to-stale") is None
    # ... until koordlet reports for it: the NodeMetric event retries the pod.
    koordlet = _koordlet(cp, load_scheduler[1], "koordlet-stale", {"load-stale": "0"}, interval=5)
    try:
        bound = wait_for(lambda: _node_of(cp, "to-stale"), 60, "to-stale bound after a fresh report")
        assert bound == "load-stale"
    finally:
        koordlet.stop()


def test_a_burst_does_not_all_land_on_the_node_that_looked_idle(
    control_plane: ControlPlane, load_scheduler: tuple[Scheduler, Path]
) -> None:
    """Eight pods at once, within one report interval: each placed pod is estimated (0.85 of
    500m: 10.6% of a 4-cpu node), so the idle node stops looking idle after three of them and the
    node at 30% gets its share. Without the estimate all eight would go to the idle node (it
    would stay at 0% until the next report, and 8 x 10.6% = 85% is past the 65% threshold)."""
    cp = control_plane
    # One report now and none for ten minutes: the burst falls inside one report interval.
    usage = {"load-idle": "0", "load-busy": "1200m"}  # 0% and 30%
    koordlet = _koordlet(cp, load_scheduler[1], "koordlet-burst", usage, interval=600)
    names = [f"burst-{i}" for i in range(8)]
    try:
        apply(cp, [_pod(name, ["idle", "busy"]) for name in names])
        placed = wait_for(
            lambda: (lambda got: got if all(got) else None)([_node_of(cp, n) for n in names]),
            timeout=90,
            what="every burst pod bound",
        )
    finally:
        koordlet.stop()
    assert set(placed) == {"load-idle", "load-busy"}, placed
    # idle takes at most 6 (6 x 10.6% = 64% <= 65%), busy at most 3 (30 + 3 x 10.6 = 62%)
    assert 5 <= placed.count("load-idle") <= 6, placed
