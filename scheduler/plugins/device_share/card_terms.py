"""A one-card request's ``fragmentation.CardTerms`` kept per state of a card (capacity, use, and
whether it is real), for bringing the kept one-card parts of changed nodes up to date
(``single_card_memo``).

A node's parts follow from its cards' terms, each from that card alone. A cluster's cards are in
few states (idle, or holding the shares of the common shapes) while its nodes' cards together are
in many: most nodes brought up to date are in a state no kept node is in, where most of their
cards are in a state some card was in. Terms are gathered per card and summed over each node's
cards as ``single_card_parts`` sums them (``fragmentation.single_card_sums``), to the same bits:
every term is computed element by element from its own card.
"""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.plugins.device_share.fragmentation import Cards, CardTerms, Shapes, single_card_terms
from scheduler.plugins.device_share.request import GPURequest

__all__ = ["MAX_CARD_STATES", "KeptTerms"]

MAX_CARD_STATES = 1 << 16
"""Beyond this, the kept states are dropped and kept afresh."""


class KeptTerms:
    def __init__(self, request: GPURequest, shapes: Shapes) -> None:
        self.request = request
        self.shapes = shapes
        """The shapes' card-side needs (weights do not enter the terms)."""
        self._index: dict[bytes, int] = {}
        """A card's capacity, use and whether it is real, as bytes -> its place in ``_terms``."""
        self._terms = self._computed(np.zeros((0, 7), dtype=np.int64))

    def of(self, cards: Cards) -> CardTerms:
        """``single_card_terms`` of ``cards``."""
        ids = self._ids(cards)
        kept = self._terms
        return CardTerms(*(getattr(kept, name)[ids] for name in CardTerms.__slots__))

    def _ids(self, cards: Cards) -> IntArray:
        count, width = cards.shape
        packed = np.concatenate(
            [
                cards.capacity.reshape(-1, 3),
                cards.used.reshape(-1, 3),
                cards.valid.reshape(-1, 1).astype(np.int64),
            ],
            axis=1,
        )
        keys: list[bytes] = (
            packed.view(np.dtype((np.void, packed.shape[1] * packed.itemsize))).ravel().tolist()
        )
        index = self._index
        if any(key not in index for key in keys):
            if len(index) > MAX_CARD_STATES:
                index.clear()
                self._terms = self._computed(packed[:0])
            place = {key: i for i, key in enumerate(keys) if key not in index}
            more, kept = self._computed(packed[list(place.values())]), self._terms
            self._terms = CardTerms(
                *(np.concatenate([getattr(kept, name), getattr(more, name)]) for name in CardTerms.__slots__)
            )
            for key in place:
                index[key] = len(index)
        ids: IntArray = np.fromiter((index[key] for key in keys), np.int64, len(keys)).reshape(count, width)
        return ids

    def _computed(self, packed: IntArray) -> CardTerms:
        """The terms of ``packed`` cards (as ``_ids`` packs them), one per card."""
        terms = single_card_terms(_cards(packed), self.request, self.shapes)
        return CardTerms(*(getattr(terms, name)[:, 0] for name in CardTerms.__slots__))


def _cards(packed: IntArray) -> Cards:
    """Each card of ``packed`` (capacity, use and whether it is real) as a node of its own."""
    count = packed.shape[0]
    return Cards(
        packed[:, None, 0:3].copy(),
        packed[:, None, 3:6].copy(),
        packed[:, None, 6].astype(np.bool_),
        np.zeros((count, 1), dtype=np.int64),
    )
