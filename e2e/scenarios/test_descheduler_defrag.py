"""GangDefragmentation on the real API server: a MustGather gang that cannot start because every
block holds a low-priority pod or two starts once koord-descheduler has moved those of one block.

Three blocks (one spine) of two fake 4-CPU nodes of their own (tainted so that no other
scenario's pods land there). A ReplicaSet ``filler`` (what a Deployment runs) has one 1-CPU pod
of priority 0 bound to every node (created bare with ``nodeName``, then adopted, so where each one
runs is known). The gang: a PodGroup of two members of 4 CPUs each, priority 1000, MustGather on
BlockLayer: no block has two free nodes, so it waits.

koord-descheduler runs GangDefragmentation (``waitThreshold: 5s``, ``maxPodsToMove: 2``): it plans
the two moves that free one block, reserves a place for each filler pod outside that block,
reports the plan on the PodGroup, and, once both Reservations are Available, asks the
MigrationController to move the two pods (ReservationFirst with the plan's Reservations). The gang
then lands in the freed block, and the ReplicaSet's replacements in their Reservations.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.components import LocalComponent, koord_descheduler
from e2e.descheduler_process import install_descheduler_rbac
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, list_items, make_pod, pods, wait_for

NAMESPACE = "defrag"
POOL = "defrag"
TAINT = {"key": "koord-e2e/pool", "value": POOL, "effect": "NoSchedule"}
TOPOLOGY = repo_root() / "docs" / "examples" / "v1.7" / "02-cluster-network-topology.yaml"
SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
BLOCKS = {f"defrag-b{b}": (f"defrag-b{b}-n0", f"defrag-b{b}-n1") for b in range(3)}
NODES = [n for names in BLOCKS.values() for n in names]
FILLER = {"app": "defrag-filler"}
CONFIG = f"""
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 5s
profiles:
- name: koord-descheduler
  plugins:
    balance:
      enabled: [{{name: GangDefragmentation}}]
  pluginConfig:
  - name: MigrationController
    args:
      apiVersion: descheduler/v1alpha2
      kind: MigrationControllerArgs
      defaultJobMode: ReservationFirst
      namespaces: {{include: [{NAMESPACE}]}}
      # The default workload limiter lets the 6-replica filler ReplicaSet lose one pod per 150 s,
      # longer than this plan's timeout.
      objectLimiters: {{workload: {{duration: 1s}}}}
  - name: GangDefragmentation
    args:
      apiVersion: descheduler/v1alpha2
      kind: GangDefragmentationArgs
      waitThreshold: 5s
      maxPodsToMove: 2
      planTimeout: 3m
