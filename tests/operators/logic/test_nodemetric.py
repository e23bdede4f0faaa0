"""The NodeMetric koord-manager creates for a node: owned by the node, with the collect policy of
the node's colocation strategy (Koordinator's defaults without a config)."""

from __future__ import annotations

import json

from apis.slo.nodemetric import AggregatePolicy, NodeMetricCollectPolicy, default_collect_policy
from apis.slo.sloconfig.colocation import ParsedColocation, parse_colocation_config
from operators.logic.nodemetric import collect_policy_for, node_metric_for


def test_node_metric_has_the_slo_controller_defaults_and_the_node_as_owner() -> None:
    wire = node_metric_for("cpu-0", "uid-0").to_wire()
    assert wire["apiVersion"] == "slo.koordinator.sh/v1alpha1"
    assert wire["kind"] == "NodeMetric"
    assert wire["metadata"] == {
        "name": "cpu-0",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "cpu-0", "uid": "uid-0"}],
    }
    assert wire["spec"] == {
        "metricCollectPolicy": {
            "aggregateDurationSeconds": 300,
            "reportIntervalSeconds": 60,
            "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
            "nodeMemoryCollectPolicy": "usageWithoutPageCache",
        }
    }
    assert "status" not in wire


def _config(text: str) -> ParsedColocation:
    return parse_colocation_config(text)


CONFIG = json.dumps(
    {
        "enable": True,
        "metricAggregateDurationSeconds": 120,
        "metricReportIntervalSeconds": 30,
        "metricAggregatePolicy": {"durations": ["1m0s", "5m0s"]},
        "nodeConfigs": [
            {
                "name": "gpu",
                "nodeSelector": {"matchLabels": {"pool": "gpu"}},
                "metricReportIntervalSeconds": 90,
                "metricMemoryCollectPolicy": "usageWithPageCache",
            }
        ],
    }
)


def test_the_collect_policy_is_the_nodes_colocation_strategy() -> None:
    config = _config(CONFIG)
    assert collect_policy_for(config, {}, {}) == NodeMetricCollectPolicy(
        aggregate_duration_seconds=120,
        report_interval_seconds=30,
        node_aggregate_policy=AggregatePolicy(durations=["1m0s", "5m0s"]),
        node_memory_collect_policy="usageWithoutPageCache",
    )
    gpu = collect_policy_for(config, {"pool": "gpu"}, {})
    assert (gpu.report_interval_seconds, gpu.aggregate_duration_seconds) == (90, 120)
    assert gpu.node_memory_collect_policy == "usageWithPageCache"
    annotated = collect_policy_for(
        config, {}, {"node.koordinator.sh/colocation-strategy": '{"metricReportIntervalSeconds": 45}'}
    )
    assert annotated.report_interval_seconds == 45


def test_no_config_or_an_empty_key_gives_koordinators_defaults() -> None:
    assert collect_policy_for(None, {}, {}) == default_collect_policy()
    assert collect_policy_for(parse_colocation_config(None), {"pool": "gpu"}, {}) == default_collect_policy()


def test_a_memory_policy_the_crd_would_refuse_is_left_to_the_default() -> None:
    config = _config(json.dumps({"metricMemoryCollectPolicy": "usageWithSomethingElse"}))
    assert collect_policy_for(config, {}, {}).node_memory_collect_policy == "usageWithoutPageCache"


def test_the_node_metric_carries_the_policy_it_is_given() -> None:
    policy = collect_policy_for(_config(CONFIG), {}, {})
    wire = node_metric_for("cpu-0", "uid-0", policy).to_wire()
    assert wire["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 30
