"""The NodeSLO keys of slo-controller-config: Koordinator's defaults, the merge, and what is refused."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from apis.errors import InvalidValue
from apis.slo.sloconfig.nodeslo_config import (
    parse_cpu_burst_cfg,
    parse_host_application_cfg,
    parse_resource_qos_cfg,
    parse_resource_threshold_cfg,
    parse_system_cfg,
)

NODE_A = {"matchLabels": {"pool": "a"}}


def test_missing_keys_are_koordinators_defaults() -> None:
    assert parse_resource_threshold_cfg(None).to_wire() == {
        "clusterStrategy": {
            "enable": False,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": "cpuset",
            "memoryEvictThresholdPercent": 70,
            "cpuEvictPolicy": "evictByRealLimit",
        },
        "nodeStrategies": [],
    }
    assert parse_cpu_burst_cfg(None).to_wire() == {
        "clusterStrategy": {
            "policy": "none",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        "nodeStrategies": [],
    }
    assert parse_system_cfg(None).to_wire() == {
        "clusterStrategy": {
            "minFreeKbytesFactor": 100,
            "watermarkScaleFactor": 150,
            "memcgReapBackGround": 0,
            "totalNetworkBandwidth": "0",
        },
        "nodeStrategies": [],
    }
    assert parse_host_application_cfg(None).to_wire() == {"applications": [], "nodeConfigs": []}


def _class(
    group_identity: int, core_expeller: bool, cat_end: int, wmark: tuple[int, int, int]
) -> dict[str, Any]:
    ratio, scale, min_adj = wmark
    return {
        "cpuQOS": {
            "enable": False,
            "groupIdentity": group_identity,
            "schedIdle": 0,
            "coreExpeller": core_expeller,
        },
        "memoryQOS": {
            "enable": False,
            "minLimitPercent": 0,
            "lowLimitPercent": 0,
            "throttlingPercent": 0,
            "wmarkRatio": ratio,
            "wmarkScalePermill": scale,
            "wmarkMinAdj": min_adj,
            "priorityEnable": 0,
            "priority": 0,
            "oomKillGroup": 0,
        },
        "blkioQOS": {"enable": False},
        "resctrlQOS": {
            "enable": False,
            "catRangeStartPercent": 0,
            "catRangeEndPercent": cat_end,
            "mbaPercent": 100,
        },
        "networkQOS": {
            "enable": False,
            "ingressRequest": 0,
            "ingressLimit": 0,
            "egressRequest": 0,
            "egressLimit": 0,
        },
    }


DEFAULT_QOS = {
    "policies": {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"},
    "lsrClass": _class(2, True, 100, (95, 20, -25)),
    "lsClass": _class(2, True, 100, (95, 20, -25)),
    "beClass": _class(-1, False, 30, (95, 20, 50)),
    "systemClass": _class(0, False, 100, (0, 50, 0)),
    "cgroupRoot": {"blkioQOS": {"enable": False}},
}


def test_resource_qos_defaults_per_class() -> None:
    assert parse_resource_qos_cfg(None).to_wire() == {"clusterStrategy": DEFAULT_QOS, "nodeStrategies": []}


def test_cluster_strategy_overlays_the_defaults_and_node_entries_overlay_the_cluster() -> None:
    text = json.dumps(
        {
            "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
            "nodeStrategies": [
                {"name": "a", "nodeSelector": NODE_A, "cpuSuppressThresholdPercent": 40},
                {"name": "b", "nodeSelector": {"matchLabels": {"pool": "b"}}},
            ],
        }
    )
    cfg = parse_resource_threshold_cfg(text)
    cluster = {
        "enable": True,
        "cpuSuppressThresholdPercent": 60,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    }
    assert cfg.to_wire() == {
        "clusterStrategy": cluster,
        "nodeStrategies": [
            {**cluster, "cpuSuppressThresholdPercent": 40, "name": "a", "nodeSelector": NODE_A},
            {**cluster, "name": "b", "nodeSelector": {"matchLabels": {"pool": "b"}}},
        ],
    }
    [first, _] = cfg.node_strategies or []
    assert first.strategy_wire() == {**cluster, "cpuSuppressThresholdPercent": 40}


def test_nested_qos_merges_field_by_field() -> None:
    text = json.dumps(
        {
            "clusterStrategy": {"beClass": {"cpuQOS": {"enable": True}}},
            "nodeStrategies": [
                {"name": "a", "nodeSelector": NODE_A, "beClass": {"resctrlQOS": {"catRangeEndPercent": 50}}}
            ],
        }
    )
    cfg = parse_resource_qos_cfg(text)
    assert cfg.cluster_strategy is not None
    be = cfg.cluster_strategy.to_wire()["beClass"]
    assert be["cpuQOS"] == {"enable": True, "groupIdentity": -1, "schedIdle": 0, "coreExpeller": False}
    assert be["resctrlQOS"]["catRangeEndPercent"] == 30
    [node] = cfg.node_strategies or []
    node_be = node.strategy_wire()["beClass"]
    assert node_be["cpuQOS"]["enable"] is True  # inherited from the cluster strategy
    assert node_be["resctrlQOS"] == {
        "enable": False,
        "catRangeStartPercent": 0,
        "catRangeEndPercent": 50,
        "mbaPercent": 100,
    }


def test_keys_match_fields_case_insensitively_as_go_does() -> None:
    cfg = parse_cpu_burst_cfg('{"clusterStrategy": {"Policy": "auto", "CPUBurstPercent": 500}}')
    assert cfg.cluster_strategy is not None
    assert (cfg.cluster_strategy.policy, cfg.cluster_strategy.cpu_burst_percent) == ("auto", 500)


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        pytest.param(parse_resource_threshold_cfg, "{", "malformed JSON", id="not-json"),
        pytest.param(
            parse_resource_threshold_cfg,
            '{"clusterStrategy": {"cpuSuppressThresholdPercent": "high"}}',
            "clusterStrategy.cpuSuppressThresholdPercent: Input should be a valid integer",
            id="wrong-type",
        ),
        pytest.param(
            parse_resource_threshold_cfg,
            '{"clusterStrategy": {"cpuSuppressThresholdPercent": 101}}',
            "clusterStrategy.cpuSuppressThresholdPercent",
            id="schema-range",
        ),
        pytest.param(
            parse_resource_threshold_cfg,
            '{"clusterStrategy": {"memoryEvictLowerPercent": 75}}',
            "clusterStrategy.memoryEvictLowerPercent: must be below memoryEvictThresholdPercent "
            "(got 75, and 70)",
            id="lower-above-the-inherited-threshold",
        ),
        pytest.param(
            parse_resource_threshold_cfg,
            '{"clusterStrategy": {"cpuSuppressPolicy": "cpuSet"}}',
            "clusterStrategy.cpuSuppressPolicy: must be one of ['cfsQuota', 'cpuset'] (got 'cpuSet')",
            id="unknown-policy",
        ),
        pytest.param(
            parse_resource_qos_cfg,
            '{"clusterStrategy": {"lsClass": {"cpuQOS": {"groupIdentity": 3}}}}',
            "clusterStrategy.lsClass.cpuQOS.groupIdentity: must be within [-1, 2] (got 3)",
            id="group-identity",
        ),
        pytest.param(
            parse_resource_qos_cfg,
            '{"nodeStrategies": [{"name": "x", "nodeSelector": {"matchLabels": {"a": "b"}}, '
            '"beClass": {"resctrlQOS": {"catRangeStartPercent": 30}}}]}',
            "nodeStrategies[0] (name 'x').beClass.resctrlQOS.catRangeStartPercent: "
            "must be below catRangeEndPercent",
            id="cat-range-empty-after-merge",
        ),
        pytest.param(
            parse_cpu_burst_cfg,
            '{"clusterStrategy": {"cfsQuotaBurstPercent": 50}}',
            "clusterStrategy.cfsQuotaBurstPercent: must be at least 100 (got 50)",
            id="cfs-quota-burst",
        ),
        pytest.param(
            parse_system_cfg,
            '{"clusterStrategy": {"watermarkScaleFactor": 500}}',
            "clusterStrategy.watermarkScaleFactor: must be within [1, 400] (got 500)",
            id="watermark",
        ),
        pytest.param(
            parse_system_cfg,
            '{"nodeStrategies": [{"name": "all", "nodeSelector": {}}]}',
            "nodeStrategies[0] (name 'all').nodeSelector: must not be empty (it would select every node)",
            id="empty-selector",
        ),
        pytest.param(
            parse_cpu_burst_cfg,
            '{"nodeStrategies": [{"policy": "auto"}]}',
            "nodeStrategies[0].nodeSelector: must not be empty",
            id="no-selector",
        ),
        pytest.param(
            parse_host_application_cfg,
            '{"nodeConfigs": [{"name": "h", "applications": [{"name": "nginx"}]}]}',
            "nodeConfigs[0] (name 'h').nodeSelector: must not be empty",
            id="host-app-no-selector",
        ),
    ],
)
def test_refused_values_name_the_field(parse: Any, text: str, message: str) -> None:
    with pytest.raises(InvalidValue, match=re.escape(message)):
        parse(text)


def test_host_applications_are_kept_as_written() -> None:
    text = json.dumps(
        {
            "applications": [{"name": "nginx", "priority": "koord-prod", "qos": "LS"}],
            "nodeConfigs": [
                {"name": "h", "nodeSelector": NODE_A, "applications": [{"name": "redis", "qos": "LSR"}]}
            ],
        }
    )
    assert parse_host_application_cfg(text).to_wire() == {
        "applications": [{"name": "nginx", "priority": "koord-prod", "qos": "LS"}],
        "nodeConfigs": [
            {"name": "h", "nodeSelector": NODE_A, "applications": [{"name": "redis", "qos": "LSR"}]}
        ],
    }
