"""The reconcile's outcome: disabled and degraded nodes lose the resources; normalization scales batch-cpu."""

from __future__ import annotations

from fractions import Fraction

import pytest

from apis.quantity import Quantity
from apis.slo.sloconfig.colocation import default_colocation_strategy
from apis.slo.sloconfig.merge import merge_cfg
from operators.logic.noderesource.inputs import node_inputs
from operators.logic.noderesource.node_resources import (
    compute,
    cpu_normalization_ratio,
    normalized_batch_cpu,
)
from tests.operators.logic.noderesource.builders import NOW, metric, node, pod

ENABLED = merge_cfg(default_colocation_strategy(), {"enable": True})
REMOVED = dict.fromkeys(
    [
        "kubernetes.io/batch-cpu",
        "kubernetes.io/batch-memory",
        "kubernetes.io/mid-cpu",
        "kubernetes.io/mid-memory",
    ]
)


def test_enabled_node_gets_all_four() -> None:
    outcome = compute(node_inputs(node(), [pod("a", "4", "10Gi")], metric(pods={})), ENABLED, NOW, None)
    # 16000 - 6400 - 1000 - 4000 and 100Gi - 35Gi - 2Gi - 10Gi
    assert outcome.desired["kubernetes.io/batch-cpu"] == Quantity.parse("4600")
    assert outcome.desired["kubernetes.io/batch-memory"] == Quantity.parse("53Gi")
    assert outcome.desired["kubernetes.io/mid-cpu"] == Quantity.parse("0")
    assert str(outcome.desired["kubernetes.io/batch-memory"]) == "53Gi"


def test_disabled_removes_everything() -> None:
    outcome = compute(node_inputs(node(), [], metric()), default_colocation_strategy(), NOW, None)
    assert (outcome.desired, outcome.reason) == (REMOVED, "disabled")


@pytest.mark.parametrize(
    ("kw", "degraded"),
    [
        pytest.param({"age_minutes": 14}, False, id="fresh"),
        pytest.param({"age_minutes": 16}, True, id="stale"),
        pytest.param({"reported": False}, True, id="never-reported"),
    ],
)
def test_stale_node_metric_degrades(kw: dict[str, object], degraded: bool) -> None:
    outcome = compute(node_inputs(node(), [], metric(**kw)), ENABLED, NOW, None)  # type: ignore[arg-type]
    assert (outcome.desired == REMOVED) is degraded


def test_missing_node_metric_degrades() -> None:
    assert compute(node_inputs(node(), [], None), ENABLED, NOW, None).desired == REMOVED


def test_degrade_time_comes_from_the_strategy() -> None:
    strategy = merge_cfg(ENABLED, {"degradeTimeMinutes": 30})
    assert (
        compute(node_inputs(node(), [], metric(age_minutes=20)), strategy, NOW, None).reason == "calculated"
    )


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [
        pytest.param("1.5", 6900, id="1.5"),
        pytest.param("1.333", 6132, id="rounded-up"),  # 4600 x 1.333 = 6131.8
        pytest.param("1.00", 4600, id="one"),
        pytest.param("0.8", 4600, id="below-one"),
        pytest.param("abc", 4600, id="malformed"),
    ],
)
def test_batch_cpu_is_scaled_by_the_normalization_ratio(ratio: str, expected: int) -> None:
    annotations = {"node.koordinator.sh/cpu-normalization-ratio": ratio}
    outcome = compute(
        node_inputs(node(), [pod("a", "4", "10Gi")], metric(pods={})), ENABLED, NOW, annotations
    )
    assert outcome.desired["kubernetes.io/batch-cpu"] == Quantity.from_int(expected)
    assert outcome.desired["kubernetes.io/mid-cpu"] == Quantity.from_int(0)


def test_normalization_truncates_thousandths_then_rounds_up() -> None:
    assert cpu_normalization_ratio({"node.koordinator.sh/cpu-normalization-ratio": "1.20"}) == Fraction(6, 5)
    assert normalized_batch_cpu(3333, Fraction("1.333")) == 4443  # 4442.889 -> 4443
    assert normalized_batch_cpu(1000, None) == 1000


def test_a_node_config_cannot_enable_what_the_cluster_disables() -> None:
    outcome = compute(node_inputs(node(), [], metric()), ENABLED, NOW, None, cluster_enabled=False)
    assert (outcome.desired, outcome.reason) == (REMOVED, "disabled")
