"""PCI placement and RDMA NICs from sysfs, behind :class:`~koordlet.fs.HostFS` (fake trees in tests).

A PCI device's NUMA node is ``/sys/bus/pci/devices/<bus>/numa_node`` (-1 on a machine with one
node: read as 0), its socket the ``physical_package_id`` of the first CPU of that node, and its PCIe
root the ``pciDDDD:BB`` directory its sysfs path resolves under (``/sys/devices/pci0000:0b/...``).
RDMA NICs are the physical functions of ``/sys/class/infiniband``; their SR-IOV VFs are the
``virtfnN`` links of the PF (``sriov_numvfs`` of them are enabled).
"""

from __future__ import annotations

import logging
import os
import re

from koordlet.devices.inventory import RDMA, VF, Placement
from koordlet.fs import HostFS

__all__ = ["normalize_bus_id", "pci_placement", "rdma_devices"]

log = logging.getLogger("koordlet.devices")

_ROOT = re.compile(r"pci[0-9a-f]{4}:[0-9a-f]{2}")
_BUS = re.compile(r"(?:[0-9a-f]*?)([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])")
_INFINIBAND = "sys/class/infiniband"
_PCI = "sys/bus/pci/devices"


def normalize_bus_id(raw: str | bytes) -> str:
    """NVML's ``00000000:0E:00.0`` (8-digit domain) or sysfs's ``0000:0e:00.0`` as the latter."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    match = _BUS.fullmatch(text.strip().lower())
    if match is None:
        return text.strip().lower()
    domain, bus, device, function = match.groups()
    return f"{domain}:{bus}:{device}.{function}"


def _read_int(fs: HostFS, relative: str) -> int | None:
    try:
        return int(fs.read_text(relative).strip())
    except (OSError, ValueError):
        return None


def _first_cpu(cpulist: str) -> int | None:
    head = cpulist.strip().split(",")[0].split("-")[0]
    return int(head) if head.isdigit() else None


def socket_of(fs: HostFS, numa_node: int) -> int:
    try:
        cpu = _first_cpu(fs.read_text(f"sys/devices/system/node/node{numa_node}/cpulist"))
    except OSError:
        cpu = None
    if cpu is None:
        return numa_node
    package = _read_int(fs, f"sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id")
    return numa_node if package is None else package


def pci_placement(fs: HostFS, bus_id: str) -> Placement:
    bus_id = normalize_bus_id(bus_id)
    numa = _read_int(fs, f"{_PCI}/{bus_id}/numa_node")
    numa = 0 if numa is None or numa < 0 else numa
    resolved = os.path.realpath(fs.path(f"{_PCI}/{bus_id}"))
    roots = [part for part in resolved.split(os.sep) if _ROOT.fullmatch(part)]
    root = roots[0] if roots else "pci" + bus_id[:7]
    return Placement(bus_id=bus_id, numa_node=numa, socket=socket_of(fs, numa), pcie_root=root)


def _link_target(fs: HostFS, relative: str) -> str:
    return os.path.basename(os.path.realpath(fs.path(relative)))


def _ports_active(fs: HostFS, name: str) -> bool:
    ports = fs.subdirs(f"{_INFINIBAND}/{name}/ports")
    if not ports:
        return True
    for port in ports:
        try:
            if "ACTIVE" in fs.read_text(f"{_INFINIBAND}/{name}/ports/{port}/state"):
                return True
        except OSError:
            continue
    return False


def _vfs(fs: HostFS, pf_bus_id: str) -> list[VF]:
    enabled = _read_int(fs, f"{_PCI}/{pf_bus_id}/sriov_numvfs") or 0
    vfs = []
    for index in range(enabled):
        link = f"{_PCI}/{pf_bus_id}/virtfn{index}"
        if fs.exists(link):
            vfs.append(VF(minor=index, bus_id=_link_target(fs, link)))
    return vfs


def rdma_devices(fs: HostFS) -> list[RDMA]:
    """The RDMA physical functions, minors counted in name order; VFs are listed under their PF."""
    nics = []
    for name in fs.subdirs(_INFINIBAND):
        device = f"{_INFINIBAND}/{name}/device"
        if not fs.exists(device) or fs.exists(f"{device}/physfn"):
            continue
        bus_id = normalize_bus_id(_link_target(fs, device))
        nics.append((name, bus_id))
    result = []
    for minor, (name, bus_id) in enumerate(nics):
        result.append(
            RDMA(
                minor=minor,
                name=name,
                healthy=_ports_active(fs, name),
                placement=pci_placement(fs, bus_id),
                vfs=_vfs(fs, bus_id),
            )
        )
    return result
