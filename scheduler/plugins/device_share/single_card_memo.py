"""The Fragmentation strategy's parts for a one-card request (``fragmentation.SingleCardParts``)
on every node, kept per request shape and brought up to date for the nodes changed since.

Scoring a one-card pod rates every card of every node against every shape of the mix: on a
thousand nodes with thirty shapes that is (nodes x cards x shapes) work of ~10 ms, while a
placement changes one node. What depends on the cards alone is kept here per request, for every
card-table row and every shape seen with it (a shape's entries do not depend on the others, so a
new shape adds its columns); only the mix's weights, its shapes' cpu and memory and the nodes'
free cpu and memory are brought in per pod (``fragmentation.single_card_combine``). The kept
arrays take memory (rows x cards x shapes x 16 bytes): requests are dropped least recently used
beyond ``BUDGET_BYTES``.

A node's parts follow from the state of its cards alone (``card_states``): they are computed once
per state, and a node brought up to date in a state another node is kept in is copied from it; one
in a state of its own is summed from its cards' terms, kept per card state (``card_terms``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.plugins.device_share.card_states import CardStates
from scheduler.plugins.device_share.card_terms import KeptTerms
from scheduler.plugins.device_share.columns import column_index, rows_columns
from scheduler.plugins.device_share.fragmentation import (
    BoolArray,
    CardPicks,
    Cards,
    Shapes,
    SingleCardParts,
    shapes_of,
    single_card_parts,
    single_card_sums,
)
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.store import DeviceStore

__all__ = ["BUDGET_BYTES", "SingleCardMemo"]

BUDGET_BYTES = 96 * 2**20
"""Memory the kept parts may take, all requests together."""
_MAX_SHAPES_KEPT = 96
"""A request's kept shapes beyond this are dropped (with every column) and kept afresh."""


@dataclass(slots=True)
class _Kept:
    shapes: list[GPURequest]
    column: dict[GPURequest, int]
    parts: SingleCardParts
    """Over every card-table row, at the table's width, for ``shapes``."""
    synced: int
    layout: int
    card_side: Shapes
    """``_shape_only(shapes)``, for the rows brought up to date."""
    first: BoolArray
    """(rows, C): the request fits the card and the card before it in the row is not the same
    card in the same state (capacity and use): a card's parts are those of any card like it, and
    a node's cards are mostly taken in minor order, so that alike cards are neighbours (alike
    cards apart are both rated, which changes no node's best)."""
    states: CardStates
    """The rows' cards as their parts were computed."""
    terms: KeptTerms
    """The cards' terms per card state, for ``card_side``: the rows brought up to date in a state
    of their own are put together from them."""

    @property
    def nbytes(self) -> int:
        p = self.parts
        return (
            self.first.nbytes
            + self.terms.nbytes
            + sum(
                a.nbytes for a in (p.ok, p.free, p.free_after, p.holds, p.stranded, p.holds_c, p.stranded_c)
            )
        )


def _first_of_kind(cards: Cards, ok: BoolArray) -> BoolArray:
    """``_Kept.first`` of ``cards`` where the request fits ``ok``."""
    capacity, used = cards.capacity, cards.used
    like_the_last = np.zeros(ok.shape, dtype=np.bool_)
    like_the_last[:, 1:] = (
        (capacity[:, 1:, 0] == capacity[:, :-1, 0])
        & (capacity[:, 1:, 1] == capacity[:, :-1, 1])
        & (capacity[:, 1:, 2] == capacity[:, :-1, 2])
        & (used[:, 1:, 0] == used[:, :-1, 0])
        & (used[:, 1:, 1] == used[:, :-1, 1])
        & (used[:, 1:, 2] == used[:, :-1, 2])
    )
    first: BoolArray = ok & ~like_the_last
    return first


def _shape_only(shapes: list[GPURequest]) -> Shapes:
    """The card-side needs of ``shapes`` (weights and cpu do not enter the parts)."""
    return shapes_of(dict.fromkeys(shapes, 1.0))