"""


def _descheduler(cp: ControlPlane, config: Path) -> LocalComponent:
    """koord-descheduler with the chart's ServiceAccount and RBAC (GangDefragmentation's included)."""
    return koord_descheduler(
        cp, config, kubeconfig=install_descheduler_rbac(cp), name="koord-descheduler-defrag"
    )


def _node(name: str, block: str) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "koord-e2e/pool": POOL,
                SPINE: "defrag-s0",
                BLOCK: block,
            },
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _in_pool(pod: dict[str, Any]) -> dict[str, Any]:
    pod["spec"]["tolerations"] = [TAINT]
    pod["spec"]["nodeSelector"] = {"koord-e2e/pool": POOL}
    return pod


def _filler_pod(name: str, node: str | None = None) -> dict[str, Any]:
    pod = _in_pool(make_pod(name, NAMESPACE, cpu="1", memory="1Gi", labels=FILLER))
    if node is not None:
        pod["spec"]["nodeName"] = node
    return pod


def _replicaset() -> dict[str, Any]:
    template = _filler_pod("unused")
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "filler", "namespace": NAMESPACE},
        "spec": {
            "replicas": len(NODES),
            "selector": {"matchLabels": FILLER},
            "template": {"metadata": {"labels": FILLER}, "spec": template["spec"]},
        },
    }


def _gang() -> list[dict[str, Any]]:
    spec = json.dumps({"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]})
    pod_group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": "train",
            "namespace": NAMESPACE,
            "annotations": {"gang.scheduling.koordinator.sh/network-topology-spec": spec},
        },
        "spec": {"minMember": 2, "scheduleTimeoutSeconds": 600},
    }
    members = [
        _in_pool(
            make_pod(
                f"train-{i}",
                NAMESPACE,
                cpu="4",
                memory="1Gi",
                labels={"pod-group.scheduling.sigs.k8s.io": "train"},
                priority_class="defrag-high",
            )
        )
        for i in range(2)
    ]
    return [pod_group, *members]


def _placed(cp: ControlPlane, prefix: str) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in pods(cp, NAMESPACE)
        if p["metadata"]["name"].startswith(prefix)
        and p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
    }


def _unschedulable(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)


def _pod_group_events(cp: ControlPlane) -> list[dict[str, Any]]:
    events = list_items(cp, "events", namespace=NAMESPACE)
    return [e for e in events if e["involvedObject"].get("kind") == "PodGroup"]


@pytest.fixture(scope="module")
def fragmented(control_plane: ControlPlane) -> Iterator[None]:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(TOPOLOGY))
    apply(
        cp,
        [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "defrag-high"},
                "value": 1000,
                # The gang waits instead of preempting (koord-scheduler's job-level preemption
                # would evict the fillers itself): only defragmentation can make room for it.
                "preemptionPolicy": "Never",
            }
        ],
    )
    apply(cp, [_node(name, block) for block, names in BLOCKS.items() for name in names])
    wait_nodes_ready(cp)
    apply(cp, [_filler_pod(f"filler-{node}", node) for node in NODES])
    apply(cp, [_replicaset()])

    def adopted() -> bool:
        owned = [p for p in pods(cp, NAMESPACE) if p["metadata"].get("ownerReferences")]
        return len(owned) == len(NODES)

    wait_for(adopted, timeout=60, what="the ReplicaSet adopting the bound filler pods")
    try:
        yield
    finally:
        cp.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cp.kubectl(
            "delete", "reservations", "-l", "descheduler.koordinator-py/defrag-plan", "--ignore-not-found"
        )
        cp.kubectl("delete", "node", *NODES, "--ignore-not-found")
        cp.kubectl("delete", "priorityclass", "defrag-high", "--ignore-not-found")


def test_a_must_gather_gang_starts_once_one_block_is_freed(
    control_plane: ControlPlane, scheduler: Scheduler, fragmented: None, tmp_path: Path
) -> None:
    cp = control_plane
    apply(cp, _gang())
    wait_for(
        lambda: (
            sum(_unschedulable(p) for p in pods(cp, NAMESPACE) if p["metadata"]["name"].startswith("train-"))
            == 2
        ),
        timeout=60,
        what="both gang members found unschedulable (every block holds filler pods)",
    )
    assert _placed(cp, "train-") == {}
    before = _placed(cp, "filler-")

    config = tmp_path / "descheduler-defrag.yaml"
    config.write_text(CONFIG)
    descheduler = _descheduler(cp, config)
    descheduler.start()
    try:
        placed = wait_for(
            lambda: (lambda got: got if len(got) == 2 else None)(_placed(cp, "train-")),
            timeout=240,
            what="the gang bound once koord-descheduler freed a block",
        )
    finally:
        descheduler.stop()
    nodes = list_items(cp, "nodes", selector=f"koord-e2e/pool={POOL}")
    block_of = {n["metadata"]["name"]: n["metadata"]["labels"][BLOCK] for n in nodes}
    (freed,) = {block_of[node] for node in placed.values()}
    # At most maxPodsToMove filler pods moved, exactly those of the freed block.
    moved = {name for name, node in before.items() if name not in _placed(cp, "filler-")}
    assert moved == {f"filler-{node}" for node in BLOCKS[freed]}, moved
    assert all(block_of[node] != freed for node in _placed(cp, "filler-").values())
    reasons = {e["reason"] for e in _pod_group_events(cp)}
    assert "DefragmentationPlanned" in reasons, reasons
    assert "DefragmentationEvicting" in reasons, reasons
    jobs = list_items(cp, "podmigrationjobs")
    ours = [
        j
        for j in jobs
        if (j["metadata"].get("annotations") or {}).get("koordinator.sh/evict-trigger")
        == "GangDefragmentation"
    ]
    assert len(ours) == 2, ours
    assert all((j["spec"].get("reservationOptions") or {}).get("reservationRef") for j in ours), ours
