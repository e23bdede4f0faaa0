"""koord-manager's Device -> node allocatable handler on watch events, in either order."""

from __future__ import annotations

import logging
from typing import Any

from kubernetes_asyncio import client

from apis.extension import device as ext
from apis.scheduling.device import Device
from koordlet.devices.description import DeviceDescription
from koordlet.devices.device_object import build_device
from operators.handlers.device import DeviceAllocatable

LOG = logging.getLogger("test")


class FakeClient:
    def __init__(self, devices: dict[str, Device] | None = None) -> None:
        self.devices = devices or {}
        self.status: list[tuple[str, dict[str, Any]]] = []
        self.labels: list[tuple[str, dict[str, Any]]] = []
        self.fail = 0

    async def get_device(self, name: str) -> Device | None:
        return self.devices.get(name)

    async def patch_node_status(self, name: str, patch: dict[str, Any]) -> None:
        if self.fail:
            self.fail -= 1
            raise client.ApiException(status=503, reason="Service Unavailable")
        self.status.append((name, patch))

    async def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        self.labels.append((name, patch))


def _device_body(name: str, unhealthy: list[int] | None = None) -> dict[str, Any]:
    doc = {"gpus": {"count": 2, "memory": "16Gi", "unhealthy": unhealthy or []}}
    return build_device(name, "uid", DeviceDescription.model_validate(doc).inventory(name)).to_wire()


def _node(name: str, allocatable: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {}},
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


async def test_device_then_node_then_unhealthy_then_deleted() -> None:
    fake = FakeClient()
    handlers = DeviceAllocatable(fake)  # type: ignore[arg-type]
    await handlers.on_device(type=None, name="n1", body=_device_body("n1"), logger=LOG)  # type: ignore[arg-type]
    assert fake.status == []  # no node seen yet
    await handlers.on_node(type=None, name="n1", body=_node("n1", {"cpu": "8"}), logger=LOG)  # type: ignore[arg-type]
    [(name, patch)] = fake.status
    assert name == "n1"
    assert patch["status"]["allocatable"] == {
        ext.RESOURCE_GPU: "200",
        ext.RESOURCE_GPU_SHARED: "200",
        ext.RESOURCE_GPU_CORE: "200",
        ext.RESOURCE_GPU_MEMORY: "32Gi",
        ext.RESOURCE_GPU_MEMORY_RATIO: "200",
    }
    assert fake.labels[0][1]["metadata"]["labels"][ext.LABEL_GPU_VENDOR] == "nvidia"
    synced = {"cpu": "8", **patch["status"]["allocatable"]}
    await handlers.on_node(type="MODIFIED", name="n1", body=_node("n1", synced), logger=LOG)  # type: ignore[arg-type]
    assert len(fake.status) == 1  # already right: nothing written
    await handlers.on_device(type="MODIFIED", name="n1", body=_device_body("n1", [1]), logger=LOG)  # type: ignore[arg-type]
    assert fake.status[-1][1]["status"]["allocatable"][ext.RESOURCE_GPU_CORE] == "100"
    await handlers.on_device(type="DELETED", name="n1", body=_device_body("n1"), logger=LOG)  # type: ignore[arg-type]
    assert fake.status[-1][1]["status"]["allocatable"] == {
        ext.RESOURCE_GPU: None,
        ext.RESOURCE_GPU_SHARED: None,
        ext.RESOURCE_GPU_CORE: None,
        ext.RESOURCE_GPU_MEMORY: None,
        ext.RESOURCE_GPU_MEMORY_RATIO: None,
    }


async def test_a_node_seen_before_its_device_reads_the_device_instead_of_stripping_the_node() -> None:
    body = _device_body("n1")
    fake = FakeClient({"n1": Device.model_validate(body)})
    handlers = DeviceAllocatable(fake)  # type: ignore[arg-type]
    allocatable = {
        ext.RESOURCE_GPU: "200",
        ext.RESOURCE_GPU_SHARED: "200",
        ext.RESOURCE_GPU_CORE: "200",
        ext.RESOURCE_GPU_MEMORY: "32Gi",
        ext.RESOURCE_GPU_MEMORY_RATIO: "200",
    }
    await handlers.on_node(type=None, name="n1", body=_node("n1", allocatable), logger=LOG)  # type: ignore[arg-type]
    assert fake.status == []


async def test_a_failed_write_is_retried_on_the_next_event() -> None:
    fake = FakeClient()
    fake.fail = 1
    handlers = DeviceAllocatable(fake)  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="n1", body=_node("n1", {}), logger=LOG)  # type: ignore[arg-type]
    await handlers.on_device(type="ADDED", name="n1", body=_device_body("n1"), logger=LOG)  # type: ignore[arg-type]
    assert fake.status == []
    await handlers.on_node(type="MODIFIED", name="n1", body=_node("n1", {}), logger=LOG)  # type: ignore[arg-type]
    assert len(fake.status) == 1