class SingleCardMemo:
    def __init__(self, store: DeviceStore, budget_bytes: int = BUDGET_BYTES) -> None:
        self.store = store
        self.budget_bytes = budget_bytes
        self._kept: OrderedDict[GPURequest, _Kept] = OrderedDict()

    def parts(
        self, request: GPURequest, shapes: list[GPURequest], rows: IntArray, width: int
    ) -> SingleCardParts:
        """The parts of card ``rows`` for ``request`` and ``shapes`` (distinct, in this order), ``width``
        cards wide: equal to ``single_card_parts`` of those rows' cards."""
        kept = self._brought_up_to_date(request, shapes)
        at = self._at(kept, shapes)
        p = kept.parts
        # The rows are gathered with slices of the cards and columns (a 3-D fancy index of rows x
        # cards x shapes costs ~20x more).
        return SingleCardParts(
            p.ok[rows, :width],
            p.free[rows, :width],
            p.free_after[rows, :width],
            rows_columns(p.holds, rows, at),
            rows_columns(p.stranded, rows, at),
            rows_columns(p.holds_c, rows, at, width),
            rows_columns(p.stranded_c, rows, at, width),
        )

    def picks(self, request: GPURequest, shapes: list[GPURequest], rows: IntArray, width: int) -> CardPicks:
        """``parts`` of card ``rows`` with the card-side parts of each row's first card of each
        kind that fits the request only (``_Kept.first``); ``width``: C, the rows' blocks (a
        multiple of four), of which the cards picked are made a multiple by repeating the last."""
        kept = self._brought_up_to_date(request, shapes)
        at = self._at(kept, shapes)
        p = kept.parts
        table_width = p.ok.shape[1]
        flat = np.flatnonzero(kept.first[rows])
        node, card = flat // table_width, flat % table_width
        short = -node.size % width if node.size else 0
        if short:
            node = np.concatenate([node, np.full(short, node[-1])])
            card = np.concatenate([card, np.full(short, card[-1])])
        # Each card's row of every kept array flattened to (rows x cards, ...): taking whole rows
        # by one index costs about half the 2-D fancy index.
        picked = rows[node] * table_width + card
        shapes_kept = p.holds.shape[1]
        return CardPicks(
            node,
            width,
            np.take(p.free.reshape(-1), picked),
            np.take(p.free_after.reshape(-1), picked),
            rows_columns(p.holds_c.reshape(-1, shapes_kept), picked, at),
            rows_columns(p.stranded_c.reshape(-1, shapes_kept), picked, at),
            p.free[rows, :width],
            rows_columns(p.holds, rows, at),
            rows_columns(p.stranded, rows, at),
        )

    @staticmethod
    def _at(kept: _Kept, shapes: list[GPURequest]) -> IntArray | int:
        """The kept columns of ``shapes``, in order (``columns.column_index``)."""
        return column_index(np.fromiter((kept.column[s] for s in shapes), np.int64, len(shapes)))

    def _brought_up_to_date(self, request: GPURequest, shapes: list[GPURequest]) -> _Kept:
        store, table = self.store, self.store.cards()
        kept = self._kept.get(request)
        if kept is not None and kept.layout != table.layout:
            kept = None  # rows were added or the cards got wider: every row again
        if kept is not None:
            self._kept.move_to_end(request)
            changed = store.changed_since(kept.synced)
            if changed is None:
                kept = None
            else:
                rows = sorted(table.row[n] for n in changed)
                if rows:
                    self._refresh(kept, request, rows)
        new = [s for s in dict.fromkeys(shapes) if kept is None or s not in kept.column]
        grown = kept is None or bool(new)
        if kept is None or len(kept.shapes) + len(new) > _MAX_SHAPES_KEPT:
            kept = self._fresh(request, list(dict.fromkeys(shapes)))
        elif new:
            self._add_shapes(kept, request, new)
        kept.synced = store.changes
        if grown:
            self._within_budget()
        return kept

    def _fresh(self, request: GPURequest, shapes: list[GPURequest]) -> _Kept:
        table = self.store.cards()
        states = CardStates(table.states(range(table.rows_in_use)))
        card_side = _shape_only(shapes)
        one_of_each, each = states.one_of_each()
        cards = table.cards_at_width(one_of_each)
        alike = single_card_parts(cards, request, card_side)
        kept = _Kept(
            shapes,
            {s: k for k, s in enumerate(shapes)},
            SingleCardParts(*(getattr(alike, name)[each] for name in SingleCardParts.__slots__)),
            self.store.changes,
            table.layout,
            card_side,
            _first_of_kind(cards, alike.ok)[each],
            states,
            KeptTerms(request, card_side),
        )
        self._kept[request] = kept
        self._kept.move_to_end(request)
        return kept

    def _refresh(self, kept: _Kept, request: GPURequest, rows: list[int]) -> None:
        table = self.store.cards()
        new, to, of = kept.states.move(rows, table.states(rows))
        p = kept.parts
        if new:
            at = np.asarray(new, dtype=np.int64)
            cards = table.cards_at_width(at)
            fresh = single_card_sums(kept.terms.of(cards), kept.card_side)
            for name in SingleCardParts.__slots__:
                getattr(p, name)[at] = getattr(fresh, name)
            kept.first[at] = _first_of_kind(cards, fresh.ok)
        if to.size:
            for name in SingleCardParts.__slots__:
                values = getattr(p, name)
                values[to] = values[of]
            kept.first[to] = kept.first[of]

    def _add_shapes(self, kept: _Kept, request: GPURequest, shapes: list[GPURequest]) -> None:
        one_of_each, each = kept.states.one_of_each()
        more = single_card_parts(self.store.cards().cards_at_width(one_of_each), request, _shape_only(shapes))
        p = kept.parts
        kept.parts = SingleCardParts(
            p.ok,
            p.free,
            p.free_after,
            np.concatenate([p.holds, more.holds[each]], axis=-1),
            np.concatenate([p.stranded, more.stranded[each]], axis=-1),
            np.concatenate([p.holds_c, more.holds_c[each]], axis=-1),
            np.concatenate([p.stranded_c, more.stranded_c[each]], axis=-1),
        )
        for s in shapes:
            kept.column[s] = len(kept.shapes)
            kept.shapes.append(s)
        kept.card_side = _shape_only(kept.shapes)
        kept.terms.add_shapes(kept.card_side, _shape_only(shapes))

    def _within_budget(self) -> None:
        total = sum(k.nbytes for k in self._kept.values())
        while total > self.budget_bytes and len(self._kept) > 1:
            _, dropped = self._kept.popitem(last=False)
            total -= dropped.nbytes
