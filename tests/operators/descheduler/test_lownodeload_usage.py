"""Node usage from NodeMetric, thresholds (absolute and deviation) and classification (12.2)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apis.slo.nodemetric import NodeMetric
from operators.descheduler.lownodeload.args import LowNodeLoadArgs, NodePool
from operators.descheduler.lownodeload.classify import classify
from operators.descheduler.lownodeload.thresholds import node_thresholds
from operators.descheduler.lownodeload.usage import ANNOTATION_RAW_ALLOCATABLE, NodeUsage, node_usage
from tests.operators.descheduler.fakes import NOW, make_metric, make_node, make_pod

NAMES = ("cpu", "memory")
GI = 1024**3


def _usage(metric: NodeMetric | None, **kw: object) -> NodeUsage | None:
    node = make_node("n1")
    pods = [
        make_pod("prod", "n1", qos="Burstable"),
        make_pod("batch", "n1", qos="BestEffort"),
        make_pod("done", "n1", phase="Succeeded"),
    ]
    return node_usage(node, pods, metric, NAMES, NOW, 180)


def test_usage_is_system_plus_every_reported_pod_and_prod_only_counts_prod_pods() -> None:
    metric = make_metric(
        "n1", {"prod": ("2", "4Gi"), "batch": ("3", "1Gi"), "gone": ("1", "1Gi")}, ("500m", "2Gi")
    )
    usage = _usage(metric)
    assert usage is not None
    assert usage.usage == {"cpu": 6500, "memory": 8 * GI}
    # Burstable pods are Prod (LS -> koord-prod); BestEffort is Batch; "gone" is not on the node
    assert usage.prod_usage == {"cpu": 2000, "memory": 4 * GI}
    assert [p.metadata.name for p in usage.pods] == ["batch", "prod"]  # terminal pods are left out


@pytest.mark.parametrize(
    "metric",
    [
        None,
        NodeMetric.model_validate({"metadata": {"name": "n1"}}),
        NodeMetric.model_validate({"metadata": {"name": "n1"}, "status": {"updateTime": NOW.isoformat()}}),
        make_metric("n1", {}, updated=NOW - timedelta(seconds=180)),
    ],
    ids=["no NodeMetric", "no status", "no nodeMetric", "expired (age >= expiration)"],
)
def test_a_node_without_a_usable_metric_is_skipped(metric: NodeMetric | None) -> None:
    assert _usage(metric) is None


def test_a_metric_just_younger_than_the_expiration_counts() -> None:
    assert _usage(make_metric("n1", {}, updated=NOW - timedelta(seconds=179))) is not None


def test_raw_allocatable_annotation_wins_over_status() -> None:
    node = make_node("n1", cpu="10")
    node.metadata.annotations = {ANNOTATION_RAW_ALLOCATABLE: '{"cpu": "8", "memory": "32Gi"}'}
    usage = node_usage(node, [], make_metric("n1", {}), NAMES, NOW, 180)
    assert usage is not None
    assert usage.allocatable == {"cpu": 8000, "memory": 32 * GI}


def _pool(**config: object) -> NodePool:
    return LowNodeLoadArgs.model_validate(config).pools()[0]


def _node(name: str, cpu_used: str, mem_used: str = "10Gi", **kw: object) -> NodeUsage:
    usage = node_usage(
        make_node(name, cpu="10", memory="100Gi", **kw),  # type: ignore[arg-type]
        [],
        make_metric(name, {}, system=(cpu_used, mem_used)),
        NAMES,
        NOW,
        180,
    )
    assert usage is not None
    return usage


def test_absolute_thresholds_floor_percent_of_allocatable() -> None:
    pool = _pool(lowThresholds={"cpu": 33.3}, highThresholds={"cpu": 66.6, "memory": 80})
    t = node_thresholds(pool, [_node("n1", "1")])["n1"]
    assert t.low["cpu"] == 3330
    assert t.high["cpu"] == 6660
    # memory has no low: the low takes the configured high (Koordinator overwrote the 80% with 100%)
    assert t.low["memory"] == t.high["memory"] == 80 * GI
    # without prod thresholds prod is bounded by allocatable only
    assert t.prod_high == {"cpu": 10000, "memory": 100 * GI}


def test_deviation_thresholds_around_the_mean_of_nodes_with_metrics() -> None:
    pool = _pool(useDeviationThresholds=True, lowThresholds={"cpu": 10}, highThresholds={"cpu": 10})
    nodes = [_node("a", "2"), _node("b", "4"), _node("c", "9")]  # mean 50%
    t = node_thresholds(pool, nodes)
    assert (t["a"].low["cpu"], t["a"].high["cpu"]) == (4000, 6000)
    # memory not configured: a zero deviation ignores it (both thresholds = allocatable)
    assert t["a"].low["memory"] == t["a"].high["memory"] == 100 * GI


def test_deviation_thresholds_clamp_to_0_and_100() -> None:
    pool = _pool(useDeviationThresholds=True, lowThresholds={"cpu": 80}, highThresholds={"cpu": 80})
    t = node_thresholds(pool, [_node("a", "5")])["a"]
    assert (t.low["cpu"], t.high["cpu"]) == (0, 10000)


def _classify(pool: NodePool, nodes: list[NodeUsage]) -> dict[str, list[str]]:
    c = classify(nodes, node_thresholds(pool, nodes))
    return {
        "low": [u.name for u in c.low],
        "bothLow": [u.name for u in c.both_low],
        "prodLow": [u.name for u in c.prod_low],
        "source": [u.name for u in c.sources],
        "prodHigh": [u.name for u in c.prod_high],
    }


def _with_prod(name: str, cpu_used: str, prod_cpu: str, unschedulable: bool = False) -> NodeUsage:
    """A node whose usage is ``cpu_used`` cores, of which ``prod_cpu`` by one Prod pod."""
    pod = make_pod(f"{name}-prod", name, qos="Guaranteed")
    usage = node_usage(
        make_node(name, unschedulable=unschedulable),
        [pod],
        make_metric(
            name, {f"{name}-prod": (prod_cpu, "1Gi")}, system=(str(float(cpu_used) - float(prod_cpu)), "1Gi")
        ),
        NAMES,
        NOW,
        180,
    )
    assert usage is not None
    return usage


def test_classification_without_prod_thresholds() -> None:
    pool = _pool(lowThresholds={"cpu": 30}, highThresholds={"cpu": 70})
    nodes = [
        _node("a", "3"),
        _node("b", "5"),
        _node("c", "7.001"),
        _node("d", "7"),
        _node("e", "1", unschedulable=True),
    ]
    # under low (<= on every resource) with no prod thresholds: bothLow; the band: prodLow;
    # over high (> on one): source; an unschedulable node is never a target
    assert _classify(pool, nodes) == {
        "low": [],
        "bothLow": ["a"],
        "prodLow": ["b", "d"],
        "source": ["c"],
        "prodHigh": [],
    }


def test_classification_with_prod_thresholds() -> None:
    pool = _pool(
        lowThresholds={"cpu": 40},
        highThresholds={"cpu": 80},
        prodLowThresholds={"cpu": 20},
        prodHighThresholds={"cpu": 30},
    )
    nodes = [
        _with_prod("low-prodhigh", "3.5", "3.5"),  # under low, prod over prodHigh
        _with_prod("low-bothlow", "3", "1"),  # under low, prod under prodLow
        _with_prod("low-only", "3", "2.5"),  # under low, prod between
        _with_prod("band-prodhigh", "6", "4"),
        _with_prod("band-prodlow", "6", "1"),
        _with_prod("band-neither", "6", "2.5"),
        _with_prod("hot", "9", "9"),  # over high: a source, prod not examined
    ]
    assert _classify(pool, nodes) == {
        "low": ["low-only"],
        "bothLow": ["low-bothlow"],
        "prodLow": ["band-prodlow"],
        "source": ["hot"],
        "prodHigh": ["band-prodhigh", "low-prodhigh"],
    }
