"""Batch and mid resources end to end: koordlet (simulation mode, the chart's koordlet RBAC) reports
two KWOK nodes' usage and Prod prediction, koord-manager turns them into ``kubernetes.io/batch-*``
and ``kubernetes.io/mid-*`` node resources from the ``slo-controller-config`` ConfigMap, and
koord-scheduler binds a batch pod on them. A refused ``colocation-config`` leaves the last good
resources and says why on the ConfigMap; disabling co-location removes the resources.

The expected figures are computed here from algorithms.md 10.2 / 10.3 and the load file, not by
koord-manager's code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.quantity import Quantity
from e2e.chart_roles import assert_can, koord_manager_role
from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koordlet_simulation
from e2e.scenarios.test_koordlet import koordlet_kubeconfig
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, get_object, list_items, wait_for

NAMESPACE = "coloc-e2e"
CONFIG_NAMESPACE = "koordinator-system"
CONFIG = "slo-controller-config"
BUSY, IDLE = "coloc-busy", "coloc-idle"
POOL = "koord-e2e/pool"
TAINT = {"key": POOL, "value": "colocation", "effect": "NoSchedule"}
GI = 1024**3
CAPACITY = (16_000, 64 * GI)  # milli-cores, bytes
ALLOCATABLE = (15_000, 62 * GI)
# What the load file says each node uses, and the one Prod pod on BUSY (requests 4 cores / 16Gi).
NODE_USAGE = {BUSY: (2_500, 8 * GI), IDLE: (1_000, 4 * GI)}
WEB_USAGE = (2_000, 6 * GI)
WEB_REQUEST = (4_000, 16 * GI)
BATCH = ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory")
MID = ("kubernetes.io/mid-cpu", "kubernetes.io/mid-memory")
COLOCATION = {
    "enable": True,
    "midUnallocatedPercent": 50,
    # Only this module's nodes: the others of the session keep their resources as they are.
    "nodeConfigs": [
        {
            "name": "not-colocation-e2e",
            "nodeSelector": {
                "matchExpressions": [{"key": POOL, "operator": "NotIn", "values": ["colocation"]}]
            },
            "enable": False,
        }
    ],
}


def _expected(node: str) -> dict[str, int]:
    """algorithms.md 10.2.3 (usage policy, 60 % / 65 % reclaim) and the v1.6 mid formula (10.3)."""
    used = NODE_USAGE[node]
    pods = [WEB_USAGE] if node == BUSY else []
    requests = [WEB_REQUEST] if node == BUSY else []
    out: dict[str, int] = {}
    for i, (batch_name, mid_name, reclaim) in enumerate(zip(BATCH, MID, (60, 65), strict=True)):
        cap, alloc = CAPACITY[i], ALLOCATABLE[i]
        system = used[i] - sum(p[i] for p in pods)
        kubelet_reserved = cap - alloc
        margin = cap * (100 - reclaim) // 100
        out[batch_name] = max(cap - margin - max(system, kubelet_reserved) - sum(p[i] for p in pods), 0)
        # koordlet's priority predictor: peak = (p95/p98 of system + Prod pods) x 1.10
        peak = (system + sum(p[i] for p in pods)) * 110 // 100
        reclaimable = min(max(sum(r[i] for r in requests) - peak, 0), alloc - peak)
        unused = cap - used[i]
        unallocated = max(cap - max(kubelet_reserved, system) - sum(r[i] for r in requests), 0)
        out[mid_name] = min(reclaimable, unused, alloc) + unallocated * 50 // 100
    return out


def _node(name: str) -> dict[str, Any]:
    def resources(cpu: int, memory: int) -> dict[str, str]:
        return {"cpu": f"{cpu}m", "memory": str(memory), "pods": "110"}

    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, POOL: "colocation"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources(*CAPACITY), "allocatable": resources(*ALLOCATABLE)},
    }


def _config_map(colocation: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG, "namespace": CONFIG_NAMESPACE},
        "data": {"colocation-config": colocation},
    }


def _node_resources(cp: ControlPlane, name: str) -> dict[str, dict[str, int]]:
    """The batch/mid resources of the node: {"capacity": {...}, "allocatable": {...}} as integers."""
    status = get_object(cp, "node", name)["status"]
    return {
        part: {k: Quantity.parse(v).value() for k, v in (status.get(part) or {}).items() if k in BATCH + MID}
        for part in ("capacity", "allocatable")
    }


def _load_file(directory: Path) -> Path:
    def usage(cpu: int, memory: int) -> dict[str, str]:
        return {"cpu": f"{cpu}m", "memory": str(memory)}

    load = {
        "reportIntervalSeconds": 1,
        "nodes": [
            {
                "name": BUSY,
                "usage": usage(*NODE_USAGE[BUSY]),
                "pods": [{"namespace": NAMESPACE, "name": "web", "usage": usage(*WEB_USAGE)}],
            },
            {"name": IDLE, "usage": usage(*NODE_USAGE[IDLE])},
        ],
    }
    path = directory / "load.yaml"
    path.write_text(yaml.safe_dump(load))
    return path


def _web_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": NAMESPACE,
            "labels": {"koordinator.sh/priority-class": "koord-prod"},
        },
        "spec": {
            "nodeName": BUSY,
            "tolerations": [TAINT],
            "containers": [
                {
                    "name": "web",
                    "image": "nginx",
                    "resources": {"requests": {"cpu": f"{WEB_REQUEST[0]}m", "memory": str(WEB_REQUEST[1])}},
                }
            ],
        },
    }


NODE_RESOURCE_CALLS = [
    ("get", "configmaps", []),
    ("list", "configmaps", []),
    ("watch", "configmaps", []),
    ("list", "pods", []),
    ("list", "nodes", []),
    ("watch", "nodes", []),
    ("list", "nodemetrics.slo.koordinator.sh", []),
    ("watch", "nodemetrics.slo.koordinator.sh", []),
    ("patch", "nodemetrics.slo.koordinator.sh", []),
    ("patch", "nodes", ["--subresource=status"]),
    ("create", "events", []),
]


def _manager_can(cp: ControlPlane, calls: list[tuple[str, str, list[str]]] | None = None) -> None:
    """The chart's koord-manager ClusterRole allows every call the node resource controller makes
    (``calls``: verb, resource, extra kubectl arguments)."""
    with koord_manager_role(cp, "coloc-rbac") as user:
        assert_can(cp, user, NODE_RESOURCE_CALLS if calls is None else calls)


@pytest.fixture(scope="module")
def colocation(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalComponent]:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    apply(cp, [_node(BUSY), _node(IDLE)])
    wait_nodes_ready(cp)
    apply(cp, [_web_pod()])
    wait_for(
        lambda: all(cp.read("nodemetric", n) is not None for n in (BUSY, IDLE)),
        60,
        "koord-manager's NodeMetrics of the co-location nodes",
    )
    koordlet = koordlet_simulation(
        cp,
        _load_file(tmp_path_factory.mktemp("colocation")),
        kubeconfig=koordlet_kubeconfig(cp),
        report_interval_seconds=None,
        name="koordlet-coloc",
    )
    koordlet.start()
    try:
        yield koordlet
    finally:
        print(koordlet.stop())
        cp.kubectl("delete", "configmap", CONFIG, "-n", CONFIG_NAMESPACE, "--ignore-not-found")
        cp.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cp.kubectl("delete", "node", BUSY, IDLE, "--ignore-not-found")


def _wait_resources(cp: ControlPlane, node: str, expected: dict[str, int], what: str) -> None:
    want = {"capacity": expected, "allocatable": expected}
    last: list[dict[str, dict[str, int]]] = []

    def matches() -> bool:
        last[:] = [_node_resources(cp, node)]
        return last[0] == want

    try:
        wait_for(matches, 60, what)
    except AssertionError:
        raise AssertionError(f"{what}: wanted {want}, last seen {last}") from None


def test_the_chart_lets_koord_manager_compute_node_resources(control_plane: ControlPlane) -> None:
    _manager_can(control_plane)


def test_batch_and_mid_match_the_formulas(control_plane: ControlPlane, colocation: LocalComponent) -> None:
    cp = control_plane
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(_config_map(json.dumps(COLOCATION))))
    for node in (BUSY, IDLE):
        _wait_resources(cp, node, _expected(node), f"batch and mid resources of {node}")
    # the hand figures, spelled out for BUSY: batch-cpu = 16000 - 6400 - max(500, 1000) - 2000
    assert _expected(BUSY)["kubernetes.io/batch-cpu"] == 6600
    # mid-cpu = min(reclaimable 4000 - 2750, unused 13500) + (16000 - 1000 - 4000) x 50 %
    assert _expected(BUSY)["kubernetes.io/mid-cpu"] == 1250 + 5500
    metric = get_object(cp, "nodemetric", BUSY)["status"]
    assert metric["prodReclaimableMetric"]["resource"]["resources"]["cpu"] == "1250m"
    assert metric["prodPeakMetric"]["resource"]["resources"]["cpu"] == "2750m"
    # nodes outside the co-location pool got nothing
    assert _node_resources(cp, "cpu-0") == {"capacity": {}, "allocatable": {}}


def test_a_batch_pod_binds_on_batch_resources(
    control_plane: ControlPlane, colocation: LocalComponent, scheduler: Scheduler
) -> None:
    cp = control_plane
    _wait_resources(cp, IDLE, _expected(IDLE), "batch resources to schedule on")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "batch-job",
            "namespace": NAMESPACE,
            "labels": {"koordinator.sh/priority-class": "koord-batch", "koordinator.sh/qosClass": "BE"},
        },
        "spec": {
            "schedulerName": "koord-scheduler",
            "tolerations": [TAINT],
            "nodeSelector": {POOL: "colocation"},
            "containers": [
                {
                    "name": "job",
                    "image": "busybox",
                    # limit > request: batch resources are ordinary (kubernetes.io/) extended resources
                    "resources": {
                        "requests": {"kubernetes.io/batch-cpu": "6000", "kubernetes.io/batch-memory": "8Gi"},
                        "limits": {"kubernetes.io/batch-cpu": "8000", "kubernetes.io/batch-memory": "16Gi"},
                    },
                }
            ],
        },
    }
    apply(cp, [pod])

    def bound() -> str | None:
        got = get_object(cp, "pod", "batch-job", namespace=NAMESPACE)
        node: str | None = got["spec"].get("nodeName")
        return node

    assert wait_for(bound, 60, "the batch pod bound") in (BUSY, IDLE)  # 6600 and 8600 batch-cpu
    too_big = json.loads(json.dumps(pod))
    too_big["metadata"]["name"] = "batch-too-big"
    too_big["spec"]["containers"][0]["resources"] = {"requests": {"kubernetes.io/batch-cpu": "9000"}}
    apply(cp, [too_big])

    def unschedulable() -> bool:
        got = get_object(cp, "pod", "batch-too-big", namespace=NAMESPACE)
        conditions = got["status"].get("conditions") or []
        return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)

    wait_for(unschedulable, 60, "the pod asking for more batch-cpu than any node has left pending")


def test_a_bad_config_keeps_the_last_good_resources_and_says_why(
    control_plane: ControlPlane, colocation: LocalComponent
) -> None:
    cp = control_plane
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(_config_map(json.dumps(COLOCATION))))
    _wait_resources(cp, BUSY, _expected(BUSY), "the good config's resources")
    bad = {**COLOCATION, "enable": False, "cpuReclaimThresholdPercent": "sixty"}
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(_config_map(json.dumps(bad))))

    def warning() -> dict[str, Any] | None:
        events = list_items(
            cp,
            "events",
            namespace=CONFIG_NAMESPACE,
            field_selector=f"involvedObject.name={CONFIG},type=Warning",
        )
        return next((e for e in events if e["reason"] == "InvalidColocationConfig"), None)

    event = wait_for(warning, 60, "a Warning event on the ConfigMap")
    assert "colocation-config" in event["message"]
    assert "cpuReclaimThresholdPercent" in event["message"]
    # koordlet reports every second: several reconciles later the good config still holds
    for _ in range(5):
        time.sleep(1)
        assert _node_resources(cp, BUSY) == {"capacity": _expected(BUSY), "allocatable": _expected(BUSY)}


def test_disabling_colocation_removes_the_resources(
    control_plane: ControlPlane, colocation: LocalComponent
) -> None:
    cp = control_plane
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(_config_map(json.dumps(COLOCATION))))
    _wait_resources(cp, IDLE, _expected(IDLE), "the resources before disabling")
    cp.kubectl(
        "apply", "-f", "-", input=yaml.safe_dump(_config_map(json.dumps({**COLOCATION, "enable": False})))
    )
    for node in (BUSY, IDLE):
        _wait_resources(cp, node, {}, f"{node}'s batch and mid resources removed")


def _collect_policy(cp: ControlPlane, node: str) -> dict[str, Any]:
    metric = get_object(cp, "nodemetric", node)
    policy: dict[str, Any] = metric["spec"]["metricCollectPolicy"]
    return policy


def test_node_metrics_take_their_collect_policy_from_the_config(
    control_plane: ControlPlane, colocation: LocalComponent
) -> None:
    """koord-manager writes each node's colocation strategy's metric fields into its NodeMetric (the
    cluster strategy, then the node's colocation-strategy annotation), keeps them through a refused
    key, and writes them back over a hand edit."""
    cp = control_plane
    config = {
        **COLOCATION,
        "metricReportIntervalSeconds": 30,
        "metricAggregateDurationSeconds": 120,
        "metricAggregatePolicy": {"durations": ["1m0s", "5m0s"]},
    }
    wanted = {
        "aggregateDurationSeconds": 120,
        "reportIntervalSeconds": 30,
        "nodeAggregatePolicy": {"durations": ["1m0s", "5m0s"]},
        "nodeMemoryCollectPolicy": "usageWithoutPageCache",
    }
    strategy = 'node.koordinator.sh/colocation-strategy={"metricReportIntervalSeconds": 45}'
    try:
        cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(_config_map(json.dumps(config))))
        cp.kubectl("annotate", "node", IDLE, strategy, "--overwrite")
        wait_for(
            lambda: _collect_policy(cp, BUSY) == wanted, 60, f"{BUSY}'s NodeMetric policy from the config"
        )
        wait_for(
            lambda: _collect_policy(cp, IDLE) == {**wanted, "reportIntervalSeconds": 45},
            60,
            f"{IDLE}'s NodeMetric policy from its annotation",
        )

        bad = {**config, "metricReportIntervalSeconds": -1}
        cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(_config_map(json.dumps(bad))))
        for _ in range(3):
            time.sleep(1)
            assert _collect_policy(cp, BUSY) == wanted

        edit = {"spec": {"metricCollectPolicy": {"reportIntervalSeconds": 600}}}
        cp.kubectl("patch", "nodemetric", BUSY, "--type=merge", "-p", json.dumps(edit))
        wait_for(lambda: _collect_policy(cp, BUSY) == wanted, 60, "the hand-edited NodeMetric written back")
    finally:
        cp.kubectl("annotate", "node", IDLE, "node.koordinator.sh/colocation-strategy-", "--overwrite")
        cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(_config_map(json.dumps(COLOCATION))))
