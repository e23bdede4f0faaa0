"""A FilterRecord replays, for any rows, what the plugin last answered about each of them: the
diagnosis counted from the replay is the one counted from a fresh call (a row-local plugin
answers each row alike whatever rows it is given with it)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from scheduler.framework.filter_record import FilterRecord
from scheduler.framework.interfaces import Diagnosis, FilterResult
from scheduler.framework.runtime import Framework

SIZE = 12
REASONS = ("Insufficient cpu", "Insufficient memory", "node(s) had untolerated taint")

Answer = tuple[tuple[str, ...], bool]
"""Per row: the reasons it is rejected for (a reason may repeat; none: accepted), unresolvable."""

answers = st.tuples(st.lists(st.sampled_from(REASONS), max_size=3).map(tuple), st.booleans())
row_sets = st.lists(st.integers(0, SIZE - 1), min_size=1, max_size=SIZE, unique=True)


def call(truth: list[Answer], rows: list[int]) -> FilterResult:
    """The plugin's answer about ``rows``, each reason listed as often as it repeats."""
    picked = [truth[r] for r in rows]
    rejections = []
    for reason in REASONS:
        for times in range(1, 4):
            mask = np.array([reasons.count(reason) >= times for reasons, _ in picked], dtype=np.bool_)
            if mask.any():
                rejections.append((reason, mask))
    feasible = np.array([not reasons for reasons, _ in picked], dtype=np.bool_)
    unresolvable = np.array([bool(reasons) and hard for reasons, hard in picked], dtype=np.bool_)
    return FilterResult(feasible=feasible, rejections=rejections, unresolvable=unresolvable)


def counted(result: FilterResult, rows: list[int]) -> tuple[list[int], Diagnosis]:
    diagnosis = Diagnosis()
    kept = Framework._count_rejections(result, "P", np.array(rows, dtype=np.int64), diagnosis)
    return kept.tolist(), diagnosis


@given(
    st.lists(st.tuples(st.lists(answers, min_size=SIZE, max_size=SIZE), row_sets), min_size=1, max_size=4),
    row_sets,
)
def test_a_replay_counts_what_a_fresh_call_counts(
    calls: list[tuple[list[Answer], list[int]]], asked: list[int]
) -> None:
    record = FilterRecord.empty(SIZE)
    latest: dict[int, Answer] = {}
    for truth, rows in calls:  # the answers change between calls, as a node's accounting does
        record.store(np.array(rows, dtype=np.int64), call(truth, rows))
        latest.update((r, truth[r]) for r in rows)
    asked = [r for r in asked if r in latest]
    if not asked:
        return
    truth = [latest.get(r, ((), False)) for r in range(SIZE)]
    fresh_rows, fresh = counted(call(truth, asked), asked)
    replayed_rows, replayed = counted(record.replay(np.array(asked, dtype=np.int64)), asked)
    assert replayed_rows == fresh_rows
    assert replayed.reason_counts == fresh.reason_counts
    assert replayed.unresolvable_rows == fresh.unresolvable_rows
    assert replayed.rejecting_plugins == fresh.rejecting_plugins
