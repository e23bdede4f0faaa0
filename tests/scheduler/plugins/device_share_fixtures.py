"""Device objects and GPU pods for the DeviceShare tests."""

from __future__ import annotations

from typing import Any

from apis.scheduling.device import Device

GIB = 2**30


def gpu(
    minor: int,
    *,
    memory_gib: int = 80,
    numa: int | None = None,
    pcie: str | None = None,
    healthy: bool = True,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    info: dict[str, Any] = {
        "type": "gpu",
        "minor": minor,
        "id": f"GPU-{minor:04d}",
        "health": healthy,
        "resources": {
            "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory": f"{memory_gib}Gi",
            "koordinator.sh/gpu-memory-ratio": "100",
        },
    }
    if numa is not None:
        info["topology"] = {"socketID": numa, "nodeID": numa, "pcieID": pcie or f"pci{numa}"}
    if labels:
        info["labels"] = labels
    return info


def device(node: str, *gpus: dict[str, Any]) -> Device:
    return Device.model_validate({"metadata": {"name": node}, "spec": {"devices": list(gpus)}})


def eight_gpus(node: str, memory_gib: int = 80) -> Device:
    """A DGX-like node: two NUMA nodes, two PCIe switches per NUMA node, two GPUs per switch."""
    return device(
        node,
        *(gpu(m, memory_gib=memory_gib, numa=m // 4, pcie=f"pci{m // 2}") for m in range(8)),
    )
