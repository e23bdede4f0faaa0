"""LowNodeLoadArgs: Koordinator's names and defaults, pool conversion and validation (12.2)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from operators.descheduler.lownodeload.args import DEFAULT_NODE_POOL, LowNodeLoadArgs


def test_defaults_are_koordinators() -> None:
    args = LowNodeLoadArgs()
    assert (args.paused, args.dry_run, args.number_of_nodes, args.node_fit) == (False, False, 0, True)
    assert args.node_metric_expiration_seconds == 180
    assert args.detector_cache_timeout_seconds == 300
    condition = args.anomaly_condition
    assert (
        condition.timeout_seconds,
        condition.consecutive_abnormalities,
        condition.consecutive_normalities,
    ) == (
        60,
        5,
        3,
    )


def test_camel_case_names_from_a_descheduler_configuration() -> None:
    args = LowNodeLoadArgs.model_validate(
        {
            "dryRun": True,
            "numberOfNodes": 2,
            "nodeMetricExpirationSeconds": 60,
            "evictableNamespaces": {"exclude": ["kube-system"]},
            "podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}],
            "useDeviationThresholds": False,
            "lowThresholds": {"cpu": 30, "memory": 30},
            "highThresholds": {"cpu": 70, "memory": 80},
            "prodLowThresholds": {"cpu": 20},
            "prodHighThresholds": {"cpu": 50},
            "resourceWeights": {"cpu": 2},
            "anomalyCondition": {"consecutiveAbnormalities": 2},
            "detectorCacheTimeout": "10m",
        }
    )
    assert args.dry_run
    assert args.number_of_nodes == 2
    assert args.evictable_namespaces is not None
    assert not args.evictable_namespaces.allows("kube-system")
    (pool,) = args.pools()
    assert pool.name == DEFAULT_NODE_POOL
    assert pool.prod_high_thresholds == {"cpu": 50}
    # cpu 2 as configured, memory 1 by default
    assert pool.resource_weights == {"cpu": 2, "memory": 1}
    # the other count keeps its own default (Koordinator's else-if chain left it at 0)
    assert pool.anomaly_condition.consecutive_normalities == 3


def test_a_typo_is_an_error() -> None:
    with pytest.raises(ValidationError):
        LowNodeLoadArgs.model_validate({"highThreshold": {"cpu": 70}})


def test_weights_cover_every_named_resource_and_non_positive_means_one() -> None:
    args = LowNodeLoadArgs.model_validate(
        {
            "lowThresholds": {"cpu": 10, "nvidia.com/gpu": 10},
            "highThresholds": {"cpu": 50, "nvidia.com/gpu": 50},
            "resourceWeights": {"memory": 0, "cpu": -3},
        }
    )
    assert args.pools()[0].resource_weights == {"cpu": 1, "memory": 1, "nvidia.com/gpu": 1}


def test_zero_anomaly_counts_default_independently() -> None:
    args = LowNodeLoadArgs.model_validate(
        {
            "highThresholds": {"cpu": 50},
            "anomalyCondition": {"consecutiveAbnormalities": 0, "consecutiveNormalities": 0},
        }
    )
    condition = args.pools()[0].anomaly_condition
    assert (condition.consecutive_abnormalities, condition.consecutive_normalities) == (5, 3)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"lowThresholds": {"cpu": 80}, "highThresholds": {"cpu": 70}}, "lowThresholds > highThresholds"),
        (
            {"highThresholds": {"cpu": 70}, "prodHighThresholds": {"cpu": 75}},
            "prodHighThresholds > highThresholds",
        ),
        (
            {"prodLowThresholds": {"cpu": 60}, "prodHighThresholds": {"cpu": 50}},
            "prodLowThresholds > prodHighThresholds",
        ),
        ({"highThresholds": {"cpu": -1}}, "out of range"),
        ({"highThresholds": {"cpu": 101}}, "out of range"),
        ({"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}}, "only one of"),
        ({"nodeMetricExpirationSeconds": 0}, "greater than 0"),
        (
            {"nodePools": [{"name": "gpu", "lowThresholds": {"cpu": 90}, "highThresholds": {"cpu": 50}}]},
            "nodePools[gpu]",
        ),
    ],
)
def test_validation(config: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        LowNodeLoadArgs.model_validate(config)


def test_top_level_pool_first_and_user_pools_inherit_what_they_leave_out() -> None:
    args = LowNodeLoadArgs.model_validate(
        {
            "nodeSelector": {"matchLabels": {"pool": "default"}},
            "lowThresholds": {"cpu": 20},
            "highThresholds": {"cpu": 60},
            "anomalyCondition": {"consecutiveAbnormalities": 1},
            "nodePools": [
                {
                    "name": "batch",
                    "nodeSelector": {"matchLabels": {"pool": "batch"}},
                    "highThresholds": {"cpu": 80},
                }
            ],
        }
    )
    default, batch = args.pools()
    assert default.name == DEFAULT_NODE_POOL
    assert default.node_selector is not None
    assert default.node_selector.match_labels == {"pool": "default"}
    assert batch.high_thresholds == {"cpu": 80}
    assert batch.low_thresholds == {"cpu": 20}  # inherited
    assert batch.anomaly_condition.consecutive_abnormalities == 1  # inherited
    # inheritance copies: changing one pool's maps leaves the args alone
    batch.low_thresholds["cpu"] = 1
    assert args.low_thresholds == {"cpu": 20}


def test_without_top_level_thresholds_only_the_user_pools_run() -> None:
    args = LowNodeLoadArgs.model_validate({"nodePools": [{"name": "a", "highThresholds": {"cpu": 50}}]})
    assert [p.name for p in args.pools()] == ["a"]


def test_resource_names_always_include_memory() -> None:
    args = LowNodeLoadArgs.model_validate({"lowThresholds": {"cpu": 10}, "highThresholds": {"cpu": 50}})
    assert args.pools()[0].resource_names() == ("cpu", "memory")


def test_type_meta_of_a_plugin_config_entry_is_accepted() -> None:
    args = LowNodeLoadArgs.model_validate({"apiVersion": "descheduler/v1alpha2", "kind": "LowNodeLoadArgs"})
    assert args.kind == "LowNodeLoadArgs"
    with pytest.raises(ValidationError, match="expected LowNodeLoadArgs"):
        LowNodeLoadArgs.model_validate({"kind": "MigrationControllerArgs"})
