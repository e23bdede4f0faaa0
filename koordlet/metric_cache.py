"""A bounded in-memory store of usage samples with window aggregates.

Each series (node CPU, one pod's memory, ...) keeps at most ``max_samples`` samples and none older
than ``retention_seconds``; a pod that is gone leaves nothing behind after the retention. A query
over ``[start, end]`` gives the average and the nearest-rank percentiles p50/p90/p95/p99 of the
samples in it, and the time their first and last sample span (the reporter's cold-start check).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = ["AGGREGATION_TYPES", "Aggregate", "AggregationType", "MetricCache", "MetricSource", "SeriesKey"]

AggregationType = Literal["avg", "p50", "p90", "p95", "p99"]
AGGREGATION_TYPES: tuple[AggregationType, ...] = ("avg", "p50", "p90", "p95", "p99")
_PERCENTILES: dict[AggregationType, float] = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}

SeriesKey = tuple[str, ...]
"""A metric name and its labels: ``("node_cpu",)``, ``("pod_memory", uid)``."""


@dataclass(frozen=True)
class Aggregate:
    """The samples of one series in a window, as distinct values with their sample counts."""

    levels: tuple[tuple[float, int], ...]
    """(value, how many samples had it), sorted by value; never empty."""
    first: float
    last: float
    """Times of the window's first and last sample."""

    @classmethod
    def of(cls, values: Iterable[float], first: float, last: float) -> Aggregate:
        counts: dict[float, int] = {}
        for value in values:
            counts[value] = counts.get(value, 0) + 1
        return cls(levels=tuple(sorted(counts.items())), first=first, last=last)

    @property
    def count(self) -> int:
        return sum(count for _, count in self.levels)

    @property
    def duration_seconds(self) -> float:
        """Seconds between the first and the last sample of the window."""
        return self.last - self.first

    def value(self, kind: AggregationType) -> float:
        """The average, or the nearest-rank percentile (the smallest sample with at least p of the
        samples at or below it)."""
        total = self.count
        if kind == "avg":
            return math.fsum(value * count for value, count in self.levels) / total
        rank = max(math.ceil(_PERCENTILES[kind] * total), 1)
        seen = 0
        for value, count in self.levels:
            seen += count
            if seen >= rank:
                return value
        return self.levels[-1][0]


class MetricSource(Protocol):
    """What the reporter reads: the metric cache, or the simulator's load functions."""

    def query(self, key: SeriesKey, start: float, end: float) -> Aggregate | None: ...


class MetricCache:
    def __init__(self, retention_seconds: float = 1800.0, max_samples: int = 4096) -> None:
        self.retention_seconds = retention_seconds
        self.max_samples = max_samples
        self._series: dict[SeriesKey, deque[tuple[float, float]]] = {}

    def append(self, key: SeriesKey, timestamp: float, value: float) -> None:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = deque(maxlen=self.max_samples)
        series.append((timestamp, value))

    def query(self, key: SeriesKey, start: float, end: float) -> Aggregate | None:
        """The samples of ``key`` taken in ``[start, end]``; None when there are none."""
        series = self._series.get(key)
        if not series:
            return None
        window = [(t, v) for t, v in series if start <= t <= end]
        if not window:
            return None
        times = [t for t, _ in window]
        return Aggregate.of((v for _, v in window), first=min(times), last=max(times))

    def latest(self, key: SeriesKey) -> float | None:
        series = self._series.get(key)
        return series[-1][1] if series else None

    def labels(self, name: str) -> list[str]:
        """The first label of every series named ``name`` (the pod UIDs of ``pod_cpu``)."""
        return sorted(key[1] for key in self._series if key[0] == name and len(key) > 1)

    def expire(self, now: float) -> None:
        """Drop samples older than the retention, and the series left empty."""
        horizon = now - self.retention_seconds
        for key in list(self._series):
            series = self._series[key]
            while series and series[0][0] < horizon:
                series.popleft()
            if not series:
                del self._series[key]

    def __len__(self) -> int:
        return len(self._series)
