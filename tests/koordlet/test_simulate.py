"""Simulation mode: the load file, the usage it gives over time, and a round of reports for many nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from apis.core import Pod
from apis.meta import ObjectMeta
from apis.slo.nodemetric import NodeMetric, NodeMetricCollectPolicy, NodeMetricSpec, NodeMetricStatus
from koordlet.collectors import series
from koordlet.config import KoordletConfig
from koordlet.metrics import KoordletMetrics
from koordlet.simulate.model import LoadFile, load_file
from koordlet.simulate.runner import Simulation
from koordlet.simulate.source import LoadSource
from koordlet.states.resources import Kind
from koordlet.states.store import States
from tests.koordlet.qos.podfactory import pod

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "koordlet" / "load.yaml"
GI = 1 << 30


def test_the_documented_example_loads() -> None:
    load = load_file(EXAMPLE)
    assert load.report_interval_seconds == 5
    assert load.for_node("cpu-3") is load.for_node("cpu-2")
    assert load.for_node("elsewhere") is load.default
    assert load.for_node("gpu-0").stop_reporting_after_seconds == 60  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"nodes": [{"usage": {"cpu": "1"}}]}, "exactly one of name or names"),
        ({"nodes": [{"name": "a"}, {"names": ["a", "b"]}]}, "described twice"),
        ({"nodes": [{"name": "a", "steps": [{"atSeconds": 20}, {"atSeconds": 10}]}]}, "increasing"),
        ({"nodes": [{"name": "a", "usage": {"cpus": "1"}}]}, "cpus"),
        ({"nodes": [{"name": "a", "usage": {"cpu": "lots"}}]}, "lots"),
    ],
)
def test_invalid_load_files_are_rejected_with_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        LoadFile.model_validate(doc)


def _node(doc: dict[str, Any]) -> LoadSource:
    load = LoadFile.model_validate({"nodes": [{"name": "n", **doc}]})
    return LoadSource(load.nodes[0], started=1000.0, sample_interval_seconds=1.0, history_seconds=None)


def test_steps_change_the_usage_and_windows_count_samples_per_step() -> None:
    source = _node(
        {"usage": {"cpu": "1", "memory": "1Gi"}, "steps": [{"atSeconds": 30, "usage": {"cpu": "4"}}]}
    )
    before = source.query((series.NODE_CPU,), 900, 1020)  # 121 samples, 1..1029 -> at 1030 the step
    assert before is not None
    assert before.levels == ((1.0, 121),)
    after = source.query((series.NODE_CPU,), 960, 1059)  # 100 samples: 70 before 1030, 30 from it
    assert after is not None
    assert after.levels == ((1.0, 70), (4.0, 30))
    assert after.value("avg") == pytest.approx(1.9)
    assert after.value("p50") == 1.0
    assert after.value("p90") == 4.0
    memory = source.query((series.NODE_MEMORY,), 960, 1059)
    assert memory is not None
    assert memory.levels == ((GI, 100),)  # the step left memory as it was


def test_node_usage_defaults_to_the_pods_and_system_is_the_rest() -> None:
    pods = [{"name": "a", "usage": {"cpu": "1", "memory": "1Gi"}}, {"name": "b", "usage": {"cpu": "2"}}]
    implicit = _node({"pods": pods})
    assert implicit.query((series.NODE_CPU,), 990, 1000).value("avg") == 3.0  # type: ignore[union-attr]
    explicit = _node({"usage": {"cpu": "5", "memory": "4Gi"}, "pods": pods})
    assert explicit.query((series.SYSTEM_CPU,), 990, 1000).value("avg") == 2.0  # type: ignore[union-attr]
    assert explicit.query((series.SYSTEM_MEMORY,), 990, 1000).value("avg") == 3 * GI  # type: ignore[union-attr]
    assert explicit.query((series.POD_CPU, "default/b"), 990, 1000).value("avg") == 2.0  # type: ignore[union-attr]
    assert explicit.query((series.POD_CPU, "default/c"), 990, 1000) is None


def test_limited_history_makes_long_windows_cold() -> None:
    load = LoadFile.model_validate({"nodes": [{"name": "n", "usage": {"cpu": "1"}}]})
    source = LoadSource(load.nodes[0], started=1000.0, sample_interval_seconds=1.0, history_seconds=0)
    window = source.query((series.NODE_CPU,), 400, 1010)
    assert window is not None
    assert window.duration_seconds == 10  # samples only from the start on


class FakeClient:
    """The NodeMetrics and bound pods as the cluster's watched states have them (no Node: no Prod
    prediction, tests/koordlet/test_prediction.py has it); the status writes."""

    def __init__(self, metrics: list[NodeMetric], pods: list[Pod]) -> None:
        self.states = States()
        self.states.replace(Kind.NODE_METRIC, metrics)
        self.states.replace(Kind.POD, pods)
        self.states.replace(Kind.NODE, [])
        self.written: dict[str, NodeMetricStatus] = {}

    async def update_status(self, metric: NodeMetric, status: NodeMetricStatus) -> None:
        self.written[metric.metadata.name or ""] = status


def _metric(name: str, interval: int = 60) -> NodeMetric:
    return NodeMetric(
        metadata=ObjectMeta(name=name),
        spec=NodeMetricSpec(metric_collect_policy=NodeMetricCollectPolicy(report_interval_seconds=interval)),
    )


async def test_a_round_reports_every_described_node() -> None:
    load = LoadFile.model_validate(
        {
            "nodes": [
                {
                    "name": "hot",
                    "usage": {"cpu": "7", "memory": "30Gi"},
                    "pods": [{"name": "web", "usage": {"cpu": "2", "memory": "2Gi"}}],
                },
                {"name": "gone", "usage": {"cpu": "1"}, "stopReportingAfterSeconds": 0},
            ],
            "default": {"usage": {"cpu": "500m", "memory": "1Gi"}},
        }
    )
    fake = FakeClient(
        [_metric("hot", 45), _metric("gone"), _metric("other")],
        [pod("web", qos="LS", priority=9500, node="hot")],
    )
    metrics = KoordletMetrics()
    simulation = Simulation(KoordletConfig(simulate=Path("load.yaml")), load, metrics)
    delay = await simulation.report_once(fake, fake.states)  # type: ignore[arg-type]
    assert delay == 45  # the shortest interval of the NodeMetrics reported
    assert sorted(fake.written) == ["hot", "other"]
    hot = fake.written["hot"].to_wire()
    assert hot["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "7", "memory": "30Gi"}}
    assert hot["nodeMetric"]["systemUsage"] == {"resources": {"cpu": "5", "memory": "28Gi"}}
    windows = hot["nodeMetric"]["aggregatedNodeUsages"]
    assert [w["duration"] for w in windows] == ["5m0s", "10m0s", "30m0s"]
    assert all(w["usage"]["p95"] == {"resources": {"cpu": "7", "memory": "30Gi"}} for w in windows)
    assert hot["podsMetric"] == [
        {
            "name": "web",
            "namespace": "default",
            "podUsage": {"resources": {"cpu": "2", "memory": "2Gi"}},
            "priority": "koord-prod",  # looked up from the pod, as the file gave none
            "qos": "LS",
        }
    ]
    assert fake.written["other"].to_wire()["nodeMetric"]["nodeUsage"]["resources"]["cpu"] == "500m"
    exposition = metrics.exposition().decode()
    assert 'koordlet_node_metric_node_usage{node="hot",resource="cpu",unit="core"} 7.0' in exposition


async def test_the_flag_overrides_the_report_interval() -> None:
    load = LoadFile.model_validate({"reportIntervalSeconds": 5, "default": {"usage": {"cpu": "1"}}})
    fake = FakeClient([_metric("a")], [])
    simulation = Simulation(
        KoordletConfig(simulate=Path("x"), report_interval_seconds=2), load, KoordletMetrics()
    )
    assert await simulation.report_once(fake, fake.states) == 2  # type: ignore[arg-type]
    simulation = Simulation(KoordletConfig(simulate=Path("x")), load, KoordletMetrics())
    assert await simulation.report_once(fake, fake.states) == 5  # type: ignore[arg-type]
