"""Every node's cards in padded numpy arrays, one row per node the device store knows, so that
Filter and Score rate a thousand GPU nodes with a few array operations instead of walking each
node's cards in Python (the node table's counterpart for devices, ``scheduler/cache/node_table.py``).

The store marks a node when its Device or what pods hold on its cards changes, and the marked rows
are rewritten when the arrays are next read: a placement costs one row. Row 0 belongs to no node:
it stands for every node without a Device (no cards), so that node-table rows map onto card rows
with one index array (``index``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.plugins.device_share.allocator import GPU, GPUUsage
from scheduler.plugins.device_share.card_states import states_of
from scheduler.plugins.device_share.fragmentation import Cards
from scheduler.plugins.device_share.host_share import FloatArray, card_shares

__all__ = ["CardTable", "TableRows"]

_EMPTY_ROW = 0


class CardTable:
    def __init__(self, row_capacity: int = 64, card_capacity: int = 8) -> None:
        self.row: dict[str, int] = {}
        self.capacity: IntArray = np.zeros((row_capacity, card_capacity, 3), dtype=np.int64)
        """(rows, C, 3): core, ratio, memory of each card, in minor order (0 for padding)."""
        self.used: IntArray = np.zeros((row_capacity, card_capacity, 3), dtype=np.int64)
        """(rows, C, 3): what pods hold on each card."""
        self.valid: BoolArray = np.zeros((row_capacity, card_capacity), dtype=np.bool_)
        self.minors: IntArray = np.full((row_capacity, card_capacity), -1, dtype=np.int64)
        self.count: IntArray = np.zeros(row_capacity, dtype=np.int64)
        """The node's cards."""
        self.free_cards: FloatArray = np.zeros(row_capacity, dtype=np.float64)
        """The node's free cards (``host_share.card_shares``)."""
        self.device: BoolArray = np.zeros(row_capacity, dtype=np.bool_)
        """The node's Device object exists."""
        self.partitions: BoolArray = np.zeros(row_capacity, dtype=np.bool_)
        """The node's Device has a GPU partition table (whole-card requests may take a partition)."""
        self.npu: BoolArray = np.zeros(row_capacity, dtype=np.bool_)
        """A card of the node has NPU amounts, or pods hold some (the arrays leave them out)."""
        self._rows_used = 1
        self.layout = 0
        """Changes when a node gets a row or the cards get wider (the arrays are reallocated)."""
        self._index_names: list[str] | None = None
        self._index_key: tuple[int, int] = (-1, -1)
        self._index: IntArray = np.zeros(0, dtype=np.int64)
        self._states: list[bytes] = [b""] * row_capacity
        """Each row's ``card_states.states_of`` at the table's width, empty until asked since the
        row was last written: every kept request's one-card parts and the kept shape sums bring
        the same changed rows up to date."""

    @property
    def width(self) -> int:
        return int(self.capacity.shape[1])

    @property
    def rows_in_use(self) -> int:
        """Rows 0 to this one (excluded) are row 0 and the nodes' rows; the rest is room to grow,
        and changes with ``layout`` only."""
        return self._rows_used

    def write(
        self,
        name: str,
        gpus: Sequence[GPU],
        usage: Mapping[int, GPUUsage],
        *,
        device: bool,
        partitions: bool,
    ) -> None:
        """Rewrite ``name``'s row from its cards and their usage."""
        row = self.row.get(name)
        if row is None:
            row = self._new_row(name)
        if len(gpus) > self.width:
            self._grow(cards=max(len(gpus), 2 * self.width))
        self._states[row] = b""
        self.capacity[row] = 0
        self.used[row] = 0
        self.valid[row] = False
        self.minors[row] = -1
        for c, gpu in enumerate(gpus):
            self.capacity[row, c] = (gpu.core, gpu.ratio, gpu.memory)
            held = usage.get(gpu.minor)
            if held is not None:
                self.used[row, c] = (held.core, held.ratio, held.memory)
            self.valid[row, c] = True
            self.minors[row, c] = gpu.minor
        self.count[row] = len(gpus)
        self.free_cards[row] = float(card_shares([(gpus, usage)])[1][0]) if gpus else 0.0
        self.device[row] = device
        self.partitions[row] = partitions
        self.npu[row] = any(any(g.npu) for g in gpus) or any(any(u.npu) for u in usage.values())

    def _new_row(self, name: str) -> int:
        row = self._rows_used
        if row >= self.capacity.shape[0]:
            self._grow(rows=2 * self.capacity.shape[0])
        self._rows_used += 1
        self.row[name] = row
        self.layout += 1
        return row

    def _grow(self, rows: int | None = None, cards: int | None = None) -> None:
        new_rows = rows or self.capacity.shape[0]
        new_cards = cards or self.width
        old_rows, old_cards = self.capacity.shape[:2]

        def grown(old: np.ndarray, shape: tuple[int, ...], fill: object) -> np.ndarray:
            array = np.full(shape, fill, dtype=old.dtype)
            array[tuple(slice(0, n) for n in old.shape)] = old
            return array

        self.capacity = grown(self.capacity, (new_rows, new_cards, 3), 0)
        self.used = grown(self.used, (new_rows, new_cards, 3), 0)
        self.valid = grown(self.valid, (new_rows, new_cards), False)
        self.minors = grown(self.minors, (new_rows, new_cards), -1)
        for attr in ("count", "free_cards", "device", "partitions", "npu"):
            old: np.ndarray = getattr(self, attr)
            setattr(self, attr, grown(old, (new_rows,), old.dtype.type(0)))
        if (new_rows, new_cards) != (old_rows, old_cards):
            self.layout += 1
            self._states = [b""] * new_rows

    # ---- reading -----------------------------------------------------------------------------

    def index(self, names: list[str], names_layout: int) -> IntArray:
        """Node-table row -> card row (0 where the node has no Device row), for a node table whose
        ``names`` are as of its ``layout`` ``names_layout``; kept while neither layout changes."""
        key = (names_layout, self.layout)
        if names is not self._index_names or key != self._index_key:
            row = self.row
            self._index = np.fromiter((row.get(n, _EMPTY_ROW) for n in names), np.int64, len(names))
            self._index_names, self._index_key = names, key
        return self._index

    def widest(self, rows: IntArray) -> int:
        """The most cards among card ``rows``."""
        return int(self.count[rows].max()) if rows.size else 0

    def cards(self, rows: IntArray, width: int | None = None) -> Cards:
        """The cards of card ``rows`` as ``fragmentation.cards_of`` lays them out: padded to the
        most cards among these rows (or to ``width``, at least as many)."""
        width = self.widest(rows) if width is None else width
        return Cards(
            self.capacity[rows, :width],
            self.used[rows, :width],
            self.valid[rows, :width],
            self.minors[rows, :width],
        )

    def cards_at_width(self, rows: IntArray) -> Cards:
        """The cards of card ``rows``, padded to the table's width."""
        return Cards(self.capacity[rows], self.used[rows], self.valid[rows], self.minors[rows])

    def states(self, rows: Iterable[int]) -> list[bytes]:
        """``states_of`` the cards of card ``rows`` at the table's width."""
        rows = list(rows)
        kept = self._states
        missing = [row for row in rows if not kept[row]]
        if missing:
            fresh = states_of(self.cards_at_width(np.asarray(missing, dtype=np.int64)))
            for row, state in zip(missing, fresh, strict=True):
                kept[row] = state
        return [kept[row] for row in rows]

    def position(self, row: int, minor: int) -> int | None:
        """The column of card ``minor`` in ``row``."""
        found = np.flatnonzero(self.minors[row] == minor)
        return int(found[0]) if found.size else None


class TableRows:
    """Card ``rows`` of a table as ``fragmentation.CardRows``: their arrays are gathered only for
    the rows read (the Fragmentation strategy reads none where every node may take any card)."""

    def __init__(self, table: CardTable, rows: IntArray) -> None:
        self.table = table
        self.at = rows
        self.width = table.widest(rows)

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.at.size), self.width

    def rows(self, mask: BoolArray) -> Cards:
        return self.table.cards(self.at[mask], self.width)
