"""NodeSLO per node from ``slo-controller-config``, against a real API server: koord-manager runs as a
real process with a token of the chart's koord-manager ServiceAccount (a missing RBAC rule fails
this test) on a small cluster of its own, so that no other koord-manager renders the NodeSLOs.

The ConfigMap is applied with kubectl as a user would; a node selector entry changes one node's
strategy only; a change of the ConfigMap updates the NodeSLOs it concerns; a refused key keeps the
last good NodeSLO content with a Warning event naming the key, while the other keys still apply;
deleting a node removes its NodeSLO.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster.__main__ import apply_description, install_crds, wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.cluster.credentials import service_account_kubeconfig
from e2e.components import LocalComponent
from e2e.workloads import list_items, wait_for
from scheduler.simulator.description import ClusterDescription

CHART = repo_root() / "charts" / "koordinator-py"
NAMESPACE = "koordinator-system"
CLUSTER = os.environ.get("KOORD_E2E_CLUSTER", "e2e") + "-nodeslo"
WEBHOOK_PORT = int(os.environ.get("KOORD_E2E_WEBHOOK_PORT", "19443")) + 4
NODES = ClusterDescription.model_validate(
    {
        "name": CLUSTER,
        "nodePools": [
            {"name": "lsr", "count": 1, "cpu": "8", "memory": "32Gi", "labels": {"colocation": "lsr"}},
            {"name": "mixed", "count": 2, "cpu": "8", "memory": "32Gi", "labels": {"colocation": "mixed"}},
        ],
    }
)
LSR, MIXED, MIXED_2 = "lsr-0", "mixed-0", "mixed-1"


def slo_config(threshold: dict[str, Any] | str, burst: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "slo-controller-config", "namespace": NAMESPACE},
            "data": {
                "resource-threshold-config": threshold
                if isinstance(threshold, str)
                else json.dumps(threshold),
                "cpu-burst-config": json.dumps(burst),
            },
        }
    )


def threshold_for_lsr(percent: int) -> dict[str, Any]:
    return {
        "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
        "nodeStrategies": [
            {
                "name": "lsr-nodes",
                "nodeSelector": {"matchLabels": {"colocation": "lsr"}},
                "cpuSuppressThresholdPercent": percent,
            }
        ],
    }


def node_slo(cp: ControlPlane, name: str) -> dict[str, Any] | None:
    return cp.read("nodeslo", name)


def suppress_percents(cp: ControlPlane) -> dict[str, int]:
    items = list_items(cp, "nodeslos")
    return {
        item["metadata"]["name"]: item["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"]
        for item in items
    }


def burst_policies(cp: ControlPlane) -> dict[str, str]:
    items = list_items(cp, "nodeslos")
    return {item["metadata"]["name"]: item["spec"]["cpuBurstStrategy"]["policy"] for item in items}


@pytest.fixture(scope="module")
def cluster() -> Iterator[ControlPlane]:
    cp = ControlPlane(name=CLUSTER)
    cp.start()
    try:
        install_crds(cp)
        apply_description(cp, NODES)
        wait_nodes_ready(cp)
        cp.wait_service_account("default")
        yield cp
    finally:
        cp.stop(quiet=True)


@pytest.fixture(scope="module")
def manager(cluster: ControlPlane) -> Iterator[LocalComponent]:
    """koord-manager with the chart's ServiceAccount and ClusterRole, alone (no peering)."""
    rendered = cluster.helm(
        "template",
        "koordinator-py",
        str(CHART),
        "--show-only",
        "templates/manager-serviceaccount.yaml",
        "--show-only",
        "templates/manager-rbac.yaml",
    )
    cluster.create_namespace(NAMESPACE)
    cluster.kubectl("apply", "-f", "-", input=rendered)
    kubeconfig = service_account_kubeconfig(
        cluster, NAMESPACE, "koord-manager", cluster.state_dir / "koord-manager.kubeconfig"
    )
    component = LocalComponent(
        name="koord-manager",
        argv=(
            sys.executable,
            "-m",
            "operators",
            "--kubeconfig",
            str(kubeconfig),
            "--standalone",
            "--no-manage-webhook-configuration",
            "--webhook-port",
            str(WEBHOOK_PORT),
            "--webhook-cert-dir",
            str(cluster.state_dir / "koord-manager"),
        ),
        cluster=cluster,
    )
    component.start()
    try:
        yield component
    finally:
        print(component.stop())
        print(component.log_tail(30))


