"""Node allocatable from the node's Device (Koordinator's gpu and rdma device resource plugins).

Device watch events recompute the node's device resources (``operators.logic.device_allocatable``)
and patch them into the node's status subresource, the Device's vendor, model and driver labels
into the node; node watch events do the same (a node created after its Device, or a status someone
rewrote). The handler remembers each Device it saw, and reads one it has not seen from the API
server, so that a node event arriving before its Device's at start does not strip the node.
"""

from __future__ import annotations

from typing import Any

import kopf
from pydantic import ValidationError

from apis.scheduling.device import Device
from operators.clients import DeviceNodeClient
from operators.handlers import errors
from operators.logic.device_allocatable import label_patch, status_patch

__all__ = ["DeviceAllocatable", "register"]


class DeviceAllocatable:
    def __init__(self, client: DeviceNodeClient) -> None:
        self.client = client
        self.devices: dict[str, Device | None] = {}
        """Device name (= node name) -> the Device as last seen; None when it is gone."""
        self.nodes: dict[str, dict[str, Any]] = {}
        """Node name -> its last seen body (labels and status are read from it)."""

    async def _sync(self, name: str, logger: kopf.Logger) -> None:
        node = self.nodes.get(name)
        if node is None:
            return  # not a node (yet): its own event will sync it
        device = self.devices.get(name)
        status = node.get("status") or {}
        patch = status_patch(device, status.get("capacity"), status.get("allocatable"))
        labels = label_patch(device, (node.get("metadata") or {}).get("labels"))
        try:
            if patch is not None:
                await self.client.patch_node_status(name, patch)
                logger.info(f"node {name} device resources: {patch['status'].get('allocatable')}")
            if labels is not None:
                await self.client.patch_node(name, labels)
        except errors.API_ERRORS as exc:
            logger.warning(f"node {name} device resources not written (retried on its next event): {exc}")

    async def on_device(
        self, type: str | None, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any
    ) -> None:
        try:
            self.devices[name] = None if type == "DELETED" else Device.model_validate(dict(body))
        except ValidationError as exc:
            logger.warning(f"Device {name} does not parse, its node is left as it is: {exc}")
            return
        await self._sync(name, logger)

    async def on_node(
        self, type: str | None, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any
    ) -> None:
        if type == "DELETED":
            self.nodes.pop(name, None)
            self.devices.pop(name, None)
            return
        self.nodes[name] = {
            "metadata": dict(body.get("metadata") or {}),
            "status": dict(body.get("status") or {}),
        }
        if name not in self.devices:
            try:
                self.devices[name] = await self.client.get_device(name)
            except errors.API_ERRORS as exc:
                logger.warning(f"Device {name} not read (retried on the node's next event): {exc}")
                return
        await self._sync(name, logger)


def register(registry: kopf.OperatorRegistry, client: DeviceNodeClient) -> DeviceAllocatable:
    handlers = DeviceAllocatable(client)
    info = Device.crd
    kopf.on.event(info.group, info.version, info.plural, id="device_allocatable", registry=registry)(
        handlers.on_device
    )
    kopf.on.event("", "v1", "nodes", id="device_allocatable_nodes", registry=registry)(handlers.on_node)
    return handlers
