"""A fake NVML (pynvml's functions monkeypatched) and the sysfs tree of the machine it describes.

The default machine is an 8-GPU HGX board: two NUMA nodes on two sockets, two PCIe switches under
their own root on each NUMA node with two GPUs each, every GPU's NVLinks going to NVSwitches.
``nvswitch=False`` links the GPUs in pairs (0-1, 2-3, ...) with NVLink bridges instead.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

GIB = 1 << 30
NVSWITCH_BUS_IDS = [f"00000000:{0xA0 + k:02X}:00.0" for k in range(4)]


@dataclass
class FakeGPU:
    index: int
    uuid: str
    numa: int
    root: str
    """The PCIe root bus, e.g. ``0b`` for ``pci0000:0b``."""
    bus: int
    memory: int
    links: list[str] = field(default_factory=list)
    """NVML-format remote bus ids of the active NVLinks."""
    lost: bool = False

    @property
    def bus_id(self) -> str:
        return f"0000:{self.bus:02x}:00.0"

    @property
    def nvml_bus_id(self) -> bytes:
        return f"0000{self.bus_id.upper()}".encode()


class FakeNVML:
    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        root: Path,
        *,
        count: int = 8,
        name: str = "NVIDIA H100 80GB HBM3",
        memory: int = 80 * GIB,
        nvswitch: bool = True,
        numa_from_nvml: bool = True,
    ) -> None:
        self.root = root
        self.name = name
        self.events: deque[SimpleNamespace] = deque()
        self.registered: list[int] = []
        self.gpus = []
        roots = ["0b", "1b", "8b", "9b"]
        for i in range(count):
            switch = i // 2 % len(roots)
            gpu = FakeGPU(
                index=i,
                uuid=f"GPU-0000000{i}-aaaa-bbbb-cccc-00000000000{i}",
                numa=switch // 2,
                root=roots[switch],
                bus=int(roots[switch], 16) + 3 + i % 2,
                memory=memory,
            )
            self.gpus.append(gpu)
        for gpu in self.gpus:
            if nvswitch:
                gpu.links = list(NVSWITCH_BUS_IDS)
            else:
                peer = self.gpus[gpu.index ^ 1] if gpu.index ^ 1 < count else None
                gpu.links = [peer.nvml_bus_id.decode()] * 4 if peer else []
        self._write_sysfs(numa_from_nvml)
        self._patch(monkeypatch, numa_from_nvml)

    def _write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def _write_sysfs(self, numa_from_nvml: bool) -> None:
        for node, cpus in ((0, "0-31,64-95"), (1, "32-63,96-127")):
            self._write(f"sys/devices/system/node/node{node}/cpulist", cpus + "\n")
            first = int(cpus.split("-")[0])
            self._write(f"sys/devices/system/cpu/cpu{first}/topology/physical_package_id", f"{node}\n")
        for gpu in self.gpus:
            switch_up = f"0000:{gpu.root}:01.0"
            switch_down = f"0000:{int(gpu.root, 16) + 1:02x}:00.0"
            device = f"sys/devices/pci0000:{gpu.root}/{switch_up}/{switch_down}/{gpu.bus_id}"
            # a machine whose NVML has no NUMA API: sysfs must say it
            self._write(f"{device}/numa_node", f"{gpu.numa if not numa_from_nvml else -1}\n")
            link = self.root / "sys/bus/pci/devices" / gpu.bus_id
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.relpath(self.root / device, link.parent), link)

    def xid(self, index: int, xid: int) -> None:
        self.events.append(
            SimpleNamespace(device=index, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid)
        )

    def _gpu(self, handle: int) -> FakeGPU:
        gpu = self.gpus[handle]
        if gpu.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return gpu

    def _patch(self, monkeypatch: pytest.MonkeyPatch, numa_from_nvml: bool) -> None:
        def wait(event_set: Any, timeout_ms: int) -> SimpleNamespace:
            if not self.events:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
            return self.events.popleft()

        def numa(handle: int) -> int:
            if not numa_from_nvml:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return self._gpu(handle).numa

        def link_state(handle: int, link: int) -> int:
            links = self._gpu(handle).links
            if link >= len(links):
                raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            return int(pynvml.NVML_FEATURE_ENABLED)

        calls: dict[str, Any] = {
            "nvmlInit": lambda: None,
            "nvmlShutdown": lambda: None,
            "nvmlSystemGetDriverVersion": lambda: "550.54.15",
            "nvmlDeviceGetCount": lambda: len(self.gpus),
            "nvmlDeviceGetHandleByIndex": lambda index: self._gpu(index).index,
            "nvmlDeviceGetMinorNumber": lambda h: self._gpu(h).index,
            "nvmlDeviceGetUUID": lambda h: self._gpu(h).uuid,
            "nvmlDeviceGetName": lambda h: self.name,
            "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(total=self._gpu(h).memory, used=0, free=0),
            "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=self._gpu(h).nvml_bus_id),
            "nvmlDeviceGetNumaNodeId": numa,
            "nvmlDeviceGetNvLinkState": link_state,
            "nvmlDeviceGetNvLinkRemotePciInfo": lambda h, link: SimpleNamespace(
                busId=self._gpu(h).links[link]
            ),
            "nvmlEventSetCreate": lambda: "event-set",
            "nvmlDeviceRegisterEvents": lambda h, types, event_set: self.registered.append(h),
            "nvmlEventSetWait": wait,
        }
        for name, fake in calls.items():
            monkeypatch.setattr(pynvml, name, fake)
