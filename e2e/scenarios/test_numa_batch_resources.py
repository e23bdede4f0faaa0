"""NUMA-level batch resources end to end: a KWOK node gets a NodeResourceTopology as koordlet writes
it (named after the node, owned by it, zones ``node-0``/``node-1`` with cpu, memory and hugepages)
and a NodeMetric report (written here, standing in for koordlet); koord-manager writes
``kubernetes.io/batch-cpu`` and ``kubernetes.io/batch-memory`` into each zone, keeps the zones'
other resources, and removes its own when co-location is disabled.

The expected figures are computed here from algorithms.md 10.2.3 / 10.2.4 step 4, not by
koord-manager's code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from apis.quantity import Quantity
from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.scenarios.test_colocation_resources import _manager_can
from e2e.workloads import apply, get_object, wait_for

NAMESPACE = "numa-batch-e2e"
CONFIG_NAMESPACE = "koordinator-system"
CONFIG = "slo-controller-config"
NODE = "numa-batch-0"
POOL = "koord-e2e/pool"
TAINT = {"key": POOL, "value": "numa-batch", "effect": "NoSchedule"}
GI = 1024**3
ZONE = (8_000, 32 * GI)  # each of the two zones: milli-cores, bytes
SYSTEM = (1_000, 2 * GI)  # the node's systemUsage
PINNED_USAGE = (2_000, 4 * GI)  # the prod pod bound to NUMA node 0 (requests 4 cores / 8Gi)
UNPINNED_REQUEST = (1_000, 2 * GI)  # a prod pod with no metric yet and no NUMA binding
BATCH = ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory")
COLOCATION = {
    "enable": True,
    "nodeConfigs": [
        {
            "name": "not-numa-batch-e2e",
            "nodeSelector": {
                "matchExpressions": [{"key": POOL, "operator": "NotIn", "values": ["numa-batch"]}]
            },
            "enable": False,
        }
    ],
}


def _expected() -> dict[str, dict[str, int]]:
    """Per zone (usage policy, 60 % / 65 % reclaim): allocatable - margin - max(system, reserved) / 2
    - the HP usage on the zone (the pinned pod's on node-0, half the unpinned pod's request on each)."""
    out = {}
    for zone in ("node-0", "node-1"):
        values = {}
        for i, (name, reclaim) in enumerate(zip(BATCH, (60, 65), strict=True)):
            margin = ZONE[i] * (100 - reclaim) // 100
            used = UNPINNED_REQUEST[i] // 2 + (PINNED_USAGE[i] if zone == "node-0" else 0)
            values[name] = max(ZONE[i] - margin - SYSTEM[i] // 2 - used, 0)
        out[zone] = values
    return out


def _resources(value: tuple[int, int]) -> dict[str, str]:
    return {"cpu": f"{value[0]}m", "memory": str(value[1])}


def _node() -> dict[str, Any]:
    capacity = {**_resources((2 * ZONE[0], 2 * ZONE[1])), "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "labels": {"type": "kwok", "kubernetes.io/hostname": NODE, POOL: "numa-batch"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def _topology(node_uid: str) -> dict[str, Any]:
    """As koordlet writes it (koordlet/topology/nrt.py): zone resources sorted by name."""

    def info(name: str, value: str) -> dict[str, str]:
        return {"name": name, "capacity": value, "allocatable": value, "available": value}

    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {
            "name": NODE,
            "labels": {"app.kubernetes.io/managed-by": "Koordinator"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node_uid, "controller": True}
            ],
        },
        "topologyPolicies": ["None"],
        "zones": [
            {
                "name": f"node-{i}",
                "type": "Node",
                "resources": [
                    info("cpu", str(ZONE[0] // 1000)),
                    info("hugepages-2Mi", "1Gi"),
                    info("memory", str(ZONE[1])),
                ],
            }
            for i in range(2)
        ],
    }


def _pod(name: str, request: tuple[int, int], annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"koordinator.sh/priority-class": "koord-prod"},
            "annotations": annotations,
        },
        "spec": {
            "nodeName": NODE,
            "tolerations": [TAINT],
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": _resources(request)}}],
        },
    }


def _report_metric(cp: ControlPlane) -> None:
    """What koordlet would report: the system's usage and the pinned pod's (the other has none yet)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    used = (SYSTEM[0] + PINNED_USAGE[0], SYSTEM[1] + PINNED_USAGE[1])
    status = {
        "updateTime": now,
        "nodeMetric": {
            "nodeUsage": {"resources": _resources(used)},
            "systemUsage": {"resources": _resources(SYSTEM)},
        },
        "podsMetric": [
            {
                "namespace": NAMESPACE,
                "name": "pinned",
                "podUsage": {"resources": _resources(PINNED_USAGE)},
                "priority": "koord-prod",
            }
        ],
    }
    cp.kubectl(
        "patch",
        "nodemetric",
        NODE,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def _config_map(colocation: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG, "namespace": CONFIG_NAMESPACE},
        "data": {"colocation-config": json.dumps(colocation)},
    }


