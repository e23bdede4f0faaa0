"""The Fragmentation strategy's per-shape card sums of every node (``fragmentation.shape_sums``),
kept and brought up to date for the nodes changed since, for rating pods without GPUs.

A pod without GPUs is rated by the cards its cpu and memory strand for the mix's shapes
(``fragmentation.host_deltas``): the nodes' cards are the same before and after, so what each
node's cards give each shape (how many fit it, the free share of those that do not) is kept per
card-table row and shape, and a pod brings in only the mix's weights and the nodes' cpu and memory.
On a thousand nodes with thirty shapes that is (nodes x cards x shapes) work saved per pod, while a
placement changes one node.

The kept columns are computed for every kept shape at once (two at least): numpy then sums each
node's cards in card order whatever the padding, as it does for the candidate nodes' arrays, so the
sums equal those computed afresh to the last bit. A node's sums follow from the state of its cards
alone (``card_states``): they are computed once per state, and a node brought up to date in a state
another node is kept in is copied from it; one in a state of its own is summed from its cards'
terms, kept per card state (``card_terms``).
"""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.plugins.device_share.card_states import CardStates
from scheduler.plugins.device_share.card_terms import KeptShapeTerms
from scheduler.plugins.device_share.columns import column_index, rows_columns
from scheduler.plugins.device_share.fragmentation import (
    FloatArray,
    Int64Array,
    free_share,
    shape_sums,
    shape_terms_sums,
    shapes_of,
)
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.store import DeviceStore

__all__ = ["MAX_SHAPES_KEPT", "ShapeSumsMemo"]

MAX_SHAPES_KEPT = 96
"""Beyond this, the kept shapes are those asked last."""


class ShapeSumsMemo:
    def __init__(self, store: DeviceStore) -> None:
        self.store = store
        self._shapes: list[GPURequest] = []
        self._column: dict[GPURequest, int] = {}
        self._fitting: Int64Array = np.zeros((0, 0), dtype=np.int64)
        """(rows, kept shapes): the cards that fit each shape."""
        self._stranded: FloatArray = np.zeros((0, 0), dtype=np.float64)
        """(rows, kept shapes): the free share of the cards that do not."""
        self._free: FloatArray = np.zeros((0, 0), dtype=np.float64)
        """(rows, table width): each card's free share."""
        self._states = CardStates([])
        self._terms = KeptShapeTerms(shapes_of({}))
        """The kept shapes' terms per card state: the rows brought up to date in a state of their
        own are summed from them."""
        self._synced = -1
        self._layout = -1

    def sums(
        self, shapes: list[GPURequest], rows: IntArray, width: int
    ) -> tuple[Int64Array, FloatArray, FloatArray]:
        """``fragmentation.shape_sums`` of card ``rows`` padded to ``width`` cards, for ``shapes``
        (distinct, two at least, in this order): (rows, K), (rows, K) and (rows,)."""
        assert len(shapes) >= 2, "one shape's sums round differently: computed afresh"
        self._brought_up_to_date(shapes)
        at = column_index(np.asarray([self._column[s] for s in shapes], dtype=np.int64))
        total: FloatArray = self._free[rows, :width].sum(axis=-1)
        # Rows with a slice of the columns: a 2-D fancy index (np.ix_) costs about three times more.
        return rows_columns(self._fitting, rows, at), rows_columns(self._stranded, rows, at), total

    def _brought_up_to_date(self, shapes: list[GPURequest]) -> None:
        store, table = self.store, self.store.cards()
        changed = store.changed_since(self._synced) if self._layout == table.layout else None
        new = [s for s in shapes if s not in self._column]
        if changed is None or new:
            kept = self._shapes + new if len(self._shapes) + len(new) <= MAX_SHAPES_KEPT else list(shapes)
            self._fresh(kept)
        elif changed:
            self._refresh(sorted(table.row[n] for n in changed))
        self._synced, self._layout = store.changes, table.layout

    def _fresh(self, shapes: list[GPURequest]) -> None:
        table = self.store.cards()
        self._states = CardStates(table.states(range(table.rows_in_use)))
        one_of_each, each = self._states.one_of_each()
        cards = table.cards_at_width(one_of_each)
        self._shapes, self._column = shapes, {s: k for k, s in enumerate(shapes)}
        self._terms = KeptShapeTerms(shapes_of(dict.fromkeys(shapes, 1.0)))
        fitting, stranded, _ = shape_sums(cards.capacity, cards.used, cards.valid, self._terms.shapes)
        self._fitting, self._stranded = fitting[each], stranded[each]
        self._free = free_share(cards.capacity, cards.used, cards.valid)[each]

    def _refresh(self, rows: list[int]) -> None:
        table = self.store.cards()
        new, to, of = self._states.move(rows, table.states(rows))
        if new:
            at = np.asarray(new, dtype=np.int64)
            terms = self._terms.of(table.cards_at_width(at))
            fitting, stranded, _ = shape_terms_sums(terms)
            self._fitting[at], self._stranded[at] = fitting, stranded
            self._free[at] = terms.free
        if to.size:
            for values in (self._fitting, self._stranded, self._free):
                values[to] = values[of]