def test_node_slos_follow_the_config_map(cluster: ControlPlane, manager: LocalComponent) -> None:
    # Without the ConfigMap every node gets Koordinator's defaults.
    wait_for(
        lambda: suppress_percents(cluster) == {LSR: 65, MIXED: 65, MIXED_2: 65} or None,
        60,
        "a NodeSLO with the default strategies for every node",
    )
    nodes = {n["metadata"]["name"]: n["metadata"]["uid"] for n in list_items(cluster, "nodes")}
    slo = node_slo(cluster, LSR) or {}
    [owner] = slo["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", LSR, nodes[LSR])
    assert slo["spec"]["resourceQOSStrategy"]["beClass"]["resctrlQOS"] == {
        "enable": False,
        "catRangeStartPercent": 0,
        "catRangeEndPercent": 30,
        "mbaPercent": 100,
    }

    cluster.kubectl(
        "apply", "-f", "-", input=slo_config(threshold_for_lsr(40), {"clusterStrategy": {"policy": "auto"}})
    )
    wait_for(
        lambda: suppress_percents(cluster) == {LSR: 40, MIXED: 60, MIXED_2: 60} or None,
        60,
        "the node selector entry on the lsr node only, the cluster strategy elsewhere",
    )
    wait_for(
        lambda: set(burst_policies(cluster).values()) == {"auto"} or None, 30, "cpu burst auto everywhere"
    )
    untouched = (node_slo(cluster, MIXED) or {})["metadata"]["resourceVersion"]

    cluster.kubectl(
        "apply", "-f", "-", input=slo_config(threshold_for_lsr(30), {"clusterStrategy": {"policy": "auto"}})
    )
    wait_for(lambda: suppress_percents(cluster)[LSR] == 30 or None, 60, "the lsr node's NodeSLO updated")
    # Only the NodeSLO whose rendered spec changed was written.
    assert (node_slo(cluster, MIXED) or {})["metadata"]["resourceVersion"] == untouched


def config_map_warnings(cp: ControlPlane) -> list[dict[str, Any]]:
    return list_items(
        cp,
        "events",
        namespace=NAMESPACE,
        field_selector="involvedObject.kind=ConfigMap,involvedObject.name=slo-controller-config,type=Warning",
    )


def test_a_refused_key_keeps_the_last_good_value_and_says_why(
    cluster: ControlPlane, manager: LocalComponent
) -> None:
    cluster.kubectl(
        "apply", "-f", "-", input=slo_config(threshold_for_lsr(30), {"clusterStrategy": {"policy": "none"}})
    )
    wait_for(
        lambda: set(burst_policies(cluster).values()) == {"none"} or None, 60, "cpu burst none everywhere"
    )
    before = suppress_percents(cluster)
    bad_threshold = {"clusterStrategy": {"cpuSuppressThresholdPercent": 60, "memoryEvictLowerPercent": 90}}
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=slo_config(bad_threshold, {"clusterStrategy": {"policy": "cfsQuotaBurstOnly"}}),
    )
    # The other key still applies ...
    wait_for(
        lambda: set(burst_policies(cluster).values()) == {"cfsQuotaBurstOnly"} or None,
        60,
        "cpu-burst-config applied beside the refused key",
    )
    # ... while the refused one keeps its last good value, and a Warning on the ConfigMap names it.
    assert suppress_percents(cluster) == before
    [event] = wait_for(lambda: config_map_warnings(cluster), 30, "a Warning event on the ConfigMap")
    assert event["reason"] == "SLOCfgUnmarshalFailed"
    assert event["message"].startswith("slo-controller-config resource-threshold-config: ")
    assert (
        "clusterStrategy.memoryEvictLowerPercent: must be below memoryEvictThresholdPercent"
        in event["message"]
    )
    assert "resource-threshold-config: " in manager.log_file.read_text()


def test_a_node_slo_goes_with_its_node(cluster: ControlPlane, manager: LocalComponent) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "nodeslo-transient",
            "labels": {"type": "kwok", "colocation": "lsr"},
            "annotations": {"node.koordinator.sh/network-bandwidth": "10G"},
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(node))
    try:
        slo = wait_for(lambda: node_slo(cluster, "nodeslo-transient"), 60, "its NodeSLO created")
        assert slo["spec"]["systemStrategy"]["totalNetworkBandwidth"] == "10G"
        assert slo["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 30
    finally:
        cluster.kubectl("delete", "node", "nodeslo-transient", "--wait=true")
    wait_for(
        lambda: True if node_slo(cluster, "nodeslo-transient") is None else None,
        60,
        "its NodeSLO deleted with it",
    )
