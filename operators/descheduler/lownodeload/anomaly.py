"""When a hot node is hot enough for long enough to move its pods (``filterRealAbnormalNodes``
and Koordinator's ``BasicDetector``), without Koordinator's bugs (algorithms.md 12.6):

- ``consecutiveAbnormalities`` N means N hot rounds in a row: N=1 acts at once, N=2 on the
  second round (Koordinator needs N+1 for N >= 2). A round in which the node is not hot resets
  its detector, in any state (Koordinator's ``Reset`` did nothing in the OK state, so hot marks
  far apart still added up).
- The Anomaly state lasts ``timeout`` after the node was *last* seen hot (Koordinator let it lapse
  ``timeout`` after entry even while the node stayed hot, then needed N+1 new rounds).
- Each eviction pass on an abnormal node adds a "normal" mark; after ``consecutiveNormalities``
  passes that did not cool it the node goes back to OK and needs N hot rounds again, a back-off
  for a node whose load no move relieves.
- A detector not marked for ``detectorCacheTimeout`` is forgotten.

Time is passed in (seconds, monotonic) so the rules are testable without sleeping.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from operators.descheduler.lownodeload.args import LoadAnomalyCondition

__all__ = ["AnomalyDetectors", "Detector", "State"]


class State(Enum):
    OK = "OK"
    ANOMALY = "Anomaly"


@dataclass(slots=True)
class Detector:
    condition: LoadAnomalyCondition
    state: State = State.OK
    abnormalities: int = 0
    normalities: int = 0
    anomaly_until: float = 0.0
    last_marked: float = 0.0

    def current(self, now: float) -> State:
        if self.state is State.ANOMALY and now >= self.anomaly_until:
            self.reset()
        return self.state

    def mark_abnormal(self, now: float) -> State:
        self.last_marked = now
        if self.current(now) is State.ANOMALY:
            self.anomaly_until = now + self.condition.timeout_seconds
            return self.state
        self.abnormalities += 1
        if self.abnormalities >= self.condition.consecutive_abnormalities:
            self.state = State.ANOMALY
            self.abnormalities = self.normalities = 0
            self.anomaly_until = now + self.condition.timeout_seconds
        return self.state

    def mark_normal(self, now: float) -> State:
        self.last_marked = now
        if self.current(now) is State.ANOMALY:
            self.normalities += 1
            if self.normalities >= self.condition.consecutive_normalities:
                self.reset()
        else:
            self.abnormalities = 0
        return self.state

    def reset(self) -> None:
        self.state = State.OK
        self.abnormalities = self.normalities = 0
        self.anomaly_until = 0.0


class AnomalyDetectors:
    """One detector per node name (one cache for node sources, another for prod sources)."""

    def __init__(self, cache_timeout_seconds: float) -> None:
        self._cache_timeout = cache_timeout_seconds
        self._detectors: dict[str, Detector] = {}

    def _expire(self, now: float) -> None:
        stale = [n for n, d in self._detectors.items() if now - d.last_marked >= self._cache_timeout]
        for name in stale:
            del self._detectors[name]

    def abnormal(self, hot: Iterable[str], condition: LoadAnomalyCondition, now: float) -> set[str]:
        """Mark each hot node once; the names now in Anomaly."""
        self._expire(now)
        result: set[str] = set()
        for name in hot:
            detector = self._detectors.get(name)
            if detector is None or detector.condition != condition:
                detector = self._detectors[name] = Detector(condition)
            if detector.mark_abnormal(now) is State.ANOMALY:
                result.add(name)
        return result

    def mark_normal(self, names: Iterable[str], now: float) -> None:
        for name in names:
            if (detector := self._detectors.get(name)) is not None:
                detector.mark_normal(now)

    def reset(self, names: Iterable[str]) -> None:
        for name in names:
            if (detector := self._detectors.get(name)) is not None:
                detector.reset()

    def state(self, name: str, now: float) -> State:
        detector = self._detectors.get(name)
        return detector.current(now) if detector is not None else State.OK
