"""GPU partition tables of the machines whose NVLink layout is fixed (Koordinator v1.6/v1.7 notes).

An 8-GPU HGX board with NVSwitches (H100, H800, A100, H20) run by Fabric Manager in SharedNVSwitch
mode lets a workload have only the GPU groups NVIDIA's partition table lists: all eight, the two
halves, the four pairs and each GPU alone. koordlet writes the table into the Device annotation
``scheduling.koordinator.sh/gpu-partitions``; the scheduler keeps to it (``Honor``) or prefers it.
Every partition of a size leaves an equally good rest, so all get allocationScore 1.
"""

from __future__ import annotations

import re

from apis.extension.device import GPUPartition, GPUPartitionTable

__all__ = ["HGX_MODELS", "partition_table"]

HGX_MODELS = ("H100", "H800", "A100", "H20")
_GPUS = 8


def _known_model(model: str) -> bool:
    tokens = set(re.split(r"[\s\-_]+", model.upper()))
    return any(name in tokens for name in HGX_MODELS)


def partition_table(model: str, minors: list[int], nvswitch: bool) -> GPUPartitionTable | None:
    """The table for an 8-GPU NVSwitch board of a known model, None for anything else."""
    if not nvswitch or not _known_model(model) or sorted(minors) != list(range(_GPUS)):
        return None
    table: GPUPartitionTable = {}
    for size in (1, 2, 4, 8):
        table[size] = [
            GPUPartition(minors=list(range(start, start + size)), gpu_link_type="NVLink", allocation_score=1)
            for start in range(0, _GPUS, size)
        ]
    return table
