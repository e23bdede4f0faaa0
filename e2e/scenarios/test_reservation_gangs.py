"""A training job holds a network-topology block with a gang of reservations, lets backfill use
the room while it waits, and takes the block when it arrives (real API server, KWOK nodes).

The ``topo`` pool of the e2e cluster (2 spines x 4 blocks x 8 nodes, 8 GPUs each) with the v1.7
ClusterNetworkTopology; koord-scheduler runs with ``awareNetworkTopology: true``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, get_object, list_items, make_pod, pods, wait_for

TOPOLOGY = repo_root() / "docs" / "examples" / "v1.7" / "02-cluster-network-topology.yaml"
BLOCK = "network.topology.nvidia.com/block"
WHOLE_NODE = {"nvidia.com/gpu": "8"}
SIZE = 4
MUST_GATHER = json.dumps({"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]})


@pytest.fixture(scope="module")
def topology(control_plane: ControlPlane) -> None:
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(TOPOLOGY))


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    ns = "resv-gang"
    control_plane.create_namespace(ns)
    yield ns
    control_plane.delete_namespace(ns)


def _reservation(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "labels": {"held-for": ns}},
        "spec": {
            "template": {
                "metadata": {
                    "namespace": ns,
                    "annotations": {
                        "gang.scheduling.koordinator.sh/name": "block-hold",
                        "gang.scheduling.koordinator.sh/min-available": str(SIZE),
                        "gang.scheduling.koordinator.sh/network-topology-spec": MUST_GATHER,
                    },
                },
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "nodeSelector": {"node-type": "topo"},
                    "containers": [
                        {
                            "name": "main",
                            "resources": {"requests": {"cpu": "8", "memory": "64Gi", **WHOLE_NODE}},
                        }
                    ],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": "llm-job"}}}],
            "allocateOnce": True,
            "ttl": "1h",
        },
    }


def _available(cp: ControlPlane, name: str) -> str | None:
    found = get_object(cp, "reservation", name)
    status = found.get("status") or {}
    return status.get("nodeName") if status.get("phase") == "Available" else None


def _blocks(cp: ControlPlane) -> dict[str, str]:
    return {
        n["metadata"]["name"]: n["metadata"]["labels"].get(BLOCK, "")
        for n in list_items(cp, "nodes", selector="node-type=topo")
    }


def _bound(cp: ControlPlane, ns: str, prefix: str) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in pods(cp, ns)
        if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
    }


def test_a_job_holds_a_block_lends_it_to_backfill_and_takes_it_back(
    control_plane: ControlPlane, scheduler: Scheduler, topology: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    names = [f"block-hold-{i}" for i in range(SIZE)]
    try:
        # One Reservation per member, placed together by the gang solver inside one block.
        apply(cp, [_reservation(ns, name) for name in names])

        def all_held() -> dict[str, str] | None:
            nodes = {n: _available(cp, n) for n in names}
            return {n: node for n, node in nodes.items() if node} if all(nodes.values()) else None

        held = wait_for(all_held, timeout=120, what="every reservation of the gang Available")
        blocks = _blocks(cp)
        assert len({blocks[node] for node in held.values()}) == 1, held
        assert len(set(held.values())) == SIZE, held

        # Backfill (reservation-ignored) fills the held nodes while the job is not there.
        ignored = {"scheduling.koordinator.sh/reservation-ignored": "true"}
        backfill = []
        for i, node in enumerate(sorted(held.values())):
            pod = make_pod(f"backfill-{i}", ns, cpu="1", memory="1Gi", extra=WHOLE_NODE, labels=ignored)
            pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
            backfill.append(pod)
        apply(cp, backfill)
        wait_for(lambda: len(_bound(cp, ns, "backfill-")) == SIZE, timeout=60, what="backfill bound")

        # The job arrives (a gang that must use its reservations): the backfill is evicted and the
        # job lands exactly on the held block.
        affinity = json.dumps({"reservationSelector": {"held-for": ns}})
        job = [
            make_pod(
                f"llm-{i}",
                ns,
                cpu="8",
                memory="64Gi",
                extra=WHOLE_NODE,
                node_selector={"node-type": "topo"},
                labels={"app": "llm-job"},
                annotations={
                    "gang.scheduling.koordinator.sh/name": "llm",
                    "gang.scheduling.koordinator.sh/min-available": str(SIZE),
                    "scheduling.koordinator.sh/reservation-affinity": affinity,
                },
            )
            for i in range(SIZE)
        ]
        apply(cp, job)

        def job_bound() -> dict[str, str] | None:
            bound = _bound(cp, ns, "llm-")
            return bound if len(bound) == SIZE else None

        placed = wait_for(job_bound, timeout=180, what="every member of the job bound")
        assert set(placed.values()) == set(held.values()), (placed, held)
        left = {p["metadata"]["name"] for p in pods(cp, ns) if not p["metadata"].get("deletionTimestamp")}
        assert not {f"backfill-{i}" for i in range(SIZE)} & left, left
        events = list_items(cp, "events", namespace=ns)
        preempted = [
            e for e in events if e.get("reason") == "Preempted" and "reservation" in e.get("message", "")
        ]
        assert preempted, [e.get("reason") for e in events]
    finally:
        for name in names:
            cp.kubectl("delete", "reservation", name, "--ignore-not-found", "--wait=false", check=False)
