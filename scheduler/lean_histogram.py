"""A prometheus-client ``Histogram`` whose children count in plain Python lists.

prometheus-client's histogram child keeps its sum and each bucket in a value behind a lock of its
own and finds the bucket by a loop over the bounds: three Python calls and two locks per
observation. The scheduler observes about twenty per pod (every extension point of every cycle,
the attempt, the binding), all from the event loop's thread, so this child takes the bucket by
``bisect`` and adds to a list; a scrape reads the counts as prometheus-client's own would (bucket
samples cumulative, then ``_count``, ``_sum`` and ``_created``). Only what the scheduler uses is
kept: no exemplars, no multiprocess mode.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import cast

from prometheus_client import Histogram
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

__all__ = ["LeanHistogram"]

_go_string = cast("Callable[[float], str]", floatToGoString)
"""A bucket bound as prometheus-client writes it (``+Inf``, ``0.005``)."""


class LeanHistogram(Histogram):
    """``Histogram`` with lock-free children (observed from one thread; a scrape from another sees
    each count whole)."""

    def _metric_init(self) -> None:
        self._bounds = tuple(self._upper_bounds)
        self._counts = [0] * len(self._bounds)
        self._total = 0.0
        self._created = time.time()

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        """As ``Histogram.observe``: into the first bucket whose bound is not below ``amount``."""
        if exemplar is not None:
            raise ValueError("LeanHistogram keeps no exemplars")
        if self._labelnames and not self._labelvalues:  # the parent of labelled children
            raise ValueError(f"{self._type} metric is missing label values")
        self._total += amount
        at = bisect_left(self._bounds, amount)
        if at < len(self._counts) and amount <= self._bounds[at]:  # NaN falls in no bucket
            self._counts[at] += 1

    def _child_samples(self) -> Iterable[Sample]:
        samples = []
        acc = 0.0
        for bound, count in zip(self._bounds, list(self._counts), strict=True):
            acc += count
            samples.append(Sample("_bucket", {"le": _go_string(bound)}, acc, None, None))
        samples.append(Sample("_count", {}, acc, None, None))
        if self._bounds[0] >= 0:
            samples.append(Sample("_sum", {}, self._total, None, None))
        if prometheus_metrics._use_created:
            samples.append(Sample("_created", {}, self._created, None, None))
        return tuple(samples)
