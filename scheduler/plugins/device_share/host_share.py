"""The cards a pod's cpu and memory strand on GPU nodes: pure logic for the card-ordered strategies.

A GPU node's cpu and memory are bought for its cards: each card's share is the node's allocatable
cpu (memory) over its card count. A free card is **stranded** when the cpu or memory left on its
node no longer covers the shares of the node's free cards: on a node with ``free_cards`` free
(the free share of each card summed) and ``free`` cpu, ``free_cards - free / share`` cards are
stranded (the larger of the cpu and memory figures, 0..free_cards). A pod is rated by how many
cards its placement strands: ``stranded(after) - stranded(before)``, where after the pod has taken
its cpu and memory (and its cards' share, for a GPU pod). A pod without GPUs that takes cpu beside
free cards strands some of them, one that takes it where every card is in use strands none; a GPU
pod that asks for more cpu than its cards' share strands the node's other cards, one that asks for
less uses cards stranded before. No request mix is involved (that is the ``Fragmentation``
strategy's measure): only each node's own cpu and memory per card.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.plugins.device_share.allocator import GPU, GPUUsage

__all__ = ["UNBOUNDED", "CardShares", "card_shares", "stranded", "stranded_delta"]

FloatArray = npt.NDArray[np.float64]
Int64Array = npt.NDArray[np.int64]

UNBOUNDED = np.iinfo(np.int64).max // 4
"""The cpu or memory of a node that does not report it: nothing is stranded for want of it."""

CardShares = tuple[FloatArray, FloatArray]
"""(N,) the cards of each node and (N,) their free share summed (gpu-core, 0..1 per card)."""


def card_shares(nodes: Sequence[tuple[Sequence[GPU], Mapping[int, GPUUsage]]]) -> CardShares:
    """Each node's card count and free cards (an idle card counts 1, a card half in use 0.5)."""
    cards = np.zeros(len(nodes), dtype=np.float64)
    free = np.zeros(len(nodes), dtype=np.float64)
    for n, (gpus, usage) in enumerate(nodes):
        cards[n] = len(gpus)
        for gpu in gpus:
            if gpu.core > 0:
                used = usage.get(gpu.minor, GPUUsage()).core
                free[n] += min(max(gpu.core - used, 0), gpu.core) / gpu.core
    return cards, free


def stranded(cards: FloatArray, free_cards: FloatArray, capacity: Int64Array, free: Int64Array) -> FloatArray:
    """(..., N): the free cards whose share of the node's cpu or memory is gone. ``capacity`` and
    ``free``: (N, 2) and (..., N, 2) the nodes' allocatable and free cpu and memory
    (``UNBOUNDED`` or 0 where the node does not report one: nothing is stranded for want of it);
    ``free_cards``: (..., N), a leading axis rating the nodes in several states at once."""
    # cpu and memory taken apart: a reduction over an axis of two costs several times more.
    per_card = np.maximum(cards, 1.0)
    has_cards = cards > 0
    short = np.zeros(free_cards.shape, dtype=np.float64)
    for i in (0, 1):
        column = capacity[:, i]
        reported = has_cards & (column > 0) & (column < UNBOUNDED)
        covered = np.divide(
            np.maximum(free[..., i], 0),
            column / per_card,
            out=np.full(free_cards.shape, np.inf),
            where=reported,
        )
        np.maximum(short, np.minimum(np.maximum(free_cards - covered, 0.0), free_cards), out=short)
    result: FloatArray = np.where(has_cards, short, 0.0)
    return result


def stranded_delta(
    shares: CardShares,
    capacity: Int64Array,
    free: Int64Array,
    take: Int64Array,
    cards_taken: float = 0.0,
) -> FloatArray:
    """(N,): the cards stranded by placing, on each node, a pod that takes ``take`` (2,) cpu and
    memory and ``cards_taken`` cards (their free share), minus those stranded before (negative
    when the pod takes cards that were stranded)."""
    cards, free_cards = shares
    # Before and after side by side: the same arithmetic element by element in half the numpy
    # calls (on a thousand nodes each call's cost is mostly its own).
    states = stranded(
        cards,
        np.stack([free_cards, np.maximum(free_cards - cards_taken, 0.0)]),
        capacity,
        np.stack([free, free - take]),
    )
    delta: FloatArray = states[1] - states[0]
    return delta
