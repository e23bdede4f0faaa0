"""The anomaly detector: Koordinator's rules with its bugs fixed (12.2, 12.6 bug 1)."""

from __future__ import annotations

import pytest

from operators.descheduler.lownodeload.anomaly import AnomalyDetectors, State
from operators.descheduler.lownodeload.args import LoadAnomalyCondition


def _condition(n: int, m: int = 3, timeout: str = "1m") -> LoadAnomalyCondition:
    return LoadAnomalyCondition(consecutive_abnormalities=n, consecutive_normalities=m, timeout=timeout)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_n_hot_rounds_in_a_row_make_an_anomaly(n: int) -> None:
    detectors = AnomalyDetectors(300)
    condition = _condition(n)
    rounds = [detectors.abnormal(["a"], condition, now=10.0 * i) for i in range(n)]
    # not before the n-th round (Koordinator needed n+1 for n >= 2), and at the n-th
    assert all(r == set() for r in rounds[:-1])
    assert rounds[-1] == {"a"}


def test_a_cool_round_breaks_the_run() -> None:
    detectors = AnomalyDetectors(300)
    condition = _condition(3)
    detectors.abnormal(["a"], condition, 0)
    detectors.abnormal(["a"], condition, 10)
    detectors.reset(["a"])  # Koordinator's Reset did nothing in the OK state
    assert detectors.abnormal(["a"], condition, 20) == set()
    assert detectors.abnormal(["a"], condition, 30) == set()
    assert detectors.abnormal(["a"], condition, 40) == {"a"}


def test_anomaly_lasts_timeout_after_the_last_hot_round() -> None:
    detectors = AnomalyDetectors(300)
    condition = _condition(1, timeout="30s")
    assert detectors.abnormal(["a"], condition, 0) == {"a"}
    # still hot at 25 s: extended to 55 s (Koordinator let it lapse at 30 s)
    assert detectors.abnormal(["a"], condition, 25) == {"a"}
    assert detectors.state("a", 50) is State.ANOMALY
    assert detectors.state("a", 55) is State.OK


def test_lapsed_anomaly_needs_n_new_rounds() -> None:
    detectors = AnomalyDetectors(300)
    condition = _condition(2, timeout="30s")
    detectors.abnormal(["a"], condition, 0)
    assert detectors.abnormal(["a"], condition, 1) == {"a"}
    assert detectors.state("a", 100) is State.OK
    assert detectors.abnormal(["a"], condition, 100) == set()
    assert detectors.abnormal(["a"], condition, 101) == {"a"}


def test_m_eviction_passes_that_do_not_cool_the_node_back_off() -> None:
    detectors = AnomalyDetectors(300)
    condition = _condition(1, m=2)
    assert detectors.abnormal(["a"], condition, 0) == {"a"}
    detectors.mark_normal(["a"], 1)
    assert detectors.abnormal(["a"], condition, 10) == {"a"}
    detectors.mark_normal(["a"], 11)
    assert detectors.state("a", 12) is State.OK


def test_a_detector_is_forgotten_after_the_cache_timeout() -> None:
    detectors = AnomalyDetectors(60)
    condition = _condition(2)
    detectors.abnormal(["a"], condition, 0)
    assert detectors.abnormal(["a"], condition, 60) == set()  # the first mark was forgotten
    assert detectors.abnormal(["a"], condition, 70) == {"a"}


def test_detectors_are_per_node() -> None:
    detectors = AnomalyDetectors(300)
    condition = _condition(2)
    detectors.abnormal(["a"], condition, 0)
    assert detectors.abnormal(["a", "b"], condition, 10) == {"a"}
