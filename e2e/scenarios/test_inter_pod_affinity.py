"""Pod anti-affinity on the real API server: replicas that must never share a node do not, the one
left over reports kube-scheduler's reason and binds once a matching pod is deleted, and a gang kept
apart by hostname lands one member per node. koord-scheduler runs with the chart's RBAC, so its
namespace watch (namespaceSelector) is exercised too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster.controlplane import ControlPlane
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, bound, failed_scheduling, make_pod, wait_for

HOSTNAME = "kubernetes.io/hostname"
POOL = "koord-e2e/inter-pod-affinity"
SPREAD_NODES = ("cpu-18", "cpu-19")
GANG_NODES = ("cpu-17", "cpu-20", "cpu-21")


@pytest.fixture(scope="module")
def pools(control_plane: ControlPlane) -> Iterator[None]:
    for node in SPREAD_NODES:
        control_plane.kubectl("label", "node", node, f"{POOL}=spread", "--overwrite")
    for node in GANG_NODES:
        control_plane.kubectl("label", "node", node, f"{POOL}=gang", "--overwrite")
    yield
    for node in (*SPREAD_NODES, *GANG_NODES):
        control_plane.kubectl("label", "node", node, f"{POOL}-")


def apart_from(name: str, namespace: str, pool: str, labels: dict[str, str], **kwargs: Any) -> dict[str, Any]:
    pod = make_pod(
        name, namespace, cpu="100m", memory="64Mi", node_selector={POOL: pool}, labels=labels, **kwargs
    )
    term = {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": labels}}
    pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return pod


def bound_count(cp: ControlPlane, namespace: str, count: int) -> dict[str, str] | None:
    placed = bound(cp, namespace, include_deleting=False)
    return placed if len(placed) == count else None


def test_anti_affine_replicas_spread_and_the_leftover_waits_for_a_node(
    control_plane: ControlPlane, scheduler: Scheduler, pools: None
) -> None:
    ns = "ipa-spread"
    control_plane.create_namespace(ns)
    apply(control_plane, [apart_from(f"web-{i}", ns, "spread", {"app": "ipa-web"}) for i in range(3)])
    placed = wait_for(
        lambda: bound_count(control_plane, ns, 2),
        timeout=60,
        what="two replicas bound",
    )
    assert sorted(placed.values()) == sorted(SPREAD_NODES)
    (pending,) = {"web-0", "web-1", "web-2"} - set(placed)

    def reported() -> list[str] | None:
        return failed_scheduling(control_plane, ns, pending) or None

    message = wait_for(reported, timeout=60, what=f"a FailedScheduling event for {pending}")[-1]
    assert "2 node(s) didn't match pod anti-affinity rules" in message, message
    assert bound(control_plane, ns, include_deleting=False).get(pending) is None

    gone = sorted(placed)[0]
    control_plane.kubectl("delete", "pod", "-n", ns, gone, "--wait=true")
    moved = wait_for(
        lambda: bound(control_plane, ns, include_deleting=False).get(pending),
        timeout=60,
        what=f"{pending} bound after {gone} went",
    )
    assert moved == placed[gone]


def test_a_gang_kept_apart_by_hostname_lands_one_member_per_node(
    control_plane: ControlPlane, scheduler: Scheduler, pools: None
) -> None:
    ns = "ipa-gang"
    control_plane.create_namespace(ns)
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": ns},
        "spec": {"minMember": 3},
    }
    apply(control_plane, [group])
    workers = [
        apart_from(
            f"worker-{i}",
            ns,
            "gang",
            {"role": "ipa-worker"},
        )
        for i in range(3)
    ]
    for worker in workers:
        worker["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "train"
    apply(control_plane, workers)
    placed = wait_for(lambda: bound_count(control_plane, ns, 3), timeout=90, what="the gang bound")
    assert sorted(placed.values()) == sorted(GANG_NODES)
