"""The collector protocol and the set that runs them, logging each failure once."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from koordlet.metric_cache import MetricCache

__all__ = ["Collector", "CollectorSet"]

log = logging.getLogger("koordlet.collectors")


class Collector(Protocol):
    @property
    def name(self) -> str: ...

    def collect(self, now: float, cache: MetricCache) -> None:
        """Sample once at wall-clock ``now``; raise OSError or ValueError when it cannot."""


class CollectorSet:
    def __init__(self, collectors: Sequence[Collector]) -> None:
        self.collectors = list(collectors)
        self.failing: dict[str, str] = {}
        """Collector name -> the error it last failed with (logged when it first appeared)."""

    def collect(self, now: float, cache: MetricCache) -> None:
        for collector in self.collectors:
            try:
                collector.collect(now, cache)
            except (OSError, ValueError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
                if collector.name not in self.failing:
                    log.warning("collector %s skipped: %s", collector.name, problem)
                self.failing[collector.name] = problem
                continue
            if self.failing.pop(collector.name, None) is not None:
                log.info("collector %s collects again", collector.name)
        cache.expire(now)
