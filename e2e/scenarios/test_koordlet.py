"""koordlet against the real API server: koord-manager keeps a NodeMetric per node, and koordlet in
simulation mode fills them for the KWOK nodes with exactly what its load file describes, with the
permissions the chart grants koordlet (a missing RBAC rule fails this test)."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from apis.quantity import Quantity
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.cluster.credentials import service_account_kubeconfig
from e2e.components import LocalComponent, koordlet_simulation
from e2e.scheduler_process import free_port
from e2e.workloads import list_items, wait_for

CHART = repo_root() / "charts" / "koordinator-py"
NAMESPACE = "koordinator-system"
HOT, STEPPED, STOPPING, REAL = "cpu-20", "cpu-21", "cpu-22", "cpu-23"


def node_metric(cp: ControlPlane, name: str) -> dict[str, Any] | None:
    return cp.read("nodemetric", name)


def node_usage(cp: ControlPlane, name: str, key: str = "nodeUsage") -> dict[str, str] | None:
    metric = node_metric(cp, name) or {}
    usage = ((metric.get("status") or {}).get("nodeMetric") or {}).get(key) or {}
    resources: dict[str, str] | None = usage.get("resources")
    return resources


def p99_of_5m(cp: ControlPlane, name: str) -> dict[str, str] | None:
    metric = node_metric(cp, name) or {}
    windows = ((metric.get("status") or {}).get("nodeMetric") or {}).get("aggregatedNodeUsages") or []
    for window in windows:
        if window["duration"] == "5m0s":
            resources: dict[str, str] | None = window["usage"]["p99"].get("resources")
            return resources
    return None


def koordlet_kubeconfig(cp: ControlPlane) -> Path:
    """A token of the chart's koordlet ServiceAccount, bound to the chart's koordlet ClusterRole."""
    rendered = cp.helm(
        "template",
        "koordinator-py",
        str(CHART),
        "--show-only",
        "templates/koordlet-serviceaccount.yaml",
        "--show-only",
        "templates/koordlet-rbac.yaml",
    )
    if cp.read("namespace", NAMESPACE) is None:
        cp.create_namespace(NAMESPACE)
    cp.kubectl("apply", "-f", "-", input=rendered)
    return service_account_kubeconfig(cp, NAMESPACE, "koordlet", cp.state_dir / "koordlet.kubeconfig")


@pytest.fixture(scope="module")
def simulation(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalComponent]:
    load = {
        "nodes": [
            {
                "name": HOT,
                "usage": {"cpu": "14", "memory": "40Gi"},
                "pods": [
                    {
                        "namespace": "default",
                        "name": "hog",
                        "usage": {"cpu": "12", "memory": "32Gi"},
                        "priority": "koord-batch",
                        "qos": "BE",
                    }
                ],
            },
            {
                "name": STEPPED,
                "usage": {"cpu": "1", "memory": "2Gi"},
                "steps": [{"atSeconds": 8, "usage": {"cpu": "9"}}],
            },
            {"name": STOPPING, "usage": {"cpu": "3", "memory": "3Gi"}, "stopReportingAfterSeconds": 4},
        ],
    }
    load["nodes"].append({"names": ["cpu-0", "cpu-1"], "usage": {"cpu": "250m", "memory": "1Gi"}})
    path = tmp_path_factory.mktemp("koordlet") / "load.yaml"
    path.write_text(yaml.safe_dump(load))
    port = free_port()
    component = koordlet_simulation(
        control_plane, path, kubeconfig=koordlet_kubeconfig(control_plane), metrics_port=port
    )
    component.start()
    try:
        wait_for(lambda: _healthz(port), 30, "koordlet's /healthz")
        yield component
    finally:
        print(component.stop())
        # The usage koordlet reported stays in these nodes' NodeMetrics, and LoadAwareScheduling
        # filters on it: the files that run next on this cluster (test_gangs uses cpu-22 and
        # cpu-23) must find the nodes as the session made them, with no usage reported.
        for node in (HOT, STEPPED, STOPPING, REAL, "cpu-0", "cpu-1"):
            control_plane.run_kubectl(
                "patch", "nodemetric", node, "--subresource=status", "--type=merge", "-p", '{"status":null}'
            )


def _healthz(port: int) -> bool | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return True if response.status == 200 else None
    except OSError:
        return None


def test_koord_manager_creates_a_node_metric_per_node_with_the_default_policy(
    control_plane: ControlPlane,
) -> None:
    nodes = {n["metadata"]["name"]: n["metadata"]["uid"] for n in list_items(control_plane, "nodes")}

    def all_there() -> dict[str, Any] | None:
        metrics = {m["metadata"]["name"]: m for m in list_items(control_plane, "nodemetrics")}
        return metrics if set(nodes) <= set(metrics) else None

    metrics = wait_for(all_there, 60, "a NodeMetric for every node")
    metric = metrics[HOT]
    assert metric["spec"] == {
        "metricCollectPolicy": {
            "aggregateDurationSeconds": 300,
            "reportIntervalSeconds": 60,
            "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
            "nodeMemoryCollectPolicy": "usageWithoutPageCache",
        }
    }
    [owner] = metric["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", HOT, nodes[HOT])


def test_a_node_metric_goes_with_its_node(control_plane: ControlPlane) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "koordlet-e2e-transient", "labels": {"type": "kwok"}},
    }
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(node))
    try:
        wait_for(lambda: node_metric(control_plane, "koordlet-e2e-transient"), 60, "its NodeMetric created")
    finally:
        control_plane.kubectl("delete", "node", "koordlet-e2e-transient", "--wait=true")
    wait_for(
        lambda: True if node_metric(control_plane, "koordlet-e2e-transient") is None else None,
        60,
        "its NodeMetric deleted with it",
    )


def test_simulation_reports_the_load_file(control_plane: ControlPlane, simulation: LocalComponent) -> None:
    wait_for(
        lambda: node_usage(control_plane, HOT) == {"cpu": "14", "memory": "40Gi"} or None,
        60,
        f"the node usage of {HOT} reported",
    )
    status = (node_metric(control_plane, HOT) or {})["status"]
    assert status["nodeMetric"]["systemUsage"] == {"resources": {"cpu": "2", "memory": "8Gi"}}
    windows = status["nodeMetric"]["aggregatedNodeUsages"]
    assert [w["duration"] for w in windows] == ["5m0s", "10m0s", "30m0s"]
    for window in windows:
        assert set(window["usage"]) == {"p50", "p90", "p95", "p99"}
        assert window["usage"]["p90"] == {"resources": {"cpu": "14", "memory": "40Gi"}}
    assert status["podsMetric"] == [
        {
            "name": "hog",
            "namespace": "default",
            "podUsage": {"resources": {"cpu": "12", "memory": "32Gi"}},
            "priority": "koord-batch",
            "qos": "BE",
        }
    ]
    updated = datetime.fromisoformat(status["updateTime"].replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - updated).total_seconds()) < 30
    # a load shared by several nodes
    assert node_usage(control_plane, "cpu-0") == {"cpu": "250m", "memory": "1Gi"}
    assert node_usage(control_plane, "cpu-1") == {"cpu": "250m", "memory": "1Gi"}


def test_a_step_of_the_load_file_shows_in_the_reported_usage(
    control_plane: ControlPlane, simulation: LocalComponent
) -> None:
    wait_for(
        lambda: p99_of_5m(control_plane, STEPPED) == {"cpu": "9", "memory": "2Gi"} or None, 60, "the step"
    )
    # nodeUsage is the average over the 300 s aggregation: the short hot spell moves it only a little
    usage = node_usage(control_plane, STEPPED)
    assert usage is not None
    assert usage["memory"] == "2Gi"
    assert usage["cpu"] not in ("1", "9")


def test_a_node_that_stops_reporting_keeps_its_last_update_time(
    control_plane: ControlPlane, simulation: LocalComponent
) -> None:
    wait_for(lambda: node_usage(control_plane, STOPPING), 60, f"{STOPPING} reported once")
    time.sleep(6)  # past stopReportingAfterSeconds: 4
    first = (node_metric(control_plane, STOPPING) or {})["status"]["updateTime"]
    time.sleep(3)
    assert (node_metric(control_plane, STOPPING) or {})["status"]["updateTime"] == first
    assert (node_metric(control_plane, "cpu-0") or {})["status"]["updateTime"] != first


def test_koordlet_on_this_host_reports_its_usage_for_a_node(control_plane: ControlPlane) -> None:
    """The real agent (not the simulation) with the chart's koordlet RBAC: this machine's usage,
    read with psutil and cgroups, lands in the NodeMetric of the node it is told it runs on."""
    component = LocalComponent(
        name="koordlet-host",
        argv=(
            sys.executable,
            "-m",
            "koordlet",
            "--node-name",
            REAL,
            "--kubeconfig",
            str(koordlet_kubeconfig(control_plane)),
            "--report-interval-seconds",
            "1",
            "--metrics-port",
            "0",
        ),
        cluster=control_plane,
    )
    component.start()
    try:
        usage = wait_for(lambda: node_usage(control_plane, REAL), 60, f"koordlet's report for {REAL}")
    finally:
        print(component.stop())
    memory = psutil.virtual_memory()
    reported = Quantity.parse(usage["memory"]).value()
    assert abs(reported - (memory.total - memory.available)) < 0.1 * memory.total, usage
    assert 0 <= Quantity.parse(usage["cpu"]).milli_value() <= 1000 * psutil.cpu_count(), usage
    status = (node_metric(control_plane, REAL) or {})["status"]
    assert status["podsMetric"] == []  # no pod of this node runs here
