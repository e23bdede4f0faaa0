"""``rows_columns`` gathers what ``columns`` of the rows gathered does, C-ordered as BLAS reads it,
whether the columns asked are the first in order (sliced with the rows) or not (taken)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.device_share.columns import column_index, columns, rows_columns
from tests.examples import examples


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.booleans())
def test_rows_columns_equals_the_columns_of_the_rows(seed: int, first: bool, three_d: bool) -> None:
    rng = np.random.default_rng(seed)
    kept = int(rng.integers(1, 12))
    values = rng.random((int(rng.integers(1, 20)), 5, kept) if three_d else (int(rng.integers(1, 20)), kept))
    rows = rng.integers(0, values.shape[0], int(rng.integers(0, 30)))
    count = int(rng.integers(1, kept + 1))
    asked = np.arange(count) if first else rng.permutation(kept)[:count]
    at = column_index(asked.astype(np.int64))
    assert isinstance(at, int) == (first or np.array_equal(asked, np.arange(count)))
    cards = int(rng.integers(1, 6)) if three_d else None
    expected = columns(values[rows] if cards is None else values[rows, :cards], at)
    got = rows_columns(values, rows, at, cards)
    assert got.flags.c_contiguous
    assert got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()
