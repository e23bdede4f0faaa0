"""The NodeMetric koord-manager creates for a node: the default collect policy, owned by the node."""

from __future__ import annotations

from operators.logic.nodemetric import node_metric_for


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
