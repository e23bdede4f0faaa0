"""koordlet's GPU discovery through NVML, on a fake NVML describing an 8-GPU HGX board."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pynvml
import pytest

from apis.extension import device as ext
from koordlet.devices.device_object import LABEL_NVLINK_PEERS, build_device
from koordlet.devices.inventory import NodeDevices
from koordlet.devices.nvml import NVMLBackend
from koordlet.fs import HostFS
from tests.koordlet.fake_nvml import FakeNVML


def _device(backend: NVMLBackend) -> dict[str, object]:
    devices = NodeDevices(gpus=backend.gpus(), driver_version=backend.driver_version())
    return build_device("gpu-node", "uid-1", devices).to_wire()


def test_eight_gpus_become_the_nodes_device_in_koordinators_shape(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeNVML(monkeypatch, tmp_path)
    wire = _device(NVMLBackend(HostFS(tmp_path)))
    meta = wire["metadata"]
    assert meta["name"] == "gpu-node"  # type: ignore[index]
    assert meta["ownerReferences"] == [  # type: ignore[index]
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": "gpu-node",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"] == {  # type: ignore[index]
        ext.LABEL_GPU_VENDOR: "nvidia",
        ext.LABEL_GPU_MODEL: "NVIDIA-H100-80GB-HBM3",
        ext.LABEL_GPU_DRIVER_VERSION: "550.54.15",
    }
    devices = wire["spec"]["devices"]  # type: ignore[index]
    assert [d["minor"] for d in devices] == list(range(8))
    assert devices[0] == {
        "type": "gpu",
        "labels": {"nvswitch": "true"},
        "id": fake.gpus[0].uuid,
        "minor": 0,
        "health": True,
        "resources": {
            "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory": "80Gi",
            "koordinator.sh/gpu-memory-ratio": "100",
        },
        "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:0b", "busID": "0000:0e:00.0"},
    }
    # two GPUs per PCIe root, two roots per NUMA node, one NUMA node per socket
    placement = [
        (d["topology"]["socketID"], d["topology"]["nodeID"], d["topology"]["pcieID"]) for d in devices
    ]
    assert placement == [
        (0, 0, "pci0000:0b"),
        (0, 0, "pci0000:0b"),
        (0, 0, "pci0000:1b"),
        (0, 0, "pci0000:1b"),
        (1, 1, "pci0000:8b"),
        (1, 1, "pci0000:8b"),
        (1, 1, "pci0000:9b"),
        (1, 1, "pci0000:9b"),
    ]
    table = json.loads(meta["annotations"][ext.ANNOTATION_GPU_PARTITIONS])  # type: ignore[index]
    assert sorted(table, key=int) == ["1", "2", "4", "8"]
    assert [p["minors"] for p in table["2"]] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [p["minors"] for p in table["4"]] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert table["8"] == [{"minors": list(range(8)), "gpuLinkType": "NVLink", "allocationScore": 1}]
    parsed = ext.parse_gpu_partition_table(meta["annotations"][ext.ANNOTATION_GPU_PARTITIONS])  # type: ignore[index]
    assert len(parsed[1]) == 8


def test_numa_node_from_sysfs_when_nvml_has_no_numa_api(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    FakeNVML(monkeypatch, tmp_path, numa_from_nvml=False)
    gpus = NVMLBackend(HostFS(tmp_path)).gpus()
    assert [(g.placement.numa_node, g.placement.socket) for g in gpus] == [(0, 0)] * 4 + [(1, 1)] * 4


def test_nvlink_bridged_pairs_are_peers_and_get_no_partition_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    FakeNVML(monkeypatch, tmp_path, name="NVIDIA A100-PCIE-40GB", nvswitch=False)
    wire = _device(NVMLBackend(HostFS(tmp_path)))
    devices = wire["spec"]["devices"]  # type: ignore[index]
    assert [d["labels"][LABEL_NVLINK_PEERS] for d in devices] == ["1", "0", "3", "2", "5", "4", "7", "6"]
    assert "annotations" not in wire["metadata"]  # type: ignore[operator]


@pytest.mark.parametrize(
    ("name", "table"), [("NVIDIA H20", True), ("NVIDIA H800", True), ("NVIDIA L40S", False)]
)
def test_partition_tables_only_for_known_hgx_models(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, table: bool
) -> None:
    FakeNVML(monkeypatch, tmp_path, name=name)
    wire = _device(NVMLBackend(HostFS(tmp_path)))
    assert (ext.ANNOTATION_GPU_PARTITIONS in (wire["metadata"].get("annotations") or {})) is table  # type: ignore[union-attr, attr-defined]


def test_four_gpus_of_a_known_model_get_no_eight_gpu_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    FakeNVML(monkeypatch, tmp_path, count=4)
    assert "annotations" not in _device(NVMLBackend(HostFS(tmp_path)))["metadata"]  # type: ignore[operator]


def test_no_nvml_means_no_gpus_and_one_log_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def missing() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", missing)
    backend = NVMLBackend(HostFS(tmp_path))
    with caplog.at_level(logging.INFO, logger="koordlet.devices"):
        assert backend.gpus() == []
        assert backend.gpus() == []
        assert backend.driver_version() is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert "NVML is not available" in lines[0]
    assert "no GPUs" in lines[0]


def test_the_real_nvml_on_a_machine_without_it_reports_nothing(tmp_path: Path) -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:  # pragma: no cover - only on a machine with an NVIDIA driver
        pynvml.nvmlShutdown()
        pytest.skip("this machine has NVML")
    assert NVMLBackend(HostFS(tmp_path)).gpus() == []


def test_a_lost_gpu_is_reported_unhealthy_in_the_next_round(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeNVML(monkeypatch, tmp_path)
    backend = NVMLBackend(HostFS(tmp_path))
    assert all(g.healthy for g in backend.gpus())
    fake.gpus[3].lost = True
    gpus = backend.gpus()
    assert [g.minor for g in gpus if not g.healthy] == [3]
    lost = gpus[3]
    assert (lost.uuid, lost.memory.value(), lost.placement.pcie_root) == (
        fake.gpus[3].uuid,
        80 << 30,
        "pci0000:1b",
    )
    fake.gpus[3].lost = False
    assert all(g.healthy for g in backend.gpus())


def test_critical_xids_mark_the_gpu_unhealthy_application_xids_do_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeNVML(monkeypatch, tmp_path)
    backend = NVMLBackend(HostFS(tmp_path))
    backend.gpus()
    assert fake.registered == list(range(8))
    fake.xid(2, 13)  # graphics engine exception: the application's fault
    fake.xid(5, 43)
    assert all(g.healthy for g in backend.gpus())
    fake.xid(6, 79)  # fallen off the bus
    assert [g.minor for g in backend.gpus() if not g.healthy] == [6]
    assert [g.minor for g in backend.gpus() if not g.healthy] == [6]  # it stays so
    wire = _device(backend)
    assert [d["health"] for d in wire["spec"]["devices"]] == [True] * 6 + [False, True]  # type: ignore[index]
