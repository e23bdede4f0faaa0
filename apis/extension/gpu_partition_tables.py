"""Built-in GPU partition tables of the 8-GPU NVSwitch boards (Koordinator v1.6/v1.7).

An HGX board run by Fabric Manager in SharedNVSwitch mode lets a workload have only the GPU groups
NVIDIA's partition table lists: all eight, the two halves, the four pairs and each GPU alone. Every
partition of a size leaves an equally good rest, so all get allocationScore 1.

koordlet writes this table into a Device's ``gpu-partitions`` annotation for the models it knows
(:data:`KOORDLET_MODELS`); koord-scheduler falls back to it for a Device without that annotation
whose ``gpu-model`` is one of Koordinator's built-in models (:data:`SCHEDULER_MODELS`).
"""

from __future__ import annotations

import re

from apis.extension.device import GPUPartition, GPUPartitionTable

__all__ = [
    "HGX_GPUS",
    "KOORDLET_MODELS",
    "SCHEDULER_MODELS",
    "builtin_partition_table",
    "hgx_partition_table",
    "model_in",
]

HGX_GPUS = 8
KOORDLET_MODELS: tuple[str, ...] = ("H100", "H800", "A100", "H20")
SCHEDULER_MODELS: tuple[str, ...] = ("H100", "H800", "H20")
"""The models whose table koord-scheduler knows without a Device annotation (algorithms 6.3 b)."""


def model_in(model: str, names: tuple[str, ...]) -> bool:
    """Whether ``model`` (NVML's name or the label form, ``NVIDIA-H800``) is one of ``names``."""
    tokens = set(re.split(r"[\s\-_]+", model.upper()))
    return any(name in tokens for name in names)


def hgx_partition_table() -> GPUPartitionTable:
    """The partitions of an 8-GPU NVSwitch board: sizes 1, 2, 4 and 8, aligned to their size."""
    return {
        size: [
            GPUPartition(minors=list(range(start, start + size)), gpu_link_type="NVLink", allocation_score=1)
            for start in range(0, HGX_GPUS, size)
        ]
        for size in (1, 2, 4, 8)
    }


def builtin_partition_table(model: str | None, minors: list[int]) -> GPUPartitionTable | None:
    """koord-scheduler's table for a Device of ``model`` with ``minors``, None when it has none."""
    if not model or not model_in(model, SCHEDULER_MODELS) or sorted(minors) != list(range(HGX_GPUS)):
        return None
    return hgx_partition_table()