def _zones(cp: ControlPlane) -> dict[str, dict[str, tuple[int, int, int]]]:
    """Zone -> resource -> (capacity, allocatable, available) as integers (cpu in milli-cores)."""
    nrt = get_object(cp, "noderesourcetopology", NODE)

    def value(name: str, raw: str) -> int:
        q = Quantity.parse(raw)
        return q.milli_value() if name == "cpu" else q.value()

    return {
        zone["name"]: {
            r["name"]: (
                value(r["name"], r["capacity"]),
                value(r["name"], r["allocatable"]),
                value(r["name"], r["available"]),
            )
            for r in zone.get("resources") or ()
        }
        for zone in nrt["zones"]
    }


@pytest.fixture(scope="module")
def numa_node(control_plane: ControlPlane) -> Iterator[None]:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    if cp.read("namespace", CONFIG_NAMESPACE) is None:
        cp.create_namespace(CONFIG_NAMESPACE)
    apply(cp, [_node()])
    wait_nodes_ready(cp)
    wait_for(lambda: cp.read("nodemetric", NODE) is not None, 60, "koord-manager's NodeMetric")
    uid = get_object(cp, "node", NODE)["metadata"]["uid"]
    apply(cp, [_topology(uid)])
    pinned = {"scheduling.koordinator.sh/resource-status": json.dumps({"numaNodeResources": [{"node": 0}]})}
    apply(cp, [_pod("pinned", (4_000, 8 * GI), pinned), _pod("unpinned", UNPINNED_REQUEST, {})])
    try:
        yield
    finally:
        cp.kubectl("delete", "configmap", CONFIG, "-n", CONFIG_NAMESPACE, "--ignore-not-found")
        cp.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cp.kubectl("delete", "node", NODE, "--ignore-not-found")
        cp.kubectl("delete", "noderesourcetopology", NODE, "--ignore-not-found")


def _wait_zones(cp: ControlPlane, expected: dict[str, dict[str, int]], what: str) -> None:
    """Each zone carries exactly ``expected``'s batch resources (capacity = allocatable = available)
    next to koordlet's cpu, memory and hugepages, unchanged."""
    want = {
        zone: {
            "cpu": (ZONE[0],) * 3,
            "hugepages-2Mi": (GI,) * 3,
            "memory": (ZONE[1],) * 3,
            **{name: (v,) * 3 for name, v in values.items()},
        }
        for zone, values in expected.items()
    }
    last: list[Any] = []

    def matches() -> bool:
        last[:] = [_zones(cp)]
        return bool(last[0] == want)

    try:
        wait_for(matches, 60, what)
    except AssertionError:
        raise AssertionError(f"{what}: wanted {want}, last seen {last}") from None


def test_the_chart_lets_koord_manager_update_topologies(control_plane: ControlPlane) -> None:
    _manager_can(
        control_plane,
        [
            ("get", "noderesourcetopologies.topology.node.k8s.io", []),
            ("list", "noderesourcetopologies.topology.node.k8s.io", []),
            ("watch", "noderesourcetopologies.topology.node.k8s.io", []),
            ("update", "noderesourcetopologies.topology.node.k8s.io", []),
        ],
    )


def test_zones_get_batch_resources_by_the_formula_and_lose_them_when_disabled(
    control_plane: ControlPlane, numa_node: None
) -> None:
    cp = control_plane
    _report_metric(cp)
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(_config_map(COLOCATION)))
    expected = _expected()
    # the hand figures: node-0 8000 - 3200 - 500 - (500 + 2000); node-1 8000 - 3200 - 500 - 500
    assert expected["node-0"]["kubernetes.io/batch-cpu"] == 1800
    assert expected["node-1"]["kubernetes.io/batch-cpu"] == 3800
    _wait_zones(cp, expected, "per-zone batch resources")
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(_config_map({**COLOCATION, "enable": False})))
    _wait_zones(cp, {"node-0": {}, "node-1": {}}, "the zones' batch resources removed")
