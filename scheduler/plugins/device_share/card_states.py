"""The state of each card-table row's cards (capacity, use and which cards are real), and the rows
in each state: what the kept per-row arrays of the Fragmentation strategy (``single_card_memo``,
``shape_sums_memo``) follow from, row by row and element by element. Rows alike in state have the
same entries, so the kept arrays are computed once per state and a row brought to a state that
another row is kept in is copied from it: a node's cards are mostly idle or hold what the pods of
the common shapes hold, and on a few rows the cost of computing is mostly that of its numpy calls.
"""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.plugins.device_share.fragmentation import Cards

__all__ = ["CardStates", "states_of"]


def states_of(cards: Cards) -> list[bytes]:
    """Each row's capacity, use and real cards, as bytes."""
    count = cards.capacity.shape[0]
    packed = np.concatenate(
        [
            cards.capacity.reshape(count, -1),
            cards.used.reshape(count, -1),
            cards.valid.reshape(count, -1).astype(np.int64),
        ],
        axis=1,
    )
    raw, size = packed.tobytes(), packed.shape[1] * packed.itemsize
    return [raw[i : i + size] for i in range(0, count * size, size)]


class CardStates:
    def __init__(self, states: list[bytes]) -> None:
        self.state = states
        """Each row's state, as its kept entries were computed."""
        self.rows_in: dict[bytes, set[int]] = {}
        """A state -> the rows kept in it."""
        for row, state in enumerate(states):
            self.rows_in.setdefault(state, set()).add(row)
        self.one_in = {state: next(iter(rows)) for state, rows in self.rows_in.items()}
        """A state -> one of its rows (the first of a set that rows left is found by walking the
        slots they left: ~1,000 rows leave the idle state as a cluster fills)."""

    def one_of_each(self) -> tuple[IntArray, IntArray]:
        """A row in each state, and the place among them of each row's state: entries computed for
        the former, taken at the latter, are every row's."""
        place = {state: k for k, state in enumerate(self.one_in)}
        one_of_each = np.fromiter(self.one_in.values(), np.int64, len(place))
        each = np.fromiter((place[state] for state in self.state), np.int64, len(self.state))
        return one_of_each, each

    def move(self, rows: list[int], states: list[bytes]) -> tuple[list[int], IntArray, IntArray]:
        """``rows`` are now in ``states``: the rows in a state no other row is kept in (to be
        computed), and the rows in one that another row is kept in with that row (to be copied
        from it, ``to`` and ``of``). Rows whose state is unchanged are in neither."""
        rows_in, one_in = self.rows_in, self.one_in
        moved = [(row, state) for row, state in zip(rows, states, strict=True) if self.state[row] != state]
        for row, _ in moved:
            was = self.state[row]
            alike = rows_in[was]
            alike.discard(row)
            if not alike:
                del rows_in[was], one_in[was]
            elif one_in[was] == row:
                one_in[was] = next(iter(alike))
        new = [row for row, state in moved if state not in rows_in]
        copied = [(row, one_in[state]) for row, state in moved if state in rows_in]
        for row, state in moved:
            self.state[row] = state
            if state in rows_in:
                rows_in[state].add(row)
            else:
                rows_in[state], one_in[state] = {row}, row
        to = np.fromiter((row for row, _ in copied), np.int64, len(copied))
        of = np.fromiter((source for _, source in copied), np.int64, len(copied))
        return new, to, of
