"""Source order and the pod ordering keys, the v1.6 segmented usage score included (12.2)."""

from __future__ import annotations

import pytest

from apis.core import Pod
from operators.descheduler.lownodeload.ordering import (
    node_score,
    segmented_score,
    sort_pods,
    sort_sources,
)
from tests.operators.descheduler.fakes import make_pod

W = {"cpu": 1, "memory": 1}


def test_node_score_is_weighted_integer_per_mille() -> None:
    # cpu 2/3 -> 666, memory 1/3 -> 333; (2*666 + 333) // 3 = 555
    assert node_score({"cpu": 2, "memory": 1}, {"cpu": 3, "memory": 3}, {"cpu": 2, "memory": 1}) == 555
    # usage over allocatable counts as allocatable
    assert node_score({"cpu": 5, "memory": 0}, {"cpu": 3, "memory": 3}, W) == 500


def test_sources_hottest_first_ties_by_name() -> None:
    assert sort_sources([("b", 500), ("c", 900), ("a", 500)]) == ["c", "a", "b"]


@pytest.mark.parametrize(
    ("pod_cpu", "expected"),
    [(500, 0.5), (1000, 2.0), (2000, 1.5), (4000, 1.25)],
)
def test_segmented_score(pod_cpu: int, expected: float) -> None:
    # the node is 1000m over high on cpu, not over on memory (weight 0)
    score = segmented_score(
        {"cpu": pod_cpu, "memory": 10}, {"cpu": 9000, "memory": 1}, {"cpu": 8000, "memory": 5}, W
    )
    assert score == pytest.approx(expected)


def _names(pods: list[Pod]) -> list[str]:
    return [p.metadata.name or "" for p in pods]


def _sorted(pods: list[Pod], usage: dict[str, int] | None = None) -> list[str]:
    per_pod = {
        ("default", p.metadata.name or ""): {"cpu": (usage or {}).get(p.metadata.name or "", 100)}
        for p in pods
    }
    return _names(sort_pods(pods, per_pod, {"cpu": 9000}, {"cpu": 8000}, {"cpu": 1}))


def test_keys_in_order() -> None:
    pods = [
        make_pod("none", "n", priority=0, qos="Unknown"),  # no class from label, priority or QoS
        make_pod("prod", "n", priority=9500),
        make_pod("mid", "n", priority=7500),
        make_pod("batch", "n", priority=5500),
        make_pod("free", "n", priority=3500),
    ]
    # (1) Free < Batch < Mid < Prod < None
    assert _sorted(pods) == ["free", "batch", "mid", "prod", "none"]


def test_priority_value_then_kubernetes_qos_then_koordinator_qos() -> None:
    pods = [
        make_pod("prod-9600", "n", priority=9600),
        make_pod("prod-9500-guaranteed", "n", priority=9500, qos="Guaranteed"),
        make_pod("prod-9500-burstable", "n", priority=9500, qos="Burstable"),
        make_pod("prod-9500-burstable-lse", "n", priority=9500, labels={"koordinator.sh/qosClass": "LSE"}),
    ]
    assert _sorted(pods) == [
        "prod-9500-burstable",  # (3) Burstable < Guaranteed, (4) LS < LSE
        "prod-9500-burstable-lse",
        "prod-9500-guaranteed",
        "prod-9600",  # (2) higher priority value last
    ]


def test_deletion_cost_then_eviction_cost() -> None:
    pods = [
        make_pod("dc-10", "n", annotations={"controller.kubernetes.io/pod-deletion-cost": "10"}),
        make_pod("ec-5", "n", annotations={"scheduling.koordinator.sh/eviction-cost": "5"}),
        make_pod("plain", "n"),
        make_pod("dc-minus", "n", annotations={"controller.kubernetes.io/pod-deletion-cost": "-1"}),
    ]
    assert _sorted(pods) == ["dc-minus", "plain", "ec-5", "dc-10"]


def test_segmented_score_descending_then_unmeasured_then_newest_first() -> None:
    pods = [
        make_pod("small", "n", created=0),
        make_pod("exact", "n", created=0),
        make_pod("huge", "n", created=0),
        make_pod("old", "n", created=0),
        make_pod("new", "n", created=10),
        make_pod("unmeasured", "n"),
    ]
    per_pod = {
        ("default", "small"): {"cpu": 200},  # 0.2
        ("default", "exact"): {"cpu": 1000},  # 2
        ("default", "huge"): {"cpu": 5000},  # 1.2
        ("default", "old"): {"cpu": 100},
        ("default", "new"): {"cpu": 100},
    }
    ordered = _names(sort_pods(pods, per_pod, {"cpu": 9000}, {"cpu": 8000}, {"cpu": 1}))
    assert ordered == ["exact", "huge", "small", "new", "old", "unmeasured"]


def test_full_ties_break_by_name() -> None:
    pods = [make_pod(name, "n") for name in ("c", "a", "b")]
    assert _sorted(pods) == ["a", "b", "c"]
