"""PreFilter's fit and Score's card score for many card-table rows at once (``card_table``): what
``CycleAllocator.holds`` and ``allocator.node_score`` answer node by node, from the arrays, with
the same integer arithmetic. The kept per-shape answers (``filtering``, ``scoring``) ask them for
the nodes changed since the shape was last asked: about as many nodes as there are shapes in the
mix each pod, a few microseconds each here against tens in Python.

Neither looks at NPU amounts (the table has none): rows whose cards or usage have them
(``CardTable.npu``) and NPU requests are asked node by node.
"""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.plugins.device_share.allocator import ScoringType, Weights
from scheduler.plugins.device_share.card_table import CardTable
from scheduler.plugins.device_share.request import GPURequest

__all__ = ["fitting_cards", "node_scores"]

_CORE, _RATIO, _MEMORY = 0, 1, 2


def fitting_cards(table: CardTable, rows: IntArray, request: GPURequest) -> IntArray:
    """(rows,) how many of each row's cards can give a request without NPU amounts its per-card
    share (``allocator.fits`` card by card)."""
    capacity, used = table.capacity[rows], table.used[rows]
    if request.whole:
        idle = (used[..., _CORE] <= 0) & (used[..., _RATIO] <= 0) & (used[..., _MEMORY] <= 0)
        fit: BoolArray = idle & (capacity[..., _CORE] > 0)
    else:
        card_memory = capacity[..., _MEMORY]
        if request.ratio is not None:
            ratio: IntArray | int = request.ratio
        else:
            ratio_from_bytes = -(-(request.memory or 0) * 100 // np.maximum(card_memory, 1))
            ratio = np.where(card_memory > 0, ratio_from_bytes, 100)
        memory = request.memory if request.memory is not None else (request.ratio or 0) * card_memory // 100
        fit = (
            (used[..., _CORE] + request.core <= capacity[..., _CORE])
            & (used[..., _RATIO] + ratio <= capacity[..., _RATIO])
            & (used[..., _MEMORY] + memory <= card_memory)
        )
    counted: IntArray = (fit & table.valid[rows]).sum(axis=-1)
    return counted


def _percent(requested: IntArray, total: IntArray, strategy: ScoringType) -> IntArray:
    """``allocator.percent`` of each row (``total`` > 0 where the result is used)."""
    safe = np.maximum(total, 1)
    if strategy == "MostAllocated":
        most: IntArray = np.minimum(requested, total) * 100 // safe
        return most
    least: IntArray = np.where(requested <= total, (total - requested) * 100 // safe, 0)
    return least


def node_scores(
    table: CardTable, rows: IntArray, request: GPURequest, strategy: ScoringType, weights: Weights
) -> IntArray:
    """(rows,) ``allocator.node_score`` of each row's cards and usage (0 for a row without cards)."""
    capacity, used = table.capacity[rows], table.used[rows]
    first_memory = capacity[:, 0, _MEMORY]
    total_ratio, total_memory = capacity[..., _RATIO].sum(axis=-1), capacity[..., _MEMORY].sum(axis=-1)
    used_ratio, used_memory = used[..., _RATIO].sum(axis=-1), used[..., _MEMORY].sum(axis=-1)
    if request.whole:
        want_ratio: IntArray | int = 100
        want_memory: IntArray | int = first_memory
    else:
        if request.ratio is not None:
            want_ratio = request.ratio
        else:
            from_bytes = -(-(request.memory or 0) * 100 // np.maximum(first_memory, 1))
            want_ratio = np.where(first_memory > 0, from_bytes, 100)
        want_memory = (
            request.memory if request.memory is not None else (request.ratio or 0) * first_memory // 100
        )
    score_sum = np.zeros(rows.size, dtype=np.int64)
    weight_sum = np.zeros(rows.size, dtype=np.int64)
    for total, requested, weight in (
        (total_ratio, used_ratio + want_ratio, weights[0]),
        (total_memory, used_memory + want_memory, weights[1]),
    ):
        if not weight:
            continue
        scored = total != 0
        score_sum += np.where(scored, _percent(requested, total, strategy) * weight, 0)
        weight_sum += np.where(scored, weight, 0)
    weighted = (table.count[rows] > 0) & (weight_sum != 0)
    scores: IntArray = np.where(weighted, score_sum // np.where(weighted, weight_sum, 1), 0)
    return scores
