"""NUMA-aware scheduling on the real API server: koordlet (``--simulate``, the file backend for KWOK
nodes) writes each node's NodeResourceTopology, koord-scheduler's NodeNUMAResource places pods on
NUMA nodes and CPUs and writes them into ``scheduling.koordinator.sh/resource-status``.

Three tainted fake nodes of the issue's shape, 2 sockets x 2 NUMA nodes x 8 cores x 2 threads
(NUMA node n = cores 8n..8n+7 = CPUs 8n..8n+7 and their siblings 32+8n..32+8n+7):

- ``numa-e2e-single``: labelled SingleNUMANode;
- ``numa-e2e-gpu``: no label, but its kubelet's topology manager is ``restricted`` at pod scope
  (koordlet reports ``RestrictedPodLevel``, which the scheduler takes as Restricted), and two GPUs
  on NUMA node 1 in a Device created with kubectl;
- ``numa-e2e-static``: a static CPU manager with ``full-pcpus-only`` reserving 2 CPUs;
- ``numa-e2e-reserve``: no policy, for a Reservation holding CPUs;
- ``numa-e2e-best``: labelled BestEffort;
- ``numa-e2e-gang-0`` and ``numa-e2e-gang-1``: labelled SingleNUMANode, one socket of 2 NUMA nodes
  x 8 cores x 2 threads (32 CPUs), for a gang.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import yaml

from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED
from apis.extension.numa import ANNOTATION_RESOURCE_SPEC, ANNOTATION_RESOURCE_STATUS
from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koordlet_simulation
from e2e.scenarios.test_koordlet import koordlet_kubeconfig
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, failed_scheduling, get_object, make_pod, pods, wait_for
from scheduler.plugins.node_numa_resource.cpu_topology import CPUSet

NAMESPACE = "numa"
SINGLE, GPU, STATIC, RESERVE = "numa-e2e-single", "numa-e2e-gpu", "numa-e2e-static", "numa-e2e-reserve"
BEST = "numa-e2e-best"
GANG_NODES = ("numa-e2e-gang-0", "numa-e2e-gang-1")
GANG_POOL = {"numa-e2e-pool": "gang"}
SINGLE_NUMA_LABEL = "node.koordinator.sh/numa-topology-policy"
POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
TAINT = {"key": "koord-e2e/pool", "value": "numa", "effect": "NoSchedule"}
MACHINE = {
    "sockets": 2,
    "numaNodesPerSocket": 2,
    "coresPerNUMANode": 8,
    "threadsPerCore": 2,
    "memoryPerNUMANode": "64Gi",
}
TOPOLOGIES = {
    SINGLE: MACHINE,
    GPU: {**MACHINE, "kubelet": {"topologyManagerPolicy": "restricted", "topologyManagerScope": "pod"}},
    STATIC: {
        **MACHINE,
        "kubelet": {
            "cpuManagerPolicy": "static",
            "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
            "kubeReserved": {"cpu": "2"},
        },
    },
    RESERVE: MACHINE,
    BEST: MACHINE,
    **{name: {**MACHINE, "sockets": 1} for name in GANG_NODES},
}


def _node(name: str, labels: dict[str, str] | None = None, gpus: int = 0, sockets: int = 2) -> dict[str, Any]:
    resources = {"cpu": str(32 * sockets), "memory": f"{128 * sockets}Gi", "pods": "110"}
    if gpus:
        resources.update(
            {
                "nvidia.com/gpu": str(gpus),
                "koordinator.sh/gpu-core": str(100 * gpus),
                "koordinator.sh/gpu-memory-ratio": str(100 * gpus),
                "koordinator.sh/gpu-memory": f"{80 * gpus}Gi",
            }
        )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "node-type": name, **(labels or {})},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _device() -> dict[str, Any]:
    """Two GPUs, both on NUMA node 1 (socket 0), as the device e2e tests write Devices."""
    cards = [
        {
            "type": "gpu",
            "minor": minor,
            "id": f"GPU-numa-{minor}",
            "health": True,
            "resources": {
                "koordinator.sh/gpu-core": "100",
                "koordinator.sh/gpu-memory": "80Gi",
                "koordinator.sh/gpu-memory-ratio": "100",
            },
            "topology": {"socketID": 0, "nodeID": 1, "pcieID": "pci1"},
        }
        for minor in range(2)
    ]
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": GPU},
        "spec": {"devices": cards},
    }


def _nrt(cp: ControlPlane, name: str) -> dict[str, Any] | None:
    return cp.read("noderesourcetopologies.topology.node.k8s.io", name)


@pytest.fixture(scope="module")
def numa_nodes(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalComponent]:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    apply(
        cp,
        [
            _node(SINGLE, {"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"}),
            _node(GPU, gpus=2),
            _node(STATIC),
            _node(RESERVE),
            _node(BEST, {"node.koordinator.sh/numa-topology-policy": "BestEffort"}),
            *(
                _node(
                    name,
                    {"node.koordinator.sh/numa-topology-policy": "SingleNUMANode", **GANG_POOL},
                    sockets=1,
                )
                for name in GANG_NODES
            ),
            _device(),
        ],
    )
    wait_nodes_ready(cp)
    load = {"nodes": [{"name": name, "topology": topology} for name, topology in TOPOLOGIES.items()]}
    path = tmp_path_factory.mktemp("numa") / "load.yaml"
    path.write_text(yaml.safe_dump(load))
    koordlet = koordlet_simulation(
        cp,
        path,
        kubeconfig=koordlet_kubeconfig(cp),
        name="koordlet-numa",
        extra_args=("--topology-interval-seconds", "0.5"),
    )
    koordlet.start()
    try:
        for name in TOPOLOGIES:
            wait_for(partial(_nrt, cp, name), 60, f"koordlet's NodeResourceTopology of {name}")
        yield koordlet
    finally:
        print(koordlet.stop())
        cp.run_kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cp.run_kubectl("delete", "node", *TOPOLOGIES, "--ignore-not-found", "--wait=false")
        cp.run_kubectl("delete", "device", GPU, "--ignore-not-found", "--wait=false")
        cp.run_kubectl("delete", "reservation", "numa-e2e-cpus", "--ignore-not-found", "--wait=false")
        cp.run_kubectl(
            "delete", "podgroup", "-n", NAMESPACE, "numa-gang", "--ignore-not-found", "--wait=false"
        )


def _pod(
    name: str,
    node: str,
    cpu: str,
    *,
    qos: str = "LSR",
    extra: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return make_pod(
        name,
        NAMESPACE,
        cpu=cpu,
        memory="1Gi",
        extra=extra,
        node_selector={"node-type": node},
        tolerations=[TAINT],
        labels={"koordinator.sh/qosClass": qos},
        annotations=annotations,
    )


def _bound(cp: ControlPlane, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        for pod in pods(cp, NAMESPACE):
            if pod["metadata"]["name"] == name and pod["spec"].get("nodeName"):
                return pod
        return None

    return wait_for(check, timeout=60, what=f"{name} bound")


def _status(pod: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(pod["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS])
    return value


def test_single_numa_node_pods_get_one_numa_node_and_real_cpus(
    control_plane: ControlPlane, scheduler: Scheduler, numa_nodes: LocalComponent
) -> None:
    cp = control_plane
    apply(cp, [_pod("single-a", SINGLE, "4")])
    # Four idle NUMA nodes score alike: NUMA 0, whole cores 0 and 1 (FullPCPUs by default).
    assert _status(_bound(cp, "single-a")) == {
        "cpuset": "0-1,32-33",
        "numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "1Gi"}}],
    }
    required = {ANNOTATION_RESOURCE_SPEC: json.dumps({"requiredCPUBindPolicy": "FullPCPUs"})}
    apply(cp, [_pod("single-b", SINGLE, "6", annotations=required)])
    # LeastAllocated (the default numaScoringStrategy): the emptier NUMA node 1, cores 8-10 whole.
    assert _status(_bound(cp, "single-b")) == {
        "cpuset": "8-10,40-42",
        "numaNodeResources": [{"node": 1, "resources": {"cpu": "6", "memory": "1Gi"}}],
    }

    # 20 CPUs: no NUMA node has them; the pod stays pending, saying which policy.
    apply(cp, [_pod("single-big", SINGLE, "20")])
    messages = wait_for(
        lambda: [m for m in failed_scheduling(cp, NAMESPACE, "single-big") if "SingleNUMANode" in m],
        timeout=60,
        what="FailedScheduling for single-big naming the policy",
    )
    assert "node(s) cannot satisfy SingleNUMANode policy: Unsatisfied NUMA cpu" in messages[-1], messages[-1]


def test_gpu_and_cpus_share_a_numa_node_under_the_kubelets_restricted_policy(
    control_plane: ControlPlane, scheduler: Scheduler, numa_nodes: LocalComponent
) -> None:
    """Both GPUs hang off NUMA node 1: the pod's CPUs go there too (without the GPU they would go to
    NUMA node 0), and its card is one of them."""
    cp = control_plane
    assert (_nrt(cp, GPU) or {}).get("topologyPolicies") == ["RestrictedPodLevel"]
    apply(cp, [_pod("gpu-cpu", GPU, "4", extra={"nvidia.com/gpu": "1"})])
    pod = _bound(cp, "gpu-cpu")
    assert _status(pod) == {
        "cpuset": "8-9,40-41",
        "numaNodeResources": [{"node": 1, "resources": {"cpu": "4", "memory": "1Gi"}}],
    }
    cards = json.loads(pod["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED])["gpu"]
    assert [card["minor"] for card in cards] == [0]


def test_a_full_pcpus_only_kubelet_gives_even_an_ls_pod_whole_cores(
    control_plane: ControlPlane, scheduler: Scheduler, numa_nodes: LocalComponent
) -> None:
    """The kubelet reserves CPUs 0 and 32 (reported in the NRT): never handed out. An LS pod of 2 CPUs
    is bound to a whole core under full-pcpus-only: the emptiest NUMA node and socket (LeastAllocated:
    NUMA 2 on socket 1, core 16), and its implicit required policy is written back."""
    cp = control_plane
    policy = json.loads(
        (_nrt(cp, STATIC) or {})["metadata"]["annotations"]["kubelet.koordinator.sh/cpu-manager-policy"]
    )
    assert policy["reservedCPUs"] == "0,32"
    apply(cp, [_pod("ls-static", STATIC, "2", qos="LS")])
    pod = _bound(cp, "ls-static")
    assert _status(pod)["cpuset"] == "16,48"
    assert json.loads(pod["metadata"]["annotations"][ANNOTATION_RESOURCE_SPEC]) == {
        "requiredCPUBindPolicy": "FullPCPUs"
    }


RESERVATION = f"""
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata:
  name: numa-e2e-cpus
