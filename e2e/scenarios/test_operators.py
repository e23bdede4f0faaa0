"""koord-manager's operators against the real API server: the ClusterNetworkTopology tree follows the
node labels, a broken layer chain is rejected at admission, and PodGroups get their phase, counts
and schedule timeout from their member pods.

koord-manager is the session's process (``control_plane`` starts it, with peering on).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest

from apis.core import Node
from apis.extension.gang import ANNOTATION_GANG_TIMEOUT, LABEL_POD_GROUP
from apis.scheduling.networktopology import ClusterNetworkTopologySpec
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.workloads import get_object, list_items, wait_for
from operators.logic import topology_tree

TIMEOUT = 30.0
V17_TOPOLOGY = repo_root() / "docs" / "examples" / "v1.7" / "02-cluster-network-topology.yaml"
BLOCK = "network.topology.nvidia.com/block"


def _expected_detail_status(cp: ControlPlane, spec: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = [Node.model_validate(n) for n in list_items(cp, "nodes")]
    model = ClusterNetworkTopologySpec.model_validate(spec)
    return [entry.to_wire() for entry in topology_tree.build_detail_status(model, nodes)]


def _nodes_of(detail: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    return {
        (e["topologyInfo"]["topologyLayer"], e["topologyInfo"]["topologyName"]): e["nodeNum"] for e in detail
    }


def _topology_matches(cp: ControlPlane) -> list[dict[str, Any]] | None:
    topology = get_object(cp, "clusternetworktopology", "default")
    detail: list[dict[str, Any]] = (topology.get("status") or {}).get("detailStatus") or []
    return detail if detail and detail == _expected_detail_status(cp, topology["spec"]) else None


def test_topology_status_follows_node_labels(control_plane: ControlPlane) -> None:
    cp = control_plane
    # test_examples applies the same object earlier in the session; applying it again is a no-op.
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(V17_TOPOLOGY))
    detail = wait_for(lambda: _topology_matches(cp), TIMEOUT, "detailStatus built from the node labels")
    counts = _nodes_of(detail)
    # e2e/clusters/e2e.yaml: gpu-0..3 under spine s0, blocks b0 (gpu-0, gpu-1) and b1 (gpu-2, gpu-3).
    assert counts[("SpineLayer", "s0")] >= 4
    assert detail[0]["topologyInfo"] == {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""}
    before_b0, before_b1 = counts[("BlockLayer", "b0")], counts[("BlockLayer", "b1")]

    def block_counts(b0: int, b1: int) -> list[dict[str, Any]] | None:
        detail = _topology_matches(cp)
        if detail is None:
            return None
        counts = _nodes_of(detail)
        return detail if (counts[("BlockLayer", "b0")], counts[("BlockLayer", "b1")]) == (b0, b1) else None

    original = get_object(cp, "node", "gpu-3")["metadata"]["labels"][BLOCK]
    cp.kubectl("label", "node", "gpu-3", f"{BLOCK}=b0", "--overwrite")
    try:
        wait_for(
            lambda: block_counts(before_b0 + 1, before_b1 - 1),
            TIMEOUT,
            "detailStatus after relabelling gpu-3 into block b0",
        )
    finally:
        cp.kubectl("label", "node", "gpu-3", f"{BLOCK}={original}", "--overwrite")
    wait_for(
        lambda: block_counts(before_b0, before_b1),
        TIMEOUT,
        "detailStatus after restoring gpu-3's block label",
    )


BROKEN_CHAIN = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: ClusterNetworkTopology
metadata: {name: broken-chain}
spec:
  networkTopologySpec:
  - {topologyLayer: SpineLayer, labelKey: [network.topology.nvidia.com/spine]}
  - {topologyLayer: BlockLayer, parentTopologyLayer: RackLayer, labelKey: [network.topology.nvidia.com/block]}
  - {topologyLayer: NodeTopologyLayer, parentTopologyLayer: BlockLayer}
"""


