"""Columns of the arrays kept per shape (``single_card_memo``, ``shape_sums_memo``), taken for
the shapes a pod asks about, in its order."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from scheduler.cache.node_table import IntArray

__all__ = ["column_index", "columns", "rows_columns"]

_A = TypeVar("_A", npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.int64])


def column_index(at: IntArray) -> IntArray | int:
    """``at`` as ``columns`` takes it: how many columns, where they are the first in order (the
    common case: the mix's shapes in the order they were first kept, sliced), else ``at`` itself
    (taken). Found once per ask, for every array asked."""
    if at.size and at[-1] == at.size - 1 and np.array_equal(at, np.arange(at.size)):
        return int(at.size)
    return at


def columns(values: _A, at: IntArray | int) -> _A:
    """``values``' last axis at ``at`` (``column_index``), C-ordered (BLAS then takes the mix's rows
    as they are, and sums them as it did)."""
    if isinstance(at, int):
        return np.ascontiguousarray(values[..., :at])
    taken: _A = values.take(at, axis=-1)
    return taken


def rows_columns(values: _A, rows: IntArray, at: IntArray | int, cards: int | None = None) -> _A:
    """``columns(values[rows], at)`` (``values[rows, :cards]`` for (rows, cards, shapes) arrays).
    Floats where the columns are the first in order are gathered at once with the slice: the rows
    whole and then a copy of the slice cost about twice as much on a thousand rows. Booleans are
    taken whole (``take`` copies a row of bytes at a time, faster than the slice of each row)."""
    if isinstance(at, int) and values.dtype != np.bool_:
        return values[rows, :at] if cards is None else values[rows, :cards, :at]
    taken = values.take(rows, axis=0)
    return columns(taken if cards is None else taken[:, :cards], at)
