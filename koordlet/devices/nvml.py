"""NVIDIA GPUs through NVML (the nvidia-ml-py package, imported as ``pynvml``).

Each call to :meth:`NVMLBackend.gpus` asks NVML again, so that a GPU that turns unhealthy is
reported so within one report period:

- a GPU NVML can no longer query (``GPU is lost`` and the like) is reported unhealthy with what was
  last known of it;
- a critical XID event marks its GPU unhealthy for as long as koordlet runs, as NVIDIA's device
  plugin does; the XIDs an application causes (13, 31, 43, 45, 68, 109) do not.

Bus id, NUMA node, socket and PCIe root come from sysfs (NVML's NUMA node when it has one); NVLink
peers from each active link's remote PCI address: a GPU of this node, or an NVSwitch. A machine
without NVML (no driver, no library) has no GPUs: one log line says so, and nothing fails.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pynvml

from apis.quantity import Format, Quantity
from koordlet.devices.inventory import GPU
from koordlet.devices.sysfs import normalize_bus_id, pci_placement, socket_of
from koordlet.fs import HostFS

__all__ = ["APPLICATION_XIDS", "NVMLBackend"]

log = logging.getLogger("koordlet.devices")

APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
"""XIDs an application's own error causes: the GPU stays healthy."""


_XID_CRITICAL = pynvml.nvmlEventTypeXidCriticalError


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class NVMLBackend:
    def __init__(self, fs: HostFS) -> None:
        self.fs = fs
        self._ready: bool | None = None
        self._events: Any = None
        self._xid_unhealthy: set[str] = set()
        self._known: dict[int, GPU] = {}
        """Index -> the GPU as last read, for a GPU NVML cannot read any more."""

    @property
    def available(self) -> bool:
        if self._ready is None:
            try:
                pynvml.nvmlInit()
            except (pynvml.NVMLError, OSError) as exc:
                log.info("NVML is not available (%s): no GPUs are reported on this node", exc)
                self._ready = False
            else:
                self._ready = True
                self._register_events()
        return self._ready

    def close(self) -> None:
        if self._ready:
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlShutdown()
            self._ready = None

    def driver_version(self) -> str | None:
        if not self.available:
            return None
        try:
            return _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError:
            return None

    def _register_events(self) -> None:
        try:
            self._events = pynvml.nvmlEventSetCreate()
            for index in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                try:
                    pynvml.nvmlDeviceRegisterEvents(handle, _XID_CRITICAL, self._events)
                except pynvml.NVMLError as exc:
                    log.info("GPU %d reports no XID events (%s): health from NVML queries only", index, exc)
        except pynvml.NVMLError as exc:
            log.info("no NVML event set (%s): health from NVML queries only", exc)
            self._events = None

    def _drain_events(self) -> None:
        if self._events is None:
            return
        while True:
            try:
                event = pynvml.nvmlEventSetWait(self._events, 0)
            except pynvml.NVMLError:
                return  # a timeout: no event pending
            if event.eventType != _XID_CRITICAL or event.eventData in APPLICATION_XIDS:
                continue
            try:
                uuid = _text(pynvml.nvmlDeviceGetUUID(event.device))
            except pynvml.NVMLError:
                continue
            if uuid not in self._xid_unhealthy:
                log.warning("GPU %s had critical XID %d: reported unhealthy", uuid, event.eventData)
                self._xid_unhealthy.add(uuid)

    def _read(self, index: int) -> tuple[GPU, Any]:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        bus_id = normalize_bus_id(pynvml.nvmlDeviceGetPciInfo(handle).busId)
        placement = pci_placement(self.fs, bus_id)
        try:
            numa = int(pynvml.nvmlDeviceGetNumaNodeId(handle))
        except (pynvml.NVMLError, AttributeError):
            numa = -1
        if numa >= 0 and numa != placement.numa_node:
            placement = placement.model_copy(update={"numa_node": numa, "socket": socket_of(self.fs, numa)})
        gpu = GPU(
            minor=int(pynvml.nvmlDeviceGetMinorNumber(handle)),
            uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
            model=_text(pynvml.nvmlDeviceGetName(handle)),
            memory=Quantity.from_int(int(pynvml.nvmlDeviceGetMemoryInfo(handle).total), Format.BINARY_SI),
            placement=placement,
        )
        return gpu, handle

    def _links(self, handle: Any, by_bus: dict[str, int]) -> tuple[list[int], bool]:
        peers: set[int] = set()
        nvswitch = False
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                if pynvml.nvmlDeviceGetNvLinkState(handle, link) != pynvml.NVML_FEATURE_ENABLED:
                    continue
                remote = normalize_bus_id(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
            except pynvml.NVMLError:
                continue
            if remote in by_bus:
                peers.add(by_bus[remote])
            else:
                nvswitch = True
        return sorted(peers), nvswitch

    def gpus(self) -> list[GPU]:
        if not self.available:
            return []
        self._drain_events()
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            log.warning("NVML cannot count the GPUs (%s): reporting them as last known, unhealthy", exc)
            return [gpu.model_copy(update={"healthy": False}) for _, gpu in sorted(self._known.items())]
        read: dict[int, tuple[GPU, Any]] = {}
        result: dict[int, GPU] = {}
        for index in range(count):
            try:
                read[index] = self._read(index)
            except pynvml.NVMLError as exc:
                known = self._known.get(index)
                if known is not None:
                    log.warning("GPU %s cannot be read (%s): reported unhealthy", known.uuid, exc)
                    result[index] = known.model_copy(update={"healthy": False})
                else:
                    log.warning("GPU %d cannot be read (%s): not reported", index, exc)
        by_bus = {gpu.placement.bus_id: gpu.minor for gpu, _ in read.values()}
        for index, (gpu, handle) in read.items():
            peers, nvswitch = self._links(handle, by_bus)
            gpu = gpu.model_copy(update={"nvlink_peers": peers, "nvswitch": nvswitch})
            self._known[index] = gpu
            result[index] = gpu.model_copy(update={"healthy": gpu.uuid not in self._xid_unhealthy})
        return [gpu for _, gpu in sorted(result.items())]