def test_a_broken_layer_chain_is_rejected_at_admission(control_plane: ControlPlane) -> None:
    result = control_plane.run_kubectl("apply", "-f", "-", input=BROKEN_CHAIN)
    assert result.returncode != 0
    assert "denied the request" in result.stderr
    assert "'RackLayer' is not a layer of the spec" in result.stderr
    assert "layer 'SpineLayer' is not on the chain" in result.stderr


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"pg-{secrets.token_hex(4)}"
    control_plane.create_namespace(name)
    deadline = time.monotonic() + TIMEOUT
    while control_plane.read("serviceaccount", "default", namespace=name) is None:
        assert time.monotonic() < deadline, f"namespace {name} never got its default service account"
        time.sleep(0.2)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _podgroup(name: str, namespace: str, min_member: int, timeout: int | None = None) -> str:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return json.dumps(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


def _member(name: str, namespace: str, group: str, node: str | None) -> str:
    spec: dict[str, Any] = {
        "schedulerName": "no-such-scheduler",  # nothing binds it unless nodeName is set
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
    }
    if node is not None:
        spec["nodeName"] = node  # KWOK runs a pod created on one of its nodes
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {LABEL_POD_GROUP: group}},
            "spec": spec,
        }
    )


def _status(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = get_object(cp, "podgroup", name, namespace=namespace).get("status") or {}
    return status


def test_podgroup_phase_and_counts_follow_member_pods(control_plane: ControlPlane, namespace: str) -> None:
    cp = control_plane
    cp.kubectl("apply", "-f", "-", input=_podgroup("gang", namespace, 2))
    wait_for(lambda: _status(cp, namespace, "gang").get("phase") == "Pending", TIMEOUT, "phase Pending")

    cp.kubectl("apply", "-f", "-", input=_member("gang-0", namespace, "gang", "cpu-0"))
    time.sleep(1)
    assert _status(cp, namespace, "gang").get("phase") == "Pending"  # one member of two
    cp.kubectl("apply", "-f", "-", input=_member("gang-1", namespace, "gang", "cpu-1"))

    def running() -> dict[str, Any] | None:
        status = _status(cp, namespace, "gang")
        return status if status.get("phase") == "Running" else None

    status = wait_for(running, TIMEOUT, "phase Running with both members running")
    assert status.get("scheduled") == 2
    assert status.get("running") == 2
    assert "failed" not in status
    assert "succeeded" not in status


def test_podgroup_schedule_timeout_marks_the_group_and_posts_an_event(
    control_plane: ControlPlane, namespace: str
) -> None:
    cp = control_plane
    cp.kubectl("apply", "-f", "-", input=_podgroup("slow", namespace, 2, timeout=2))
    cp.kubectl("apply", "-f", "-", input=_member("slow-0", namespace, "slow", None))

    def marked() -> dict[str, Any] | None:
        group = get_object(cp, "podgroup", "slow", namespace=namespace)
        annotations = group["metadata"].get("annotations") or {}
        return group if annotations.get(ANNOTATION_GANG_TIMEOUT) == "true" else None

    group = wait_for(marked, TIMEOUT, f"annotation {ANNOTATION_GANG_TIMEOUT}=true")
    assert group["status"]["phase"] == "Pending"  # Koordinator has no phase for it: the phase is kept

    def timeout_events() -> list[dict[str, Any]]:
        items = list_items(cp, "events", namespace=namespace, field_selector="involvedObject.name=slow")
        return [e for e in items if e.get("reason") == "GangScheduleTimeout"]

    events = wait_for(timeout_events, TIMEOUT, "a GangScheduleTimeout event on the PodGroup")
    assert events[0]["type"] == "Warning"
    assert f"gang {namespace}/slow timed out" in events[0]["message"]
    assert "0/2 members scheduled" in events[0]["message"]
    time.sleep(3)
    assert len(timeout_events()) == 1, "the event is posted once, not on every resync"
