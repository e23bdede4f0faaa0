"""What each card brings to the Fragmentation strategy's kept per-node arrays, kept per state of
a card (capacity, use, and whether it is real), for bringing the rows of changed nodes up to date
(``single_card_memo``: a one-card request's ``fragmentation.CardTerms``; ``shape_sums_memo``: the
shapes' ``fragmentation.ShapeTerms``).

A node's entries follow from its cards' terms, each from that card alone. A cluster's cards are in
few states (idle, or holding the shares of the common shapes) while its nodes' cards together are
in many: most nodes brought up to date are in a state no kept node is in, where most of their
cards are in a state some card was in. Terms are gathered per card and summed over each node's
cards as computing them afresh sums them (``fragmentation.single_card_sums``, ``shape_sums``), to
the same bits: every term is computed element by element from its own card.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar, cast

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.plugins.device_share.fragmentation import (
    Cards,
    CardTerms,
    Shapes,
    ShapeTerms,
    shape_terms,
    single_card_terms,
)
from scheduler.plugins.device_share.request import GPURequest

__all__ = ["MAX_CARD_STATES", "CardIndex", "KeptShapeTerms", "KeptTerms"]

_T = TypeVar("_T", CardTerms, ShapeTerms)

MAX_CARD_STATES = 4096
"""Beyond this, the kept states are dropped and kept afresh (a request's terms take up to
18 bytes per state and shape)."""


class CardIndex:
    """Card states -> their places among the kept terms, in the order first seen."""

    def __init__(self) -> None:
        self._index: dict[bytes, int] = {}
        self._packed: list[IntArray] = []
        """The cards of the states kept, as ``ids`` packs them, a batch per call that met some."""

    def __len__(self) -> int:
        return len(self._index)

    def clear(self) -> None:
        self._index.clear()
        self._packed.clear()

    def cards(self) -> Cards:
        """A card of each state kept, in the order of their places (one card per node)."""
        return one_card_nodes(
            np.concatenate(self._packed) if self._packed else np.zeros((0, 7), dtype=np.int64)
        )

    def ids(self, cards: Cards) -> tuple[IntArray, Cards]:
        """(N, C): each card's place, and the cards of the states new to the index (one card per
        node, in the order of their places) whose terms are to be kept next."""
        count, width = cards.shape
        packed = np.concatenate(
            [
                cards.capacity.reshape(-1, 3),
                cards.used.reshape(-1, 3),
                cards.valid.reshape(-1, 1).astype(np.int64),
            ],
            axis=1,
        )
        # Each card's seven numbers as one bytes object (numpy's void scalars list as bytes).
        keys = cast(
            list[bytes], packed.view(np.dtype((np.void, packed.shape[1] * packed.itemsize))).ravel().tolist()
        )
        index = self._index
        place = {key: i for i, key in enumerate(keys) if key not in index}
        for key in place:
            index[key] = len(index)
        new = packed[list(place.values())]
        if place:
            self._packed.append(new)
        ids: IntArray = np.fromiter((index[key] for key in keys), np.int64, len(keys)).reshape(count, width)
        return ids, one_card_nodes(new)


def one_card_nodes(packed: IntArray) -> Cards:
    """Each card of ``packed`` (capacity, use and whether it is real) as a node of its own."""
    count = packed.shape[0]
    return Cards(
        packed[:, None, 0:3].copy(),
        packed[:, None, 3:6].copy(),
        packed[:, None, 6].astype(np.bool_),
        np.zeros((count, 1), dtype=np.int64),
    )


_NO_CARDS = one_card_nodes(np.zeros((0, 7), dtype=np.int64))


class _KeptPerState(ABC, Generic[_T]):
    """Terms per card state: those of the states met so far, kept in the order of their places."""

    _kind: type[_T]

    def __init__(self) -> None:
        self._index = CardIndex()
        self._terms: _T = self._computed(_NO_CARDS)

    @property
    def nbytes(self) -> int:
        return sum(getattr(self._terms, name).nbytes for name in self._kind.__slots__)

    def of(self, cards: Cards) -> _T:
        """The terms of ``cards``, those of states not met before computed and kept."""
        if len(self._index) > MAX_CARD_STATES:
            self._index.clear()
            self._terms = self._computed(_NO_CARDS)
        ids, new = self._index.ids(cards)
        if new.valid.size:
            self._terms = self._joined(self._terms, self._computed(new))
        kept = self._terms
        return self._kind(*(getattr(kept, name)[ids] for name in self._kind.__slots__))

    def _joined(self, kept: _T, more: _T, fields: tuple[str, ...] = (), axis: int = 0) -> _T:
        """``kept`` with ``more``'s ``fields`` (all: more states) joined along ``axis``."""
        joined = fields or self._kind.__slots__
        return self._kind(
            *(
                np.concatenate([getattr(kept, name), getattr(more, name)], axis=axis)
                if name in joined
                else getattr(kept, name)
                for name in self._kind.__slots__
            )
        )

    @abstractmethod
    def _computed(self, cards: Cards) -> _T:
        """The terms of ``cards`` (one card per node), computed afresh."""


class KeptTerms(_KeptPerState[CardTerms]):
    """A one-card request's ``CardTerms`` per card state, for the shapes' card-side needs."""

    _kind = CardTerms

    def __init__(self, request: GPURequest, shapes: Shapes) -> None:
        self.request = request
        self.shapes = shapes
        super().__init__()

    def add_shapes(self, shapes: Shapes, more: Shapes) -> None:
        """The kept shapes are now ``shapes``: those kept and then ``more`` (card-side needs). Each
        shape's terms depend on that shape alone: only ``more``'s are computed, for every state
        kept (a request's kept shapes grow with the mix: dropping the states would compute again
        each one met)."""
        extra = self._computed(self._index.cards(), more)
        self.shapes = shapes
        self._terms = self._joined(self._terms, extra, ("fit", "fit_after", "held", "held_after"), axis=-1)

    def _computed(self, cards: Cards, shapes: Shapes | None = None) -> CardTerms:
        terms = single_card_terms(cards, self.request, self.shapes if shapes is None else shapes)
        return CardTerms(*(getattr(terms, name)[:, 0] for name in CardTerms.__slots__))


class KeptShapeTerms(_KeptPerState[ShapeTerms]):
    """The shapes' ``ShapeTerms`` per card state."""

    _kind = ShapeTerms

    def __init__(self, shapes: Shapes) -> None:
        self.shapes = shapes
        super().__init__()

    def _computed(self, cards: Cards) -> ShapeTerms:
        terms = shape_terms(cards.capacity, cards.used, cards.valid, self.shapes)
        return ShapeTerms(*(getattr(terms, name)[:, 0] for name in ShapeTerms.__slots__))
