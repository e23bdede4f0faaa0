"""The fake nodes of the cluster description exist, are Ready, and carry what was described."""

from __future__ import annotations

from e2e.cluster.controlplane import ControlPlane
from e2e.workloads import get_object, list_items
from scheduler.simulator.description import ClusterDescription


def test_described_nodes_are_ready(
    control_plane: ControlPlane, cluster_description: ClusterDescription
) -> None:
    nodes = {n["metadata"]["name"]: n for n in list_items(control_plane, "nodes")}
    expected = {n["metadata"]["name"] for n in cluster_description.nodes()}
    assert expected <= set(nodes)
    control_plane.kubectl("wait", "--for=condition=Ready", "node", "--all", "--timeout=60s")


def test_node_pool_resources_labels_and_taints(control_plane: ControlPlane) -> None:
    gpu = get_object(control_plane, "node", "gpu-3")
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert gpu["status"]["allocatable"]["koordinator.sh/gpu-core"] == "800"
    assert gpu["status"]["allocatable"]["cpu"] == "64"
    assert gpu["metadata"]["labels"]["network.topology.nvidia.com/block"] == "b1"
    assert gpu["metadata"]["labels"]["network.topology.nvidia.com/spine"] == "s0"
    tainted = get_object(control_plane, "node", "tainted-0")
    assert tainted["spec"]["taints"] == [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]


def test_gpu_nodes_have_devices(control_plane: ControlPlane) -> None:
    device = get_object(control_plane, "device", "gpu-0")
    assert len(device["spec"]["devices"]) == 8
    assert device["spec"]["devices"][0]["topology"]["pcieID"]
    assert device["metadata"]["labels"]["node.koordinator.sh/gpu-vendor"] == "nvidia"
