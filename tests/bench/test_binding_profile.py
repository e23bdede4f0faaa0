"""The throughput bench's per-0.5-s profile of the bindings (``e2e.bench.bindings.binding_profile``)."""

from __future__ import annotations

from e2e.bench.bindings import binding_profile


def test_bindings_are_counted_per_slot_from_the_clock_to_the_last() -> None:
    times = [10.1, 10.2, 10.6, 11.9, 12.0]
    assert binding_profile(times, 10.0) == [2, 1, 0, 1, 1]
    assert sum(binding_profile(times, 10.0)) == len(times)


def test_a_binding_seen_before_the_clock_counts_in_the_first_slot() -> None:
    assert binding_profile([9.8, 10.3], 10.0) == [2]
    assert binding_profile([], 10.0) == []
