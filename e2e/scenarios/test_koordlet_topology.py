"""koordlet in simulation mode writes the NodeResourceTopology of KWOK nodes from its load file, with
the permissions the chart grants koordlet: zones, the cpu-topology annotation and the kubelet's
topology policy as a host of that shape would give, owned by the node (and gone with it), and the
shared pools following a pod's resource-status cpuset."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from apis.extension.numa import get_cpu_topology
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koordlet_simulation
from e2e.scenarios.test_koordlet import koordlet_kubeconfig
from e2e.workloads import get_object, list_items, wait_for
from koordlet.simulate.topology_spec import NodeTopologySpec

BIG, SMALL = "nrt-e2e-0", "nrt-e2e-1"
BIG_TOPOLOGY = {
    "sockets": 2,
    "numaNodesPerSocket": 2,
    "coresPerNUMANode": 8,
    "threadsPerCore": 2,
    "memoryPerNUMANode": "64Gi",
    "cpuModel": "Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz",
    "kubelet": {
        "cpuManagerPolicy": "static",
        "kubeReserved": {"cpu": "2"},
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "pod",
    },
}
SMALL_TOPOLOGY = {"coresPerNUMANode": 4, "threadsPerCore": 1, "memoryPerNUMANode": "16Gi"}
POOLS = "node.koordinator.sh/cpu-shared-pools"


def _node(name: str, cpu: str, allocatable_cpu: str, memory: str, allocatable_memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "node.koordinator.sh/enable-numa-reservation": "true"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "allocatable": {"cpu": allocatable_cpu, "memory": allocatable_memory, "pods": "110"},
        },
    }


def nrt(cp: ControlPlane, name: str) -> dict[str, Any] | None:
    return cp.read("noderesourcetopologies.topology.node.k8s.io", name)


def pools(cp: ControlPlane, name: str) -> list[dict[str, Any]] | None:
    found = nrt(cp, name)
    annotations = (found or {}).get("metadata", {}).get("annotations") or {}
    return json.loads(annotations[POOLS]) if POOLS in annotations else None


@pytest.fixture(scope="module")
def simulation(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalComponent]:
    for node in (_node(BIG, "64", "62", "256Gi", "252Gi"), _node(SMALL, "4", "4", "16Gi", "16Gi")):
        control_plane.kubectl("apply", "-f", "-", input=json.dumps(node))
    load = {"nodes": [{"name": BIG, "topology": BIG_TOPOLOGY}, {"name": SMALL, "topology": SMALL_TOPOLOGY}]}
    path = tmp_path_factory.mktemp("koordlet-topology") / "load.yaml"
    path.write_text(yaml.safe_dump(load))
    component = koordlet_simulation(
        control_plane,
        path,
        kubeconfig=koordlet_kubeconfig(control_plane),
        name="koordlet-topology-simulation",
        extra_args=("--topology-interval-seconds", "0.5"),
    )
    component.start()
    try:
        yield component
    finally:
        print(component.stop())
        control_plane.run_kubectl("delete", "pod", "nrt-e2e-lse", "--ignore-not-found", "--wait=false")
        control_plane.run_kubectl("delete", "node", BIG, SMALL, "--ignore-not-found")


def test_koordlet_writes_the_nrt_of_each_simulated_node(
    control_plane: ControlPlane, simulation: LocalComponent
) -> None:
    big = wait_for(lambda: nrt(control_plane, BIG), 60, f"the NodeResourceTopology of {BIG}")
    node_uid = get_object(control_plane, "node", BIG)["metadata"]["uid"]
    assert big["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": BIG,
            "uid": node_uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert big["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "Koordinator",
        "node.koordinator.sh/enable-numa-reservation": "true",
    }
    assert big["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    # kubelet reserves 2 of 64 CPUs and 4Gi: ceil of a quarter each comes off every zone's allocatable
    zone = {
        "type": "Node",
        "resources": [
            {"name": "cpu", "capacity": "16", "allocatable": "15500m", "available": "15500m"},
            {"name": "hugepages-1Gi", "capacity": "0", "allocatable": "0", "available": "0"},
            {"name": "hugepages-2Mi", "capacity": "0", "allocatable": "0", "available": "0"},
            {"name": "memory", "capacity": "64Gi", "allocatable": "63Gi", "available": "63Gi"},
        ],
    }
    assert big["zones"] == [{"name": f"node-{i}", **zone} for i in range(4)]
    annotations = big["metadata"]["annotations"]
    expected = NodeTopologySpec.model_validate(BIG_TOPOLOGY).host().cpus
    assert tuple(get_cpu_topology(annotations).detail or ()) == expected
    detail = json.loads(annotations["node.koordinator.sh/cpu-topology"])["detail"]
    assert detail[31:34] == [
        {"id": 31, "core": 31, "socket": 1, "node": 3},
        {"id": 32, "core": 0, "socket": 0, "node": 0},
        {"id": 33, "core": 1, "socket": 0, "node": 0},
    ]
    assert json.loads(annotations["kubelet.koordinator.sh/cpu-manager-policy"]) == {
        "policy": "static",
        "reservedCPUs": "0,32",
    }
    assert json.loads(annotations["node.koordinator.sh/cpu-basic-info"]) == {
        "cpuModel": "Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz",
        "hyperThreadEnabled": True,
    }
    small = wait_for(lambda: nrt(control_plane, SMALL), 30, f"the NodeResourceTopology of {SMALL}")
    assert small["topologyPolicies"] == ["None"]
    assert [z["name"] for z in small["zones"]] == ["node-0"]
    assert json.loads(small["metadata"]["annotations"][POOLS]) == [{"socket": 0, "node": 0, "cpuset": "0-3"}]


def test_a_pods_resource_status_cpuset_shows_in_the_shared_pools(
    control_plane: ControlPlane, simulation: LocalComponent
) -> None:
    wait_for(lambda: pools(control_plane, BIG), 60, f"the pools of {BIG}")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "nrt-e2e-lse",
            "namespace": "default",
            "labels": {"koordinator.sh/qosClass": "LSE"},
            "annotations": {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": "0-3"})},
        },
        "spec": {"nodeName": BIG, "containers": [{"name": "app", "image": "fake"}]},
    }
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(pod))

    def first_pools(expected: list[str]) -> list[dict[str, Any]] | None:
        found = pools(control_plane, BIG) or []
        return found if [p.get("cpuset") for p in found[:2]] == expected else None

    wait_for(lambda: first_pools(["4-7,32-39", "8-15,40-47"]), 30, "CPUs 0-3 out of NUMA node 0's pool")
    control_plane.kubectl(
        "annotate",
        "pod",
        "nrt-e2e-lse",
        "--overwrite",
        "scheduling.koordinator.sh/resource-status=" + json.dumps({"cpuset": "8-9,40-41"}),
    )
    moved = wait_for(
        lambda: first_pools(["0-7,32-39", "10-15,42-47"]), 30, "the pools following the new cpuset"
    )
    assert [(p["socket"], p["node"]) for p in moved] == [(0, 0), (0, 1), (1, 2), (1, 3)]
    annotations = (nrt(control_plane, BIG) or {})["metadata"]["annotations"]
    be = json.loads(annotations["node.koordinator.sh/be-cpu-shared-pools"])
    assert be[1]["cpuset"] == "10-15,42-47"  # an LSE cpuset is not shared with BE pods either


def test_a_malformed_resource_status_is_a_warning_event_on_the_pod(
    control_plane: ControlPlane, simulation: LocalComponent
) -> None:
    wait_for(lambda: pools(control_plane, BIG), 60, f"the pools of {BIG}")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "nrt-e2e-bad",
            "namespace": "default",
            "labels": {"koordinator.sh/qosClass": "LSR"},
            "annotations": {"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-x"}'},
        },
        "spec": {"nodeName": BIG, "containers": [{"name": "app", "image": "fake"}]},
    }
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(pod))
    try:

        def event() -> dict[str, Any] | None:
            listed = list_items(control_plane, "events", field_selector="involvedObject.name=nrt-e2e-bad")
            return next((e for e in listed if e["reason"] == "InvalidResourceStatus"), None)

        found = wait_for(event, 30, "a Warning event on the pod")
        assert found["type"] == "Warning"
        assert found["source"]["component"] == "koordlet"
        assert "scheduling.koordinator.sh/resource-status" in found["message"]
        assert "'0-x'" in found["message"]
    finally:
        control_plane.run_kubectl("delete", "pod", "nrt-e2e-bad", "--wait=false")


def test_the_nrt_goes_with_its_node(control_plane: ControlPlane, simulation: LocalComponent) -> None:
    wait_for(lambda: nrt(control_plane, SMALL), 60, f"the NodeResourceTopology of {SMALL}")
    simulation.stop()  # else it would write it again for a node of the same name
    control_plane.kubectl("delete", "node", SMALL, "--wait=true")
    wait_for(lambda: True if nrt(control_plane, SMALL) is None else None, 60, "its NRT garbage-collected")
