"""Columns of the arrays kept per shape (``single_card_memo``, ``shape_sums_memo``), taken for
the shapes a pod asks about, in its order."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from scheduler.cache.node_table import IntArray

__all__ = ["columns"]

_A = TypeVar("_A", npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.int64])


def columns(values: _A, at: IntArray) -> _A:
    """``values``' last axis at ``at``, C-ordered (BLAS then takes the mix's rows as they are, and
    sums them as it did): a slice while ``at`` is the first columns in order (the common case: the
    mix's shapes in the order they were first kept), a take otherwise."""
    if at.size and at[-1] == at.size - 1 and np.array_equal(at, np.arange(at.size)):
        return np.ascontiguousarray(values[..., : at.size])
    taken: _A = np.take(values, at, axis=-1)
    return taken
