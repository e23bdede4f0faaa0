"""Network-topology-aware gang placement on the real API server.

The e2e cluster has a ``topo`` pool of 2 spines x 4 blocks x 8 nodes with 8 GPUs each
(e2e/clusters/e2e.yaml), labelled as NVIDIA topograph does; the ClusterNetworkTopology is the
v1.7 release-note example; koord-scheduler runs with ``awareNetworkTopology: true``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, list_items, make_pod, pods, wait_for

TOPOLOGY = repo_root() / "docs" / "examples" / "v1.7" / "02-cluster-network-topology.yaml"
BLOCK = "network.topology.nvidia.com/block"
WHOLE_NODE = {"nvidia.com/gpu": "8"}


def gang(ns: str, name: str, size: int, strategy: str) -> list[dict[str, Any]]:
    spec = json.dumps({"gatherStrategy": [{"layer": "BlockLayer", "strategy": strategy}]})
    pod_group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": ns,
            "annotations": {"gang.scheduling.koordinator.sh/network-topology-spec": spec},
        },
        "spec": {"minMember": size, "scheduleTimeoutSeconds": 120},
    }
    members = [
        make_pod(
            f"{name}-{i}",
            ns,
            cpu="8",
            memory="64Gi",
            extra=WHOLE_NODE,
            node_selector={"node-type": "topo"},
            labels={"pod-group.scheduling.sigs.k8s.io": name},
            annotations={"gang.scheduling.koordinator.sh/network-topology-index": str(i)},
        )
        for i in range(size)
    ]
    return [pod_group, *members]


def blocks_of(cp: ControlPlane, ns: str, name: str) -> dict[str, str]:
    """Member -> block of the node it is bound to."""
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in list_items(cp, "nodes")}
    return {
        p["metadata"]["name"]: nodes[p["spec"]["nodeName"]].get(BLOCK, "")
        for p in pods(cp, ns)
        if p["metadata"]["name"].startswith(f"{name}-") and p["spec"].get("nodeName")
    }


def wait_bound(cp: ControlPlane, ns: str, name: str, size: int) -> dict[str, str]:
    def check() -> dict[str, str] | None:
        placed = blocks_of(cp, ns, name)
        return placed if len(placed) == size else None

    result: dict[str, str] = wait_for(check, timeout=90, what=f"all {size} members of {name} bound")
    return result


@pytest.fixture(scope="module")
def topology(control_plane: ControlPlane) -> None:
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(TOPOLOGY))


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = f"topo-{request.node.name.split('[')[0].replace('_', '-')[5:40]}".rstrip("-")
    control_plane.create_namespace(ns)
    yield ns
    control_plane.delete_namespace(ns)


def fill_one_node_per_block(cp: ControlPlane, ns: str, per_block: int = 1) -> None:
    """Take every GPU of ``per_block`` node(s) in each block, so no block has 8 free nodes."""
    by_block: dict[str, list[str]] = {}
    for found in list_items(cp, "nodes", selector="node-type=topo"):
        by_block.setdefault(found["metadata"]["labels"][BLOCK], []).append(found["metadata"]["name"])
    fillers = []
    for _block, names in sorted(by_block.items()):
        for node in sorted(names)[:per_block]:
            filler = make_pod(f"filler-{node}", ns, cpu="1", memory="1Gi", extra=WHOLE_NODE)
            filler["spec"]["nodeName"] = node
            fillers.append(filler)
    apply(cp, fillers)


def test_prefer_gather_gang_lands_in_one_block(
    control_plane: ControlPlane, scheduler: Scheduler, topology: None, namespace: str
) -> None:
    apply(control_plane, gang(namespace, "train", 8, "PreferGather"))
    placed = wait_bound(control_plane, namespace, "train", 8)
    assert len(set(placed.values())) == 1, placed


def test_prefer_gather_spans_the_fewest_blocks_when_none_can_hold_it(
    control_plane: ControlPlane, scheduler: Scheduler, topology: None, namespace: str
) -> None:
    fill_one_node_per_block(control_plane, namespace)  # every block keeps 7 free nodes
    apply(control_plane, gang(namespace, "spread", 8, "PreferGather"))
    placed = wait_bound(control_plane, namespace, "spread", 8)
    assert len(set(placed.values())) == 2, placed


def test_must_gather_gang_that_no_block_can_hold_stays_pending_with_the_reason(
    control_plane: ControlPlane, scheduler: Scheduler, topology: None, namespace: str
) -> None:
    fill_one_node_per_block(control_plane, namespace)
    apply(control_plane, gang(namespace, "strict", 8, "MustGather"))

    def reason() -> str | None:
        raw = list_items(control_plane, "events", namespace=namespace)
        return next(
            (
                e["message"]
                for e in raw
                if e.get("reason") == "FailedScheduling" and "BlockLayer" in e.get("message", "")
            ),
            None,
        )

    message = wait_for(reason, timeout=60, what="a FailedScheduling event naming BlockLayer")
    assert f"gang {namespace}/strict needs 8 members in one BlockLayer domain" in message
    assert "the largest free domain holds 7" in message
    # The scheduler has explained every member as held back or unschedulable: none is binding.
    scheduler.wait_explained(namespace, [f"strict-{i}" for i in range(8)])
    assert blocks_of(control_plane, namespace, "strict") == {}, "no member of an unplaceable gang is bound"
    on_pod_group = [
        e["message"]
        for e in list_items(control_plane, "events", namespace=namespace)
        if e["involvedObject"]["kind"] == "PodGroup" and e.get("reason") == "FailedScheduling"
    ]
    assert any("needs 8 members in one BlockLayer domain" in m for m in on_pod_group), on_pod_group
