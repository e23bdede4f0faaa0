"""koordlet's BE eviction on KWOK nodes (koordlet --simulate, with the chart's RBAC).

- Memory: the node's NodeSLO enables resourceUsedThresholdWithBE (set as a user sets it: a
  ``nodeStrategies`` entry of ``slo-controller-config``, rendered by the session's koord-manager),
  its simulated memory usage crosses
  memoryEvictThresholdPercent, and koordlet evicts BE pods through the Eviction API in the
  documented order (lowest priority first, then most memory used) until the release is covered.
- CPU satisfaction: the LS pods leave the BE pods a real limit far below their batch-cpu requests,
  and koordlet evicts BE pods (lowest priority first, then usage per request) until the released
  requests cover ``request x (upper% - satisfaction)``.

LS pods are untouched and each evicted pod gets an event naming the reason."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koordlet_simulation
from e2e.scenarios.test_koordlet import koordlet_kubeconfig
from e2e.scheduler_process import free_port
from e2e.workloads import get_object, list_items, wait_for

MEMORY_NODE, CPU_NODE = "qos-evict-0", "qos-evict-1"
NAMESPACE = "qos-e2e"
METRICS_PORT = free_port()
TAINT = {"key": "koord-e2e/pool", "value": "qos", "effect": "NoSchedule"}
NODE_LABEL = "koord-e2e/qos-node"
SLO_CONFIG = ("configmap", "slo-controller-config", "-n", "koordinator-system")
THRESHOLD_KEY = "resource-threshold-config"


class P:
    """A pod of the scenario: where, its classes, and what the load file says it uses."""

    def __init__(
        self, node: str, qos: str, priority_class: str, cpu: str, memory: str, batch_cpu: int | None = None
    ) -> None:
        self.node, self.qos, self.priority_class = node, qos, priority_class
        self.cpu, self.memory, self.batch_cpu = cpu, memory, batch_cpu


PODS = {
    # 48Gi of 64Gi is 75 %: over the 70 % threshold, release 64Gi x (75 - 68) % = 4.48Gi
    "ls-web": P(MEMORY_NODE, "LS", "qos-e2e-high", "500m", "20Gi"),
    "be-big": P(MEMORY_NODE, "BE", "qos-e2e-high", "500m", "10Gi"),
    "be-small": P(MEMORY_NODE, "BE", "qos-e2e-high", "500m", "4Gi"),
    "be-low": P(MEMORY_NODE, "BE", "qos-e2e-low", "500m", "2Gi"),
    "be-spare": P(MEMORY_NODE, "BE", "qos-e2e-high", "500m", "1Gi"),
    # 16 cores x 65 % - 8 (LS) - 2 (system) leave BE 0.4 cores for 12 cores of batch-cpu requests:
    # satisfaction 0.033 <= 30 %, release 12000 x (0.6 - 0.033) = 6800m
    "ls-api": P(CPU_NODE, "LS", "qos-e2e-high", "8", "4Gi"),
    "batch-a": P(CPU_NODE, "BE", "qos-e2e-low", "1", "1Gi", batch_cpu=6000),
    "batch-b": P(CPU_NODE, "BE", "qos-e2e-low", "1", "1Gi", batch_cpu=4000),
    "batch-keep": P(CPU_NODE, "BE", "qos-e2e-high", "100m", "1Gi", batch_cpu=2000),
}
NODE_USAGE = {MEMORY_NODE: {"cpu": "4", "memory": "48Gi"}, CPU_NODE: {"cpu": "12100m", "memory": "8Gi"}}
SLOS = {
    MEMORY_NODE: {"enable": True, "memoryEvictThresholdPercent": 70},
    CPU_NODE: {
        "enable": True,
        "cpuEvictBESatisfactionLowerPercent": 30,
        "cpuEvictBESatisfactionUpperPercent": 60,
    },
}


def _apply(cp: ControlPlane, *objects: dict[str, Any]) -> None:
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))


def _node(name: str) -> dict[str, Any]:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"type": "kwok", NODE_LABEL: name},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources, "nodeInfo": {"kubeletVersion": "fake"}},
    }


def _pod(name: str, pod: P) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if pod.batch_cpu is not None:
        batch = {"kubernetes.io/batch-cpu": str(pod.batch_cpu)}
        resources = {"requests": batch, "limits": batch}
    elif pod.qos == "LS":
        # Burstable: a pod Kubernetes calls BestEffort counts as BE for suppression, whatever its label
        resources = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"koordinator.sh/qosClass": pod.qos}},
        "spec": {
            "nodeName": pod.node,
            "priorityClassName": pod.priority_class,
            "tolerations": [{**TAINT, "operator": "Equal"}],
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }


def _node_ready(cp: ControlPlane, name: str) -> bool | None:
    found = get_object(cp, "node", name)
    taints = {t["key"] for t in found.get("spec", {}).get("taints") or ()}
    conditions = found.get("status", {}).get("conditions") or ()
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return (ready and not taints & {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) or None


def _pods_json(cp: ControlPlane) -> list[dict[str, Any]]:
    return list_items(cp, "pods", namespace=NAMESPACE)


def _running(cp: ControlPlane) -> set[str]:
    return {
        p["metadata"]["name"] for p in _pods_json(cp) if (p.get("status") or {}).get("phase") == "Running"
    }


def _left(cp: ControlPlane, node: str) -> set[str]:
    return {
        p["metadata"]["name"]
        for p in _pods_json(cp)
        if p["spec"]["nodeName"] == node and not p["metadata"].get("deletionTimestamp")
    }


def _eviction_events(cp: ControlPlane, node: str) -> list[dict[str, Any]]:
    events = list_items(cp, "events", namespace=NAMESPACE)
    on_node = {name for name, pod in PODS.items() if pod.node == node}
    found = [
        e for e in events if e.get("reason") == "evictPodSuccess" and e["involvedObject"]["name"] in on_node
    ]
    return sorted(found, key=lambda e: int(e["metadata"]["resourceVersion"]))


def _config_data(cp: ControlPlane) -> dict[str, str] | None:
    found = cp.read(SLO_CONFIG[0], SLO_CONFIG[1], namespace=SLO_CONFIG[3])
    if found is None:
        return None
    data: dict[str, str] = found.get("data") or {}
    return data


def _enable_thresholds(cp: ControlPlane, node: str) -> None:
    """Add a ``nodeStrategies`` entry for ``node`` to slo-controller-config's threshold key: the
    session's koord-manager renders every NodeSLO from it (a NodeSLO written by hand is put back),
    and koordlet acts on the rendered one. The cluster strategy stays off, so no other node is
    touched."""
    data = _config_data(cp)
    if data is None:
        cp.kubectl("create", *SLO_CONFIG[:2], *SLO_CONFIG[2:])
        data = {}
    current = json.loads(data.get(THRESHOLD_KEY) or "{}")
    entries = [e for e in current.get("nodeStrategies") or () if e.get("name") != node]
    entries.append({"name": node, "nodeSelector": {"matchLabels": {NODE_LABEL: node}}, **SLOS[node]})
    value = json.dumps({"clusterStrategy": {"enable": False}, "nodeStrategies": entries})
    cp.kubectl("patch", *SLO_CONFIG, "--type=merge", "-p", json.dumps({"data": {THRESHOLD_KEY: value}}))
    wait_for(
        lambda: _rendered_threshold(cp, node) == SLOS[node] or None,
        60,
        f"koord-manager rendering {node}'s NodeSLO from slo-controller-config",
        1.0,
    )


def _rendered_threshold(cp: ControlPlane, node: str) -> dict[str, Any] | None:
    found = cp.read("nodeslo", node)
    if found is None:
        return None
    threshold: dict[str, Any] = (found.get("spec") or {}).get("resourceUsedThresholdWithBE") or {}
    return {k: threshold.get(k) for k in SLOS[node]}


@pytest.fixture(scope="module")
def evicting_koordlet(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalComponent]:
    cp = control_plane
    saved = (_config_data(cp) or {}).get(THRESHOLD_KEY)
    _apply(cp, _node(MEMORY_NODE), _node(CPU_NODE))
    # kube-controller-manager taints a new node not-ready (NoExecute) until KWOK reports it Ready
    both = (MEMORY_NODE, CPU_NODE)
    wait_for(lambda: all(_node_ready(cp, n) for n in both) or None, 120, "the nodes ready and untainted", 1.0)
    if cp.read("namespace", NAMESPACE) is None:
        cp.create_namespace(NAMESPACE)
    classes = (("qos-e2e-low", 1000), ("qos-e2e-high", 2000))
    _apply(
        cp,
        *(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": n},
                "value": v,
            }
            for n, v in classes
        ),
    )
    _apply(cp, *(_pod(name, pod) for name, pod in PODS.items()))
    wait_for(lambda: _running(cp) == set(PODS) or None, 60, "the pods running on the KWOK nodes", 1.0)
    load = {
        "nodes": [
            {
                "name": node,
                "usage": usage,
                "pods": [
                    {"namespace": NAMESPACE, "name": name, "usage": {"cpu": pod.cpu, "memory": pod.memory}}
                    for name, pod in PODS.items()
                    if pod.node == node
                ],
            }
            for node, usage in NODE_USAGE.items()
        ]
    }
    path = tmp_path_factory.mktemp("koordlet-qos") / "load.yaml"
    path.write_text(yaml.safe_dump(load))
    component = koordlet_simulation(
        cp,
        path,
        kubeconfig=koordlet_kubeconfig(cp),
        metrics_port=METRICS_PORT,
        name="koordlet-qos",
        extra_args=("--feature-gates", "BEMemoryEvict=true,BECPUEvict=true"),
    )
    component.start()
    try:
        yield component
    finally:
        print(component.stop())
        cp.run_kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        for node in (MEMORY_NODE, CPU_NODE):
            cp.run_kubectl("delete", "node", node, "--wait=false")
        if _config_data(cp) is not None:
            restore = {"data": {THRESHOLD_KEY: saved}}  # None removes the key
            cp.run_kubectl("patch", *SLO_CONFIG, "--type=merge", "-p", json.dumps(restore))
        cp.run_kubectl("delete", "priorityclass", "qos-e2e-low", "qos-e2e-high", "--ignore-not-found")


def _metrics() -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as response:
        text: str = response.read().decode()
    return text


def test_be_pods_evicted_by_node_memory_usage_in_order(
    control_plane: ControlPlane, evicting_koordlet: LocalComponent
) -> None:
    cp = control_plane
    _enable_thresholds(cp, MEMORY_NODE)
    events = wait_for(
        lambda: e if len(e := _eviction_events(cp, MEMORY_NODE)) >= 2 else None, 60, "two eviction events"
    )
    # be-low (lowest priority, 2Gi) does not cover 4.48Gi, be-big (10Gi, the most memory) does
    assert [e["involvedObject"]["name"] for e in events] == ["be-low", "be-big"]
    for event in events:
        assert event["type"] == "Warning"
        assert "reason: EvictPodByNodeMemoryUsage" in event["message"]
        assert "need to release memory: 4810363371" in event["message"]
        assert event["source"]["component"] == "koordlet"
    wait_for(
        lambda: _left(cp, MEMORY_NODE) == {"ls-web", "be-small", "be-spare"} or None,
        60,
        "only the evicted pods gone",
    )
    # the evicted pods' memory left the node (36Gi, 56 %): nothing more is evicted
    assert [e["involvedObject"]["name"] for e in _eviction_events(cp, MEMORY_NODE)] == ["be-low", "be-big"]
    assert (
        f'koordlet_pod_eviction_total{{node="{MEMORY_NODE}",reason="EvictPodByNodeMemoryUsage"}} 2.0'
        in _metrics()
    )


def test_be_pods_evicted_by_cpu_satisfaction(
    control_plane: ControlPlane, evicting_koordlet: LocalComponent
) -> None:
    cp = control_plane
    _enable_thresholds(cp, CPU_NODE)
    events = wait_for(
        lambda: e if len(e := _eviction_events(cp, CPU_NODE)) >= 2 else None, 60, "two eviction events"
    )
    # lowest priority first; among them batch-b uses more per request (1/4 against 1/6); their
    # 10000m of requests cover the 6800m, so batch-keep (higher priority) stays
    assert [e["involvedObject"]["name"] for e in events] == ["batch-b", "batch-a"]
    for event in events:
        assert "reason: EvictPodByBECPUSatisfaction" in event["message"]
    wait_for(
        lambda: _left(cp, CPU_NODE) == {"ls-api", "batch-keep"} or None, 60, "only the evicted pods gone"
    )
    assert (
        f'koordlet_pod_eviction_total{{node="{CPU_NODE}",reason="EvictPodByBECPUSatisfaction"}} 2.0'
        in _metrics()
    )
