"""GPU partition tables of the machines whose NVLink layout is fixed (Koordinator v1.6/v1.7 notes).

The table itself is shared with koord-scheduler (:mod:`apis.extension.gpu_partition_tables`);
koordlet writes it into the Device annotation ``scheduling.koordinator.sh/gpu-partitions`` for an
8-GPU NVSwitch board of a known model, and the scheduler keeps to it (``Honor``) or prefers it.
"""

from __future__ import annotations

from apis.extension.device import GPUPartitionTable
from apis.extension.gpu_partition_tables import HGX_GPUS, KOORDLET_MODELS, hgx_partition_table, model_in

__all__ = ["HGX_MODELS", "partition_table"]

HGX_MODELS = KOORDLET_MODELS


def partition_table(model: str, minors: list[int], nvswitch: bool) -> GPUPartitionTable | None:
    """The table for an 8-GPU NVSwitch board of a known model, None for anything else."""
    if not nvswitch or not model_in(model, HGX_MODELS) or sorted(minors) != list(range(HGX_GPUS)):
        return None
    return hgx_partition_table()
