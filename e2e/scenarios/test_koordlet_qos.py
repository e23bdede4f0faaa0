"""koordlet's BE memory eviction on a KWOK node (koordlet --simulate): the node's NodeSLO enables
resourceUsedThresholdWithBE, its simulated memory usage crosses memoryEvictThresholdPercent, and
koordlet evicts BE pods through the Eviction API in the documented order (lowest priority first,
then most memory used) until the release is covered; LS pods are untouched and each evicted pod
gets an event naming the reason. koordlet runs with the chart's RBAC."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koordlet_simulation
from e2e.scenarios.test_koordlet import koordlet_kubeconfig
from e2e.workloads import wait_for

NODE = "qos-evict-0"
NAMESPACE = "qos-e2e"
TAINT = {"key": "koord-e2e/pool", "value": "qos", "effect": "NoSchedule"}
# name -> (koordinator QoS class, priority class, simulated memory use)
PODS = {
    "ls-web": ("LS", "qos-e2e-high", "20Gi"),
    "be-big": ("BE", "qos-e2e-high", "10Gi"),
    "be-small": ("BE", "qos-e2e-high", "4Gi"),
    "be-low": ("BE", "qos-e2e-low", "2Gi"),
    "be-spare": ("BE", "qos-e2e-high", "1Gi"),
}


def _apply(cp: ControlPlane, *objects: dict[str, Any]) -> None:
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))


def _node() -> dict[str, Any]:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": {"type": "kwok"}},
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources, "nodeInfo": {"kubeletVersion": "fake"}},
    }


def _pod(name: str, qos: str, priority_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {
            "nodeName": NODE,
            "priorityClassName": priority_class,
            "tolerations": [{**TAINT, "operator": "Equal"}],
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }


@pytest.fixture(scope="module")
def evicting_koordlet(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalComponent]:
    cp = control_plane
    _apply(cp, _node())
    if cp.run_kubectl("get", "namespace", NAMESPACE).returncode != 0:
        cp.create_namespace(NAMESPACE)
    _apply(
        cp,
        *(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
            for name, value in (("qos-e2e-low", 1000), ("qos-e2e-high", 2000))
        ),
    )
    _apply(cp, *(_pod(name, qos, pc) for name, (qos, pc, _) in PODS.items()))
    wait_for(lambda: _running(cp) == set(PODS) or None, 60, "the pods running on the KWOK node", 1.0)
    # 48Gi of 64Gi is 75 %: over the 70 % threshold, release 64Gi x (75 - 68) % = 4.48Gi
    load = {
        "nodes": [
            {
                "name": NODE,
                "usage": {"cpu": "4", "memory": "48Gi"},
                "pods": [
                    {"namespace": NAMESPACE, "name": name, "usage": {"cpu": "500m", "memory": memory}}
                    for name, (_, _, memory) in PODS.items()
                ],
            }
        ]
    }
    path = tmp_path_factory.mktemp("koordlet-qos") / "load.yaml"
    path.write_text(yaml.safe_dump(load))
    component = koordlet_simulation(
        cp,
        path,
        kubeconfig=koordlet_kubeconfig(cp),
        name="koordlet-qos",
        extra_args=("--feature-gates", "BEMemoryEvict=true"),
    )
    component.start()
    try:
        yield component
    finally:
        print(component.stop())
        cp.run_kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cp.run_kubectl("delete", "node", NODE, "--wait=false")
        cp.run_kubectl("delete", "nodeslo", NODE, "--ignore-not-found")
        cp.run_kubectl("delete", "priorityclass", "qos-e2e-low", "qos-e2e-high", "--ignore-not-found")


def _running(cp: ControlPlane) -> set[str]:
    return {
        p["metadata"]["name"] for p in _pods_json(cp) if (p.get("status") or {}).get("phase") == "Running"
    }


def _pods_json(cp: ControlPlane) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(cp.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json"))[
        "items"
    ]
    return items


def _eviction_events(cp: ControlPlane) -> list[dict[str, Any]]:
    events = json.loads(cp.kubectl("get", "events", "-n", NAMESPACE, "-o", "json"))["items"]
    found = [e for e in events if e.get("reason") == "evictPodSuccess"]
    return sorted(found, key=lambda e: int(e["metadata"]["resourceVersion"]))


def test_be_pods_evicted_by_node_memory_usage_in_order(
    control_plane: ControlPlane, evicting_koordlet: LocalComponent
) -> None:
    cp = control_plane
    slo = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": NODE},
        "spec": {"resourceUsedThresholdWithBE": {"enable": True, "memoryEvictThresholdPercent": 70}},
    }
    _apply(cp, slo)
    events = wait_for(lambda: e if len(e := _eviction_events(cp)) >= 2 else None, 60, "two eviction events")
    # be-low (lowest priority, 2Gi) does not cover 4.48Gi, be-big (10Gi, the most memory) does
    assert [e["involvedObject"]["name"] for e in events] == ["be-low", "be-big"]
    for event in events:
        assert event["type"] == "Warning"
        assert "reason: EvictPodByNodeMemoryUsage" in event["message"]
        assert "need to release memory: 4810363371" in event["message"]
        assert event["source"]["component"] == "koordlet"

    def settled() -> set[str] | None:
        left = {p["metadata"]["name"] for p in _pods_json(cp) if not p["metadata"].get("deletionTimestamp")}
        return left if left == {"ls-web", "be-small", "be-spare"} else None

    wait_for(settled, 60, "only the evicted pods gone")
    # the evicted pods' memory left the node (36Gi, 56 %): nothing more is evicted
    assert [e["involvedObject"]["name"] for e in _eviction_events(cp)] == ["be-low", "be-big"]
