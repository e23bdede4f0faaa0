"""RDMA NICs for the DeviceShare tests, shaped as Koordinator's own allocator tests shape them."""

from __future__ import annotations

from typing import Any

from apis.scheduling.device import Device
from tests.scheduler.plugins.device_share_fixtures import gpu

_BUSES = ("1f", "90", "51", "b9")


def vf_bus(bus: str, index: int) -> str:
    """The ``index``-th VF of the NIC at ``0000:<bus>:00.0`` (functions 2..7, then 01.0, ...)."""
    return f"0000:{bus}:{(index + 2) // 8:02x}.{(index + 2) % 8}"


def nic(
    minor: int,
    *,
    numa: int | None,
    pcie: str | None,
    bus: str = "1f",
    vfs: int = 30,
    vf_labels: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    healthy: bool = True,
) -> dict[str, Any]:
    info: dict[str, Any] = {
        "type": "rdma",
        "minor": minor,
        "id": f"0000:{bus}:00.0",
        "health": healthy,
        "labels": labels if labels is not None else {"type": "fakeW"},
        "resources": {"koordinator.sh/rdma": "100"},
    }
    if numa is not None:
        info["topology"] = {"socketID": numa, "nodeID": numa, "pcieID": pcie or str(numa)}
    if vfs:
        group = [{"minor": k, "busID": vf_bus(bus, k)} for k in range(vfs)]
        info["vfGroups"] = [{"labels": vf_labels or {"type": "general"}, "vfs": group}]
    return info


def koordinator_node(name: str, *, vfs_on: tuple[int, ...] = (1, 2, 3, 4), one_numa: bool = False) -> Device:
    """Koordinator's ``fakeDeviceCR``: NICs 1-4 on PCIe switches 0-3 (NUMA 0, 0, 1, 1), two GPUs per
    switch (minors 0-7), 30 VFs on each NIC listed in ``vfs_on``; ``one_numa``: everything on NUMA 0."""
    devices: list[dict[str, Any]] = []
    for i, bus in enumerate(_BUSES):
        numa = 0 if one_numa else i // 2
        devices.append(nic(i + 1, numa=numa, pcie=str(i), bus=bus, vfs=30 if i + 1 in vfs_on else 0))
    for m in range(8):
        devices.append(gpu(m, numa=0 if one_numa else m // 4, pcie=str(m // 2)))
    return Device.model_validate({"metadata": {"name": name}, "spec": {"devices": devices}})
