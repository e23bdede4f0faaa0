"""colocation-config: Koordinator's defaults, validity, the nodeConfigs overlay and the per-node strategy."""

from __future__ import annotations

import json

import pytest

from apis.slo.sloconfig.colocation import (
    ColocationStrategy,
    default_colocation_strategy,
    is_colocation_strategy_valid,
    node_colocation_strategy,
    parse_colocation_config,
)


def test_missing_key_is_koordinators_defaults() -> None:
    cluster = parse_colocation_config(None).cluster
    assert cluster.to_wire() == {
        "enable": False,
        "metricAggregateDurationSeconds": 300,
        "metricReportIntervalSeconds": 60,
        "metricAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
        "metricMemoryCollectPolicy": "usageWithoutPageCache",
        "cpuReclaimThresholdPercent": 60,
        "cpuCalculatePolicy": "usage",
        "memoryReclaimThresholdPercent": 65,
        "memoryCalculatePolicy": "usage",
        "degradeTimeMinutes": 15,
        "updateTimeThresholdSeconds": 300,
        "resourceDiffThreshold": 0.1,
        "midCPUThresholdPercent": 100,
        "midMemoryThresholdPercent": 100,
        "midUnallocatedPercent": 0,
        "midStaticCPUReservedPercent": 0,
        "midStaticMemoryReservedPercent": 0,
    }


def test_every_koordinator_field_reads_by_its_wire_name() -> None:
    wire = {
        "enable": True,
        "metricAggregateDurationSeconds": 120,
        "metricReportIntervalSeconds": 30,
        "metricAggregatePolicy": {"durations": ["5m", "15m"]},
        "metricMemoryCollectPolicy": "usageWithPageCache",
        "cpuReclaimThresholdPercent": 70,
        "cpuCalculatePolicy": "maxUsageRequest",
        "memoryReclaimThresholdPercent": 80,
        "memoryCalculatePolicy": "request",
        "degradeTimeMinutes": 5,
        "updateTimeThresholdSeconds": 60,
        "resourceDiffThreshold": 0.2,
        "midReclaimMode": "static",
        "midCPUThresholdPercent": 50,
        "midMemoryThresholdPercent": 40,
        "midUnallocatedPercent": 10,
        "midStaticCPUReservedPercent": 20,
        "midStaticMemoryReservedPercent": 30,
        "batchCPUThresholdPercent": 90,
        "batchMemoryThresholdPercent": 80,
        "extensions": {"vendor": {"x": 1}},
    }
    assert parse_colocation_config(json.dumps(wire)).cluster.to_wire() == wire


def test_top_level_overlays_the_defaults_and_node_configs_overlay_the_cluster() -> None:
    text = json.dumps(
        {
            "enable": True,
            "cpuReclaimThresholdPercent": 70,
            "nodeConfigs": [
                {"name": "bad", "nodeSelector": {"matchLabels": {"pool": "x"}}, "degradeTimeMinutes": 0},
                {
                    "name": "big",
                    "nodeSelector": {"matchLabels": {"pool": "big"}},
                    "memoryReclaimThresholdPercent": 50,
                },
                {"name": "also-big", "nodeSelector": {"matchLabels": {"pool": "big"}}, "enable": False},
            ],
        }
    )
    config = parse_colocation_config(text)
    assert config.cluster.cpu_reclaim_threshold_percent == 70
    assert config.cluster.memory_reclaim_threshold_percent == 65
    big = node_colocation_strategy(config, {"pool": "big"}, None).strategy
    assert (big.enable, big.cpu_reclaim_threshold_percent, big.memory_reclaim_threshold_percent) == (
        True,
        70,
        50,
    )
    # an entry whose merged strategy is invalid is replaced by the cluster strategy
    assert node_colocation_strategy(config, {"pool": "x"}, None).strategy == config.cluster
    assert node_colocation_strategy(config, {}, None).strategy == config.cluster


def test_node_annotation_then_ratio_labels() -> None:
    config = parse_colocation_config('{"enable": true}')
    labels = {
        "node.koordinator.sh/cpu-reclaim-ratio": "0.55",
        "node.koordinator.sh/memory-reclaim-ratio": "-1",
        "node.koordinator.sh/mid-static-cpu-reserved-ratio": "abc",
        "node.koordinator.sh/mid-static-memory-reserved-ratio": "0.3",
    }
    annotations = {
        "node.koordinator.sh/colocation-strategy": '{"cpuReclaimThresholdPercent": 80, "enable": false}'
    }
    result = node_colocation_strategy(config, labels, annotations)
    s = result.strategy
    assert result.problem is None
    assert s.enable is False
    assert s.cpu_reclaim_threshold_percent == 55  # the label wins over the annotation
    assert s.memory_reclaim_threshold_percent == 65  # negative label ignored
    assert s.mid_static_cpu_reserved_percent == 0  # unparsable label ignored
    assert s.mid_static_memory_reserved_percent == 30


def test_malformed_node_annotation_is_skipped_and_named() -> None:
    config = parse_colocation_config('{"enable": true}')
    result = node_colocation_strategy(
        config, {}, {"node.koordinator.sh/colocation-strategy": '{"enable": "yes"}'}
    )
    assert result.strategy == config.cluster
    assert result.problem is not None
    assert "node.koordinator.sh/colocation-strategy" in result.problem
    assert "enable" in result.problem


@pytest.mark.parametrize(
    ("text", "names"),
    [
        pytest.param("{not json", "malformed JSON", id="json"),
        pytest.param('{"cpuReclaimThresholdPercent": "60"}', "cpuReclaimThresholdPercent", id="type"),
        pytest.param('{"degradeTimeMinutes": 0}', "degradeTimeMinutes", id="degrade"),
        pytest.param('{"resourceDiffThreshold": -1}', "resourceDiffThreshold", id="diff"),
        pytest.param('{"midUnallocatedPercent": 120}', "midUnallocatedPercent", id="mid-percent"),
        pytest.param('{"batchCPUThresholdPercent": -5}', "batchCPUThresholdPercent", id="batch-percent"),
        pytest.param('{"cpuReclaimThresholdPercent": -5}', "cpuReclaimThresholdPercent", id="reclaim"),
    ],
)
def test_refused_keys_name_the_field(text: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        parse_colocation_config(text)


def test_validity_matches_is_colocation_strategy_valid() -> None:
    assert is_colocation_strategy_valid(default_colocation_strategy())
    assert is_colocation_strategy_valid(ColocationStrategy())
    assert not is_colocation_strategy_valid(None)
    assert not is_colocation_strategy_valid(ColocationStrategy(metric_report_interval_seconds=0))
    assert not is_colocation_strategy_valid(ColocationStrategy(metric_memory_collect_policy=""))