spec:
  template:
    metadata:
      namespace: {NAMESPACE}
      labels: {{koordinator.sh/qosClass: LSR}}
    spec:
      schedulerName: koord-scheduler
      nodeSelector: {{node-type: {RESERVE}}}
      tolerations: [{json.dumps(TAINT)}]
      containers:
      - name: main
        resources:
          requests: {{cpu: "4", memory: 1Gi}}
  owners:
  - labelSelector:
      matchLabels: {{app: numa-owner}}
  ttl: 1h
"""


def test_a_reservation_holds_real_cpus_for_its_owner(
    control_plane: ControlPlane, scheduler: Scheduler, numa_nodes: LocalComponent
) -> None:
    """The Reservation of an LSR template gets NUMA node 0's cores 0-1, written on the Reservation. A
    stranger never gets them (LeastAllocated would otherwise give it those very cores: it goes to
    NUMA node 2, the emptiest on the emptier socket); the owner gets them."""
    cp = control_plane
    cp.kubectl("apply", "-f", "-", input=RESERVATION)

    def reserved() -> dict[str, Any] | None:
        found = get_object(cp, "reservation", "numa-e2e-cpus")
        annotations = found["metadata"].get("annotations") or {}
        return (
            json.loads(annotations[ANNOTATION_RESOURCE_STATUS])
            if ANNOTATION_RESOURCE_STATUS in annotations
            else None
        )

    status = wait_for(reserved, timeout=60, what="the Reservation's resource-status")
    assert status["cpuset"] == "0-1,32-33"
    apply(cp, [_pod("stranger", RESERVE, "4")])
    assert _status(_bound(cp, "stranger"))["cpuset"] == "16-17,48-49"
    owner = _pod("owner", RESERVE, "4")
    owner["metadata"]["labels"]["app"] = "numa-owner"
    apply(cp, [owner])
    assert _status(_bound(cp, "owner"))["cpuset"] == "0-1,32-33"


def test_best_effort_takes_the_narrowest_numa_nodes_that_hold_the_pod(
    control_plane: ControlPlane, scheduler: Scheduler, numa_nodes: LocalComponent
) -> None:
    """20 CPUs of an LS pod (no cpuset): no NUMA node holds them, two do: NUMA nodes 0 and 1, 10 CPUs
    and half the memory each, as Koordinator splits them. Then 40 CPUs: only all four NUMA nodes
    together have them free (6 + 6 + 16 + 16)."""
    cp = control_plane
    apply(cp, [_pod("best-20", BEST, "20", qos="LS")])
    assert _status(_bound(cp, "best-20")) == {
        "numaNodeResources": [
            {"node": 0, "resources": {"cpu": "10", "memory": "512Mi"}},
            {"node": 1, "resources": {"cpu": "10", "memory": "512Mi"}},
        ]
    }
    apply(cp, [_pod("best-40", BEST, "40", qos="LS")])
    assert [e["node"] for e in _status(_bound(cp, "best-40"))["numaNodeResources"]] == [0, 1, 2, 3]


def test_a_single_numa_node_gang_binds_whole_each_member_in_one_numa_node(
    control_plane: ControlPlane, scheduler: Scheduler, numa_nodes: LocalComponent
) -> None:
    """Four members of 10 CPUs on two nodes of 2 NUMA nodes x 16 CPUs: by their 32 CPUs a node takes
    3, by NUMA node 2. The gang is planned by NUMA room (NodeNUMAResource's member room), so it
    binds whole, two members a node, each in a NUMA node of its own."""
    cp = control_plane
    members = [f"gang-{i}" for i in range(4)]
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "numa-gang", "namespace": NAMESPACE},
        "spec": {"minMember": len(members)},
    }
    apply(
        cp,
        [
            group,
            *(
                make_pod(
                    name,
                    NAMESPACE,
                    cpu="10",
                    memory="1Gi",
                    node_selector=GANG_POOL,
                    tolerations=[TAINT],
                    labels={
                        "koordinator.sh/qosClass": "LSR",
                        "pod-group.scheduling.sigs.k8s.io": "numa-gang",
                    },
                )
                for name in members
            ),
        ],
    )
    placed = {name: _bound(cp, name) for name in members}
    assert sorted(pod["spec"]["nodeName"] for pod in placed.values()) == sorted(GANG_NODES * 2)
    numa = {}
    for name, pod in placed.items():
        status = _status(pod)
        assert [entry["node"] for entry in status["numaNodeResources"]] in ([0], [1]), (name, status)
        assert len(CPUSet.parse(status["cpuset"])) == 10
        numa[name] = (pod["spec"]["nodeName"], status["numaNodeResources"][0]["node"])
    assert len(set(numa.values())) == len(members), numa
    assert not [m for name in members for m in failed_scheduling(cp, NAMESPACE, name)]
