"""RDMA NICs and their SR-IOV VFs from a fake sysfs tree."""

from __future__ import annotations

import os
from pathlib import Path

from koordlet.devices.device_object import build_device
from koordlet.devices.inventory import NodeDevices
from koordlet.devices.sysfs import normalize_bus_id, rdma_devices
from koordlet.fs import HostFS


class FakeSysfs:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._write("sys/devices/system/node/node0/cpulist", "0-15\n")
        self._write("sys/devices/system/node/node1/cpulist", "16-31\n")
        self._write("sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n")
        self._write("sys/devices/system/cpu/cpu16/topology/physical_package_id", "1\n")

    def _write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def _link(self, relative: str, target: str) -> None:
        link = self.root / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(self.root / target, link.parent), link)

    def pci(self, root_bus: str, bus_id: str, numa: int) -> str:
        device = f"sys/devices/pci0000:{root_bus}/0000:{root_bus}:02.0/{bus_id}"
        self._write(f"{device}/numa_node", f"{numa}\n")
        self._link(f"sys/bus/pci/devices/{bus_id}", device)
        return device

    def nic(
        self, name: str, root_bus: str, bus_id: str, numa: int, vfs: int = 0, state: str = "4: ACTIVE"
    ) -> None:
        device = self.pci(root_bus, bus_id, numa)
        self._write(f"{device}/sriov_totalvfs", "8\n")
        self._write(f"{device}/sriov_numvfs", f"{vfs}\n")
        for k in range(vfs):
            vf_bus = f"{bus_id[:-1]}{k + 1}"
            vf_device = self.pci(root_bus, vf_bus, numa)
            self._link(f"{device}/virtfn{k}", vf_device)
            self._link(f"{vf_device}/physfn", device)
            # the VF has an InfiniBand device of its own: it is not a NIC of its own
            self._link(f"sys/class/infiniband/{name}v{k}/device", vf_device)
        self._link(f"sys/class/infiniband/{name}/device", device)
        self._write(f"sys/class/infiniband/{name}/ports/1/state", state + "\n")


def test_bus_ids_are_normalised() -> None:
    assert normalize_bus_id(b"00000000:0E:00.0") == "0000:0e:00.0"
    assert normalize_bus_id("0000:0e:00.0") == "0000:0e:00.0"


def test_rdma_nics_with_their_vfs_placement_and_port_health(tmp_path: Path) -> None:
    fake = FakeSysfs(tmp_path)
    fake.nic("mlx5_0", "0b", "0000:0c:00.0", 0, vfs=2)
    fake.nic("mlx5_1", "8b", "0000:8c:00.0", 1, state="1: DOWN")
    nics = rdma_devices(HostFS(tmp_path))
    assert [(n.minor, n.name, n.placement.bus_id, n.healthy) for n in nics] == [
        (0, "mlx5_0", "0000:0c:00.0", True),
        (1, "mlx5_1", "0000:8c:00.0", False),
    ]
    assert [(p.numa_node, p.socket, p.pcie_root) for p in (n.placement for n in nics)] == [
        (0, 0, "pci0000:0b"),
        (1, 1, "pci0000:8b"),
    ]
    wire = build_device("n", "u", NodeDevices(rdma=nics)).to_wire()
    first = wire["spec"]["devices"][0]
    assert first == {
        "type": "rdma",
        "labels": {"name": "mlx5_0"},
        "id": "0000:0c:00.0",
        "minor": 0,
        "health": True,
        "resources": {"koordinator.sh/rdma": "100"},
        "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:0b", "busID": "0000:0c:00.0"},
        "vfGroups": [{"vfs": [{"minor": 0, "busID": "0000:0c:00.1"}, {"minor": 1, "busID": "0000:0c:00.2"}]}],
    }
    assert "vfGroups" not in wire["spec"]["devices"][1]
    assert "labels" not in wire["metadata"]  # no GPU: no vendor or model


def test_no_infiniband_no_rdma(tmp_path: Path) -> None:
    assert rdma_devices(HostFS(tmp_path)) == []


def test_numa_node_minus_one_is_node_zero(tmp_path: Path) -> None:
    fake = FakeSysfs(tmp_path)
    fake.nic("mlx5_0", "0b", "0000:0c:00.0", -1)
    [nic] = rdma_devices(HostFS(tmp_path))
    assert (nic.placement.numa_node, nic.placement.socket) == (0, 0)
