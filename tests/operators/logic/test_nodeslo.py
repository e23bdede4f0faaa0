"""A node's NodeSLO spec from the NodeSLO keys: the first matching entry, the bandwidth annotation,
host applications, and selectors that do not parse."""

from __future__ import annotations

import json

from apis.slo.sloconfig.nodeslo_config import (
    parse_cpu_burst_cfg,
    parse_host_application_cfg,
    parse_resource_threshold_cfg,
    parse_system_cfg,
)
from operators.logic.nodeslo import NodeSLOConfig, node_slo_for, normalized_spec, render, skipped_entries

THRESHOLD = json.dumps(
    {
        "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
        "nodeStrategies": [
            {
                "name": "broken",
                "nodeSelector": {
                    "matchExpressions": [{"key": "pool", "operator": "Within", "values": ["a"]}]
                },
                "cpuSuppressThresholdPercent": 10,
            },
            {
                "name": "gpu",
                "nodeSelector": {"matchLabels": {"gpu": "true"}},
                "cpuSuppressThresholdPercent": 40,
            },
            {
                "name": "pool-a",
                "nodeSelector": {"matchLabels": {"pool": "a"}},
                "cpuSuppressThresholdPercent": 50,
            },
        ],
    }
)
CLUSTER_THRESHOLD = {
    "enable": True,
    "cpuSuppressThresholdPercent": 60,
    "cpuSuppressPolicy": "cpuset",
    "memoryEvictThresholdPercent": 70,
    "cpuEvictPolicy": "evictByRealLimit",
}
CONFIG = NodeSLOConfig(resource_threshold=parse_resource_threshold_cfg(THRESHOLD))


def threshold_of(labels: dict[str, str]) -> object:
    return render(CONFIG, labels, {}).spec.to_wire()["resourceUsedThresholdWithBE"]


def test_a_node_no_entry_matches_gets_the_cluster_strategy() -> None:
    assert threshold_of({"pool": "b"}) == CLUSTER_THRESHOLD


def test_the_matching_entry_replaces_the_cluster_strategy() -> None:
    assert threshold_of({"pool": "a"}) == {**CLUSTER_THRESHOLD, "cpuSuppressThresholdPercent": 50}


def test_a_node_matching_two_entries_takes_the_first() -> None:
    assert threshold_of({"pool": "a", "gpu": "true"}) == {
        **CLUSTER_THRESHOLD,
        "cpuSuppressThresholdPercent": 40,
    }


def test_an_entry_whose_selector_does_not_parse_is_skipped_and_named() -> None:
    # "Within" would match nothing in Kubernetes either; the entry is skipped, the next one applies.
    assert threshold_of({"pool": "a"}) == {**CLUSTER_THRESHOLD, "cpuSuppressThresholdPercent": 50}
    assert skipped_entries(CONFIG, "resource-threshold-config") == [
        "resource-threshold-config: nodeStrategies[0] (name 'broken'): "
        "nodeSelector.matchExpressions[0].operator: Invalid value: 'Within': not a valid selector operator; "
        "the entry is skipped"
    ]
    assert skipped_entries(CONFIG, "system-config") == []


def test_default_spec_of_every_strategy() -> None:
    spec = render(NodeSLOConfig(), {}, {}).spec.to_wire()
    assert set(spec) == {
        "resourceUsedThresholdWithBE",
        "resourceQOSStrategy",
        "cpuBurstStrategy",
        "systemStrategy",
    }
    assert spec["cpuBurstStrategy"] == {
        "policy": "none",
        "cpuBurstPercent": 1000,
        "cfsQuotaBurstPercent": 300,
        "cfsQuotaBurstPeriodSeconds": -1,
        "sharePoolThresholdPercent": 50,
    }
    assert spec["resourceQOSStrategy"]["beClass"]["cpuQOS"]["groupIdentity"] == -1


def test_the_bandwidth_annotation_wins_over_the_system_strategy() -> None:
    system = parse_system_cfg(
        json.dumps(
            {
                "clusterStrategy": {"totalNetworkBandwidth": "1G"},
                "nodeStrategies": [
                    {
                        "name": "big",
                        "nodeSelector": {"matchLabels": {"nic": "big"}},
                        "totalNetworkBandwidth": "25G",
                    }
                ],
            }
        )
    )
    config = NodeSLOConfig(system=system)
    annotated = {"node.koordinator.sh/network-bandwidth": "10G"}

    def bandwidth(labels: dict[str, str], annotations: dict[str, str]) -> object:
        return render(config, labels, annotations).spec.to_wire()["systemStrategy"]["totalNetworkBandwidth"]

    assert bandwidth({}, {}) == "1G"
    assert bandwidth({"nic": "big"}, {}) == "25G"
    assert bandwidth({"nic": "big"}, annotated) == "10G"
    assert bandwidth({}, annotated) == "10G"
    bad = render(config, {"nic": "big"}, {"node.koordinator.sh/network-bandwidth": "fast"})
    assert bad.spec.to_wire()["systemStrategy"]["totalNetworkBandwidth"] == "25G"
    [problem] = bad.problems
    assert problem.startswith(
        "invalid value for node.koordinator.sh/network-bandwidth: invalid quantity 'fast'"
    )


def test_host_applications_of_the_first_matching_node_config_replace_the_cluster_list() -> None:
    hosts = parse_host_application_cfg(
        json.dumps(
            {
                "applications": [{"name": "nginx", "qos": "LS"}],
                "nodeConfigs": [
                    {
                        "name": "db",
                        "nodeSelector": {"matchLabels": {"role": "db"}},
                        "applications": [{"name": "mysql"}],
                    },
                    {"name": "none", "nodeSelector": {"matchLabels": {"role": "bare"}}, "applications": []},
                ],
            }
        )
    )
    config = NodeSLOConfig(host_application=hosts)

    def apps(labels: dict[str, str]) -> object:
        return render(config, labels, {}).spec.to_wire().get("hostApplications")

    assert apps({}) == [{"name": "nginx", "qos": "LS"}]
    assert apps({"role": "db"}) == [{"name": "mysql"}]
    assert apps({"role": "bare"}) is None  # an empty list is left out, as Go's omitempty does


def test_the_node_slo_is_named_after_and_owned_by_its_node() -> None:
    spec = render(NodeSLOConfig(cpu_burst=parse_cpu_burst_cfg(None)), {}, {}).spec
    slo = node_slo_for("n1", "uid-1", spec).to_wire()
    assert slo["apiVersion"] == "slo.koordinator.sh/v1alpha1"
    assert slo["kind"] == "NodeSLO"
    assert slo["metadata"] == {
        "name": "n1",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-1"}],
    }
    assert slo["spec"] == spec.to_wire()
    assert normalized_spec(json.loads(json.dumps(slo["spec"]))) == spec.to_wire()
