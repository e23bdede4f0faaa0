"""The file backend (device descriptions), the simulation of many nodes' Devices, and the writes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from apis.extension import device as ext
from apis.meta import ObjectMeta
from apis.scheduling.device import Device, DeviceAllocation, DeviceStatus
from koordlet.__main__ import main, parse_args
from koordlet.devices.description import DeviceDescription, DevicesFile, load_description, load_devices_file
from koordlet.devices.device_object import build_device
from koordlet.devices.inventory import NodeDevices
from koordlet.devices.reporter import DeviceSimulation, NodeDeviceReporter, write_device
from koordlet.fs import HostFS
from tests.koordlet.fake_nvml import FakeNVML

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "devices"


class FakeClient:
    def __init__(self, nodes: dict[str, str], devices: dict[str, Device] | None = None) -> None:
        self.nodes = nodes
        self.devices = dict(devices or {})
        self.writes: list[tuple[str, str]] = []

    async def node_uid(self, name: str) -> str | None:
        return self.nodes.get(name)

    async def get_device(self, name: str) -> Device | None:
        return self.devices.get(name)

    async def create_device(self, device: Device) -> None:
        name = device.metadata.name or ""
        self.devices[name] = device
        self.writes.append(("create", name))

    async def update_device(self, device: Device) -> None:
        name = device.metadata.name or ""
        self.devices[name] = device
        self.writes.append(("update", name))


def test_the_documented_examples_load() -> None:
    file = load_devices_file(EXAMPLES / "devices.yaml")
    inventories = file.inventories()
    assert sorted(inventories) == [f"gpu-{i}" for i in range(8)]
    hgx = inventories["gpu-0"]
    assert (len(hgx.gpus), len(hgx.rdma), [len(n.vfs) for n in hgx.rdma]) == (8, 4, [4, 4, 4, 4])
    # GPU i and NIC i//2 share a PCIe root: GPU+RDMA pairs for joint allocation
    assert [g.placement.pcie_root for g in hgx.gpus[::2]] == [n.placement.pcie_root for n in hgx.rdma]
    assert [g.minor for g in inventories["gpu-4"].gpus if not g.healthy] == [3]
    assert inventories["gpu-7"].gpus[0].nvlink_peers == [1]
    npus = load_description(EXAMPLES / "npu-config.yaml").inventory("n").accelerators
    assert [(n.vendor, n.ai_core) for n in npus] == [("huawei", 20), ("huawei", 20)]


def test_group_layout_spreads_over_numa_nodes_and_roots() -> None:
    devices = DeviceDescription.model_validate({"gpus": {"count": 8, "memory": "80Gi"}}).inventory("n")
    assert [(g.placement.numa_node, g.placement.pcie_root) for g in devices.gpus] == [
        (0, "pci0000:10"),
        (0, "pci0000:10"),
        (0, "pci0000:20"),
        (0, "pci0000:20"),
        (1, "pci0000:30"),
        (1, "pci0000:30"),
        (1, "pci0000:40"),
        (1, "pci0000:40"),
    ]
    assert len({g.placement.bus_id for g in devices.gpus}) == 8
    again = DeviceDescription.model_validate({"gpus": {"count": 8, "memory": "80Gi"}}).inventory("n")
    assert [g.uuid for g in again.gpus] == [g.uuid for g in devices.gpus]  # stable across rounds
    other = DeviceDescription.model_validate({"gpus": {"count": 8, "memory": "80Gi"}}).inventory("m")
    assert not {g.uuid for g in other.gpus} & {g.uuid for g in devices.gpus}


def test_npus_and_mlus_get_their_vendors_resources() -> None:
    npu = DeviceDescription.model_validate(
        {
            "accelerators": {
                "vendor": "huawei",
                "model": "Ascend-910B3",
                "count": 1,
                "memory": "64Gi",
                "aiCore": 20,
                "aiCPU": 7,
            }
        }
    ).inventory("n")
    wire = build_device("n", "u", npu).to_wire()
    assert wire["metadata"]["labels"] == {ext.LABEL_GPU_VENDOR: "huawei", ext.LABEL_GPU_MODEL: "Ascend-910B3"}
    [card] = wire["spec"]["devices"]
    assert card["type"] == "gpu"
    assert card["resources"] == {
        "huawei.com/npu-core": "20",
        "huawei.com/npu-cpu": "7",
        "huawei.com/npu-dvpp": "100",
        "koordinator.sh/gpu-memory": "64Gi",
        "koordinator.sh/gpu-memory-ratio": "100",
    }
    mlu = DeviceDescription.model_validate(
        {"accelerators": {"vendor": "cambricon", "model": "MLU370-X8", "count": 2, "memory": "48Gi"}}
    ).inventory("n")
    wire = build_device("n", "u", mlu).to_wire()
    assert wire["metadata"]["labels"][ext.LABEL_GPU_VENDOR] == "cambricon"
    assert wire["spec"]["devices"][1]["resources"] == {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory": "48Gi",
        "koordinator.sh/gpu-memory-ratio": "100",
    }


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"nodes": [{"gpus": {"memory": "1Gi"}}]}, "exactly one of name and names"),
        ({"nodes": [{"name": "a"}, {"names": ["a"]}]}, "more than once: a"),
        ({"nodes": [{"name": "a", "gpu": {"memory": "1Gi"}}]}, "gpu"),
        ({"nodes": [{"name": "a", "gpus": {"memory": "lots"}}]}, "lots"),
        (
            {"nodes": [{"name": "a", "gpus": {"memory": "1Gi", "numaNodes": 8, "pcieRootsPerNumaNode": 2}}]},
            "PCIe roots",
        ),
    ],
)
def test_invalid_files_are_rejected_with_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DevicesFile.model_validate(doc)


async def test_a_simulation_round_writes_the_devices_of_existing_nodes(tmp_path: Path) -> None:
    path = tmp_path / "devices.yaml"
    path.write_text("nodes:\n- names: [a, b, gone]\n  gpus: {count: 2, memory: 16Gi, nvswitch: false}\n")
    simulation = DeviceSimulation(path, None)
    assert simulation.interval() == 60
    api = FakeClient({"a": "uid-a", "b": "uid-b"})
    await simulation.report_once(api)  # type: ignore[arg-type]
    assert sorted(api.writes) == [("create", "a"), ("create", "b")]
    assert api.devices["a"].metadata.owner_references[0].uid == "uid-a"  # type: ignore[index]
    api.writes.clear()
    await simulation.report_once(api)  # type: ignore[arg-type]
    assert api.writes == []  # nothing changed, nothing written
    # the file changes: b's GPU 1 turns unhealthy, within the next round
    path.write_text(
        "reportIntervalSeconds: 2\nnodes:\n- names: [a]\n  gpus: {count: 2, memory: 16Gi, nvswitch: false}\n"
        "- names: [b]\n  gpus: {count: 2, memory: 16Gi, nvswitch: false, unhealthy: [1]}\n"
    )
    os.utime(path, ns=(1, 1))
    await simulation.report_once(api)  # type: ignore[arg-type]
    assert api.writes == [("update", "b")]
    assert [d.health for d in api.devices["b"].spec.devices] == [True, False]  # type: ignore[union-attr]
    assert simulation.interval() == 2
    # a broken edit keeps the last good file
    path.write_text("nodes: [{name: b, gpus: {memory: lots}}]\n")
    os.utime(path, ns=(2, 2))
    simulation.reload()
    assert simulation.interval() == 2


async def test_an_update_keeps_other_labels_annotations_and_the_status() -> None:
    existing = build_device("a", "uid-a", NodeDevices())
    existing.metadata = ObjectMeta(
        name="a",
        resource_version="7",
        labels={ext.LABEL_GPU_PARTITION_POLICY: "Honor"},
        annotations={"note": "kept", ext.ANNOTATION_GPU_PARTITIONS: "{}"},
    )
    existing.status = DeviceStatus(allocations=[DeviceAllocation(type="gpu")])
    api = FakeClient({"a": "uid-a"}, {"a": existing})
    devices = DeviceDescription.model_validate({"gpus": {"count": 2, "memory": "16Gi"}}).inventory("a")
    assert await write_device(api, "a", "uid-a", devices)  # type: ignore[arg-type]
    written = api.devices["a"]
    assert written.metadata.resource_version == "7"
    assert written.metadata.labels is not None
    assert written.metadata.labels[ext.LABEL_GPU_PARTITION_POLICY] == "Honor"
    assert written.metadata.labels[ext.LABEL_GPU_MODEL] == "NVIDIA-H100-80GB-HBM3"
    assert written.metadata.annotations == {"note": "kept"}  # two GPUs: the stale table is gone
    assert written.status == existing.status
    assert len(written.spec.devices or []) == 2  # type: ignore[union-attr]


async def test_a_node_reports_nvml_gpus_sysfs_rdma_and_configured_npus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    FakeNVML(monkeypatch, tmp_path)
    reporter = NodeDeviceReporter("node-1", HostFS(tmp_path), EXAMPLES / "npu-config.yaml", None)
    api = FakeClient({"node-1": "uid-1"})
    await reporter.report_once(api)  # type: ignore[arg-type]
    device = api.devices["node-1"].to_wire()
    assert [d["type"] for d in device["spec"]["devices"]] == ["gpu"] * 10
    assert device["metadata"]["labels"][ext.LABEL_GPU_VENDOR] == "nvidia"
    assert reporter.interval_seconds == 60


async def test_a_node_that_does_not_exist_gets_no_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    FakeNVML(monkeypatch, tmp_path)
    api = FakeClient({})
    await NodeDeviceReporter("node-1", HostFS(tmp_path), None, 5).report_once(api)  # type: ignore[arg-type]
    assert api.devices == {}


def test_simulate_devices_needs_no_node_name_and_a_bad_file_stops_koordlet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = parse_args(["--simulate-devices", str(EXAMPLES / "devices.yaml")])
    assert config.simulate_devices == EXAMPLES / "devices.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [{name: a, gpus: {memory: lots}}]\n")
    assert main(["--simulate-devices", str(bad)]) == 2
    assert "cannot use devices file" in capsys.readouterr().err


HCCS = {
    "4": [
        {"minors": [0, 1, 2, 3], "gpuLinkType": "HCCS", "allocationScore": "1"},
        {"minors": [4, 5, 6, 7], "gpuLinkType": "HCCS", "allocationScore": "1"},
    ]
}


async def test_the_device_config_gives_an_ascend_boards_hccs_partitions(tmp_path: Path) -> None:
    """v1.7: the Ascend Device carries its HCCS groups in gpu-partitions, as koord-device-daemon
    reports them; koordlet writes them from ``gpuPartitions`` of the device config."""
    config = tmp_path / "npu.yaml"
    accelerators = {"vendor": "huawei", "model": "Ascend-910B3", "count": 8, "memory": "64Gi", "aiCore": 20}
    config.write_text(yaml.safe_dump({"accelerators": accelerators, "gpuPartitions": HCCS}))
    reporter = NodeDeviceReporter("node-1", HostFS(tmp_path), config, None)
    api = FakeClient({"node-1": "uid-1"})
    await reporter.report_once(api)  # type: ignore[arg-type]
    annotations = api.devices["node-1"].metadata.annotations or {}
    table = ext.parse_gpu_partition_table(annotations[ext.ANNOTATION_GPU_PARTITIONS])
    assert {size: [p.minors for p in parts] for size, parts in table.items()} == {
        4: [[0, 1, 2, 3], [4, 5, 6, 7]]
    }
    assert table[4][0].gpu_link_type == "HCCS"
