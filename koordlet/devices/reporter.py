"""Write a node's Device object: created when missing, updated when what koordlet found changed.

:class:`NodeDeviceReporter` reports this host's devices (NVML, sysfs RDMA, the accelerator config);
:class:`DeviceSimulation` reports the devices a simulation file gives many (KWOK) nodes, from one
process, re-reading the file when it changes so that a test can turn a GPU unhealthy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from kubernetes_asyncio import client
from pydantic import ValidationError

from koordlet.client import KoordletClient
from koordlet.devices.description import DevicesFile, load_description, load_devices_file
from koordlet.devices.device_object import build_device, updated_device
from koordlet.devices.inventory import NodeDevices
from koordlet.devices.nvml import NVMLBackend
from koordlet.devices.sysfs import rdma_devices
from koordlet.fs import HostFS

__all__ = ["DEFAULT_REPORT_INTERVAL_SECONDS", "DeviceSimulation", "NodeDeviceReporter", "write_device"]

log = logging.getLogger("koordlet.devices")

DEFAULT_REPORT_INTERVAL_SECONDS = 60.0
_RETRYABLE = (TimeoutError, client.ApiException, aiohttp.ClientError, OSError)


async def write_device(api: KoordletClient, node_name: str, node_uid: str, devices: NodeDevices) -> bool:
    """Create or update the node's Device; True when something was written."""
    desired = build_device(node_name, node_uid, devices)
    existing = await api.get_device(node_name)
    if existing is None:
        try:
            await api.create_device(desired)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            return False  # created meanwhile: updated next round
        return True
    updated = updated_device(existing, desired)
    if updated is None:
        return False
    try:
        await api.update_device(updated)
    except client.ApiException as exc:
        if exc.status not in (404, 409):
            raise
        return False
    return True


async def _forever(report: Callable[[], Awaitable[None]], interval: Callable[[], float], what: str) -> None:
    while True:
        try:
            await report()
        except _RETRYABLE as exc:
            log.warning("%s failed, retrying next round: %s", what, exc)
        await asyncio.sleep(interval())


class NodeDeviceReporter:
    """This host's devices: GPUs from NVML, RDMA NICs from sysfs, NPUs and MLUs from a config file."""

    def __init__(
        self, node_name: str, fs: HostFS, device_config: Path | None, interval_seconds: float | None
    ) -> None:
        self.node_name = node_name
        self.fs = fs
        self.device_config = device_config
        self.interval_seconds = interval_seconds or DEFAULT_REPORT_INTERVAL_SECONDS
        self.nvml = NVMLBackend(fs)
        self._node_uid: str | None = None

    def inventory(self) -> NodeDevices:
        accelerators = []
        partitions = None
        if self.device_config is not None:
            try:
                configured = load_description(self.device_config).inventory(self.node_name)
                accelerators, partitions = configured.accelerators, configured.gpu_partitions
            except (OSError, ValueError) as exc:
                log.warning("device config %s not read (%s): no NPUs or MLUs", self.device_config, exc)
        return NodeDevices(
            gpus=self.nvml.gpus(),
            rdma=rdma_devices(self.fs),
            accelerators=accelerators,
            driver_version=self.nvml.driver_version(),
            gpu_partitions=partitions,
        )

    async def report_once(self, api: KoordletClient) -> None:
        if self._node_uid is None:
            self._node_uid = await api.node_uid(self.node_name)
            if self._node_uid is None:
                log.warning("node %s not found: its Device is not written", self.node_name)
                return
        devices = self.inventory()
        if await write_device(api, self.node_name, self._node_uid, devices):
            log.info(
                "Device %s written: %d GPUs, %d RDMA NICs, %d accelerators",
                self.node_name,
                len(devices.gpus),
                len(devices.rdma),
                len(devices.accelerators),
            )

    async def run(self, api: KoordletClient) -> None:
        try:
            await _forever(lambda: self.report_once(api), lambda: self.interval_seconds, "device report")
        finally:
            self.nvml.close()


class DeviceSimulation:
    """The Device objects of every node a simulation file describes (docs/devices.md)."""

    def __init__(self, path: Path, interval_seconds: float | None) -> None:
        self.path = path
        self.override = interval_seconds
        self.file: DevicesFile = load_devices_file(path)
        self._mtime = path.stat().st_mtime_ns

    def reload(self) -> None:
        """Take the file again when it changed; a broken edit keeps the last good one."""
        try:
            mtime = self.path.stat().st_mtime_ns
            if mtime == self._mtime:
                return
            self.file = load_devices_file(self.path)
            self._mtime = mtime
        except (OSError, ValueError, ValidationError) as exc:
            log.warning("devices file %s not reloaded, keeping the last one: %s", self.path, exc)

    def interval(self) -> float:
        return self.override or self.file.report_interval_seconds or DEFAULT_REPORT_INTERVAL_SECONDS

    async def _report(self, api: KoordletClient, name: str, devices: NodeDevices) -> None:
        # Read each round: a node deleted and created again owns its Device under its new UID.
        uid = await api.node_uid(name)
        if uid is not None:  # else not (yet) a node of this cluster
            await write_device(api, name, uid, devices)

    async def report_once(self, api: KoordletClient) -> None:
        self.reload()
        await asyncio.gather(*(self._report(api, name, d) for name, d in self.file.inventories().items()))

    async def run(self, api: KoordletClient) -> None:
        await _forever(lambda: self.report_once(api), self.interval, "simulated device report")
