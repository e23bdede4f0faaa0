"""The cards the allocator gives a request shape on every node, as arrays over the card table's
rows (``card_table``), for the Fragmentation strategy's rating of placements it does not choose
itself (several cards, partitions): kept per request shape and asked again only for the nodes
changed since (``node_memo``), as PreFilter's refusals are. Only for cycles whose placement follows
from the request and the nodes' cards alone (``cycle.memoizable``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.plugins.device_share.cycle import Cycle
from scheduler.plugins.device_share.cycle_allocator import CycleAllocator
from scheduler.plugins.device_share.node_memo import ShapeCache

__all__ = ["Placements"]


@dataclass(slots=True)
class _Moves:
    moves: IntArray = field(default_factory=lambda: np.zeros((0, 0, 3), dtype=np.int64))
    """(card rows, C, 3): what the placement takes on each card of the row's node."""
    ok: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    """(card rows,): the node holds the request."""
    synced: int = -1
    layout: int = -1


class Placements:
    def __init__(self, allocator: CycleAllocator) -> None:
        self.allocator = allocator
        self.store = allocator.store
        self._shapes: ShapeCache[_Moves] = ShapeCache(_Moves)

    def moves(self, cycle: Cycle, rows: IntArray, width: int) -> tuple[IntArray, BoolArray]:
        """``fragmentation.moves_of`` of card ``rows`` for the cycle's request: ``(N, 1, width, 3)``
        and ``(N, 1)``."""
        kept = self._brought_up_to_date(cycle)
        return kept.moves[rows, :width][:, None], kept.ok[rows][:, None]

    def _brought_up_to_date(self, cycle: Cycle) -> _Moves:
        store, table = self.store, self.store.cards()
        kept = self._shapes.of((cycle.request, cycle.honor_partitions, cycle.no_template))
        if kept.layout != table.layout:
            kept.moves = np.zeros(table.capacity.shape, dtype=np.int64)
            kept.ok = np.zeros(table.capacity.shape[0], dtype=np.bool_)
            kept.layout, kept.synced = table.layout, -1
        changed = store.changed_since(kept.synced) if kept.synced >= 0 else None
        if changed is None:
            kept.moves[:] = 0
            kept.ok[:] = False
            changed = set(store.has_device)
        for node in changed:
            row = table.row[node]
            kept.moves[row] = 0
            kept.ok[row] = False
            chosen = self.allocator.allocate(node, cycle) if node in store.has_device else None
            if chosen is None:
                continue
            columns = [table.position(row, a.minor) for a in chosen]
            if any(c is None for c in columns):
                continue
            for column, a in zip(columns, chosen, strict=True):
                kept.moves[row, column] = (a.usage.core, a.usage.ratio, a.usage.memory)
            kept.ok[row] = True
        kept.synced = store.changes
        return kept
