"""Device reporting on the real API server: koordlet in simulation mode writes the Device objects of
KWOK nodes from a devices file (with the chart's koordlet permissions), and koord-manager puts their
sums into the nodes' allocatable; an unhealthy GPU lowers it, a deleted Device takes it away."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.extension import device as ext
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koordlet_simulation
from e2e.scenarios.test_koordlet import koordlet_kubeconfig
from e2e.workloads import wait_for

GPU_NODE, NPU_NODE, MISSING = "devrep-gpu-0", "devrep-npu-0", "devrep-missing"
HGX = {"count": 8, "model": "NVIDIA H100 80GB HBM3", "memory": "80Gi"}


def _devices_file(unhealthy: list[int]) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "name": GPU_NODE,
                "driverVersion": "550.54.15",
                "gpus": {**HGX, "unhealthy": unhealthy},
                "rdma": {"count": 4, "vfs": 2},
            },
            {
                "name": NPU_NODE,
                "accelerators": {
                    "vendor": "huawei",
                    "model": "Ascend-910B3",
                    "count": 8,
                    "memory": "64Gi",
                    "aiCore": 20,
                    "aiCPU": 7,
                },
            },
            {"name": MISSING, "gpus": HGX},
        ]
    }


def _node(name: str) -> dict[str, Any]:
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        # kept out of the other scenarios' way
        "spec": {"taints": [{"key": "koord-e2e/pool", "value": "devices", "effect": "NoSchedule"}]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def _get(cp: ControlPlane, kind: str, name: str) -> dict[str, Any] | None:
    return cp.read(kind, name)


def _allocatable(cp: ControlPlane, name: str) -> dict[str, str]:
    node = _get(cp, "node", name) or {}
    allocatable: dict[str, str] = (node.get("status") or {}).get("allocatable") or {}
    return allocatable


def _device_resources(cp: ControlPlane, name: str) -> dict[str, str]:
    return {k: v for k, v in _allocatable(cp, name).items() if "/" in k}


@pytest.fixture(scope="module")
def devices_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("devices") / "devices.yaml"
    path.write_text(yaml.safe_dump(_devices_file([])))
    return path


@pytest.fixture(scope="module")
def koordlet(control_plane: ControlPlane, devices_file: Path) -> Iterator[LocalComponent]:
    cp = control_plane
    cp.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [_node(GPU_NODE), _node(NPU_NODE)]}),
    )
    component = koordlet_simulation(
        cp, None, devices_file=devices_file, kubeconfig=koordlet_kubeconfig(cp), name="koordlet-devices"
    )
    component.start()
    try:
        yield component
    finally:
        print(component.stop())
        for name in (GPU_NODE, NPU_NODE):
            cp.run_kubectl("delete", "device", name, "--ignore-not-found")
            cp.run_kubectl("delete", "node", name, "--ignore-not-found")


def test_koordlet_writes_the_device_of_each_described_node(
    control_plane: ControlPlane, koordlet: LocalComponent
) -> None:
    cp = control_plane
    device = wait_for(lambda: _get(cp, "device", GPU_NODE), 60, f"the Device of {GPU_NODE}")
    node = _get(cp, "node", GPU_NODE) or {}
    [owner] = device["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Node",
        GPU_NODE,
        node["metadata"]["uid"],
        True,
    )
    assert device["metadata"]["labels"] == {
        ext.LABEL_GPU_VENDOR: "nvidia",
        ext.LABEL_GPU_MODEL: "NVIDIA-H100-80GB-HBM3",
        ext.LABEL_GPU_DRIVER_VERSION: "550.54.15",
    }
    table = ext.parse_gpu_partition_table(device["metadata"]["annotations"][ext.ANNOTATION_GPU_PARTITIONS])
    assert [p.minors for p in table[4]] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    devices = device["spec"]["devices"]
    assert [(d["type"], d["minor"]) for d in devices] == [("gpu", i) for i in range(8)] + [
        ("rdma", i) for i in range(4)
    ]
    gpu = devices[0]
    assert gpu["health"] is True
    assert gpu["resources"] == {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory": "80Gi",
        "koordinator.sh/gpu-memory-ratio": "100",
    }
    assert set(gpu["topology"]) == {"socketID", "nodeID", "pcieID", "busID"}
    assert len(devices[8]["vfGroups"][0]["vfs"]) == 2
    npu = wait_for(lambda: _get(cp, "device", NPU_NODE), 30, f"the Device of {NPU_NODE}")
    assert npu["spec"]["devices"][0]["resources"]["huawei.com/npu-core"] == "20"
    assert _get(cp, "device", MISSING) is None  # no such node: no Device


def test_koord_manager_puts_the_devices_into_node_allocatable(
    control_plane: ControlPlane, koordlet: LocalComponent
) -> None:
    cp = control_plane
    wanted = {
        "koordinator.sh/gpu": "800",
        "koordinator.sh/gpu.shared": "800",
        "koordinator.sh/gpu-core": "800",
        "koordinator.sh/gpu-memory": "640Gi",
        "koordinator.sh/gpu-memory-ratio": "800",
        "koordinator.sh/rdma": "400",
    }
    # koord-manager writes the allocatable (status) and the model labels (metadata) in two requests.
    wait_for(
        lambda: (
            (
                _device_resources(cp, GPU_NODE) == wanted
                and ext.LABEL_GPU_MODEL
                in ((_get(cp, "node", GPU_NODE) or {})["metadata"].get("labels") or {})
            )
            or None
        ),
        60,
        f"{GPU_NODE}'s device allocatable and model label",
    )
    node = _get(cp, "node", GPU_NODE) or {}
    assert {k: v for k, v in node["status"]["capacity"].items() if "/" in k} == wanted
    assert node["status"]["allocatable"]["cpu"] == "64"  # the rest untouched
    assert node["metadata"]["labels"][ext.LABEL_GPU_MODEL] == "NVIDIA-H100-80GB-HBM3"
    npus = {
        "huawei.com/npu-core": "160",
        "huawei.com/npu-cpu": "56",
        "huawei.com/npu-dvpp": "800",
        "koordinator.sh/gpu": "0",
        "koordinator.sh/gpu.shared": "800",
        "koordinator.sh/gpu-memory": "512Gi",
        "koordinator.sh/gpu-memory-ratio": "800",
    }
    wait_for(lambda: _device_resources(cp, NPU_NODE) == npus or None, 60, f"{NPU_NODE}'s device allocatable")


def test_an_unhealthy_gpu_in_the_file_lowers_allocatable_after_a_report(
    control_plane: ControlPlane, koordlet: LocalComponent, devices_file: Path
) -> None:
    cp = control_plane
    wait_for(
        lambda: _device_resources(cp, GPU_NODE).get("koordinator.sh/gpu-core") == "800" or None,
        60,
        "800 gpu-core",
    )
    devices_file.write_text(yaml.safe_dump(_devices_file([2, 5])))
    os.utime(devices_file)
    wait_for(
        lambda: _device_resources(cp, GPU_NODE).get("koordinator.sh/gpu-core") == "600" or None,
        30,
        "gpu-core lowered by the two unhealthy GPUs",
    )
    assert _device_resources(cp, GPU_NODE)["koordinator.sh/gpu-memory"] == "480Gi"
    device = _get(cp, "device", GPU_NODE) or {}
    assert [d["minor"] for d in device["spec"]["devices"] if not d["health"]] == [2, 5]
    devices_file.write_text(yaml.safe_dump(_devices_file([])))
    os.utime(devices_file)
    wait_for(
        lambda: _device_resources(cp, GPU_NODE).get("koordinator.sh/gpu-core") == "800" or None,
        30,
        "healthy again",
    )


def test_deleting_the_device_removes_the_device_resources(
    control_plane: ControlPlane, koordlet: LocalComponent, devices_file: Path
) -> None:
    cp = control_plane
    wait_for(lambda: _device_resources(cp, NPU_NODE) or None, 60, f"{NPU_NODE}'s device allocatable")
    # the node is no longer described: koordlet does not write its Device again
    devices_file.write_text(yaml.safe_dump({"nodes": _devices_file([])["nodes"][:1]}))
    os.utime(devices_file)
    time.sleep(3)  # a round already under way when the file changed may still write it once
    cp.kubectl("delete", "device", NPU_NODE)
    wait_for(
        lambda: not _device_resources(cp, NPU_NODE) or None, 30, f"{NPU_NODE}'s device resources removed"
    )
    assert _allocatable(cp, NPU_NODE)["cpu"] == "64"
    assert _get(cp, "device", NPU_NODE) is None
