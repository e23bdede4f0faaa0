"""Window aggregates of the metric cache: average and nearest-rank percentiles, bounded storage."""

from __future__ import annotations

import pytest

from koordlet.metric_cache import Aggregate, MetricCache

KEY = ("node_cpu",)


def _filled(values: list[float]) -> MetricCache:
    cache = MetricCache()
    for second, value in enumerate(values):
        cache.append(KEY, float(second), value)
    return cache


def test_average_and_percentiles_over_a_window() -> None:
    cache = _filled([float(v) for v in range(1, 101)])  # 1..100 at t = 0..99
    window = cache.query(KEY, 0, 99)
    assert window is not None
    assert window.count == 100
    assert window.value("avg") == pytest.approx(50.5)
    assert window.value("p50") == 50  # the smallest value with 50 % of the samples at or below it
    assert window.value("p90") == 90
    assert window.value("p95") == 95
    assert window.value("p99") == 99
    assert window.duration_seconds == 99


def test_window_bounds_are_inclusive_and_select_samples() -> None:
    cache = _filled([1.0, 2.0, 3.0, 4.0, 5.0])
    window = cache.query(KEY, 1, 3)
    assert window is not None
    assert window.count == 3
    assert window.value("avg") == 3.0
    assert cache.query(KEY, 10, 20) is None
    assert cache.query(("other",), 0, 5) is None


def test_nearest_rank_on_few_samples() -> None:
    window = Aggregate.of([10.0, 1.0, 5.0], first=0, last=2)
    assert window.value("p50") == 5.0  # rank ceil(1.5) = 2
    assert window.value("p90") == 10.0  # rank ceil(2.7) = 3
    assert Aggregate.of([7.0], 0, 0).value("p99") == 7.0


def test_repeated_values_count_once_per_sample() -> None:
    window = Aggregate.of([1.0] * 9 + [100.0], first=0, last=9)
    assert window.levels == ((1.0, 9), (100.0, 1))
    assert window.value("p90") == 1.0
    assert window.value("p95") == 100.0
    assert window.value("avg") == pytest.approx(10.9)


def test_series_are_bounded_in_samples_and_time() -> None:
    cache = MetricCache(retention_seconds=10, max_samples=5)
    for second in range(20):
        cache.append(KEY, float(second), float(second))
        cache.append(("pod_cpu", "gone"), float(min(second, 3)), 1.0)
    window = cache.query(KEY, 0, 100)
    assert window is not None
    assert window.count == 5  # only the newest five are kept
    cache.expire(now=19.0)
    assert cache.labels("pod_cpu") == []  # nothing newer than the retention: the series goes
    assert cache.latest(KEY) == 19.0
