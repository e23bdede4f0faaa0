"""NodePorts on the real API server: two pods asking for the same host port never share a node.

Two fake nodes of their own (tainted, so that no other scenario's pods land there): on one node
the second pod stays pending with kube-scheduler's FailedScheduling reason; across two nodes the
second pod goes to the other node, the third waits, and binds once a holder is deleted (NodePorts
registers pod deletion).
"""

from __future__ import annotations

from typing import Any

from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, failed_scheduling, make_pod, pods, wait_for

NAMESPACE = "node-ports"
NODES = ("ports-0", "ports-1")
TAINT = {"key": "koord-e2e/pool", "value": "ports", "effect": "NoSchedule"}
REASON = "didn't have free ports for the requested pod ports"


def _node(name: str) -> dict[str, Any]:
    resources = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "node-type": "ports"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _pod(name: str, port: int, protocol: str, selector: dict[str, str]) -> dict[str, Any]:
    pod = make_pod(name, NAMESPACE, cpu="100m", memory="64Mi", node_selector=selector, tolerations=[TAINT])
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": protocol}]
    return pod


def _placement(cp: ControlPlane, prefix: str) -> dict[str, str | None]:
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName")
        for p in pods(cp, NAMESPACE)
        if p["metadata"]["name"].startswith(prefix)
    }


def test_a_taken_host_port_sends_the_pod_elsewhere_or_leaves_it_pending(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    apply(cp, [_node(name) for name in NODES])
    try:
        wait_nodes_ready(cp)

        # One node: the second pod with hostPort 8080 (TCP by default) has nowhere to go.
        one_node = {"kubernetes.io/hostname": NODES[0]}
        apply(cp, [_pod("web-0", 8080, "TCP", one_node)])
        wait_for(lambda: _placement(cp, "web-")["web-0"], timeout=60, what="web-0 bound")
        apply(cp, [_pod("web-1", 8080, "TCP", one_node)])
        messages = wait_for(
            lambda: [m for m in failed_scheduling(cp, NAMESPACE, "web-1") if REASON in m],
            timeout=60,
            what="a FailedScheduling event for web-1 naming the port",
        )
        assert f"1 node(s) {REASON}" in messages[-1], messages[-1]
        assert _placement(cp, "web-") == {"web-0": NODES[0], "web-1": None}

        # Two nodes: UDP 53 three times; two land on different nodes, the third waits.
        both = {"node-type": "ports"}
        apply(cp, [_pod(f"dns-{i}", 53, "UDP", both) for i in range(3)])

        def two_bound() -> dict[str, str | None] | None:
            placement = _placement(cp, "dns-")
            return placement if sum(1 for node in placement.values() if node) == 2 else None

        placed = wait_for(two_bound, timeout=60, what="two dns pods bound")
        bound = {name: node for name, node in placed.items() if node}
        assert sorted(bound.values()) == sorted(NODES), placed
        (waiting,) = (name for name, node in placed.items() if not node)
        messages = wait_for(
            lambda: [m for m in failed_scheduling(cp, NAMESPACE, waiting) if REASON in m],
            timeout=60,
            what=f"a FailedScheduling event for {waiting} naming the port",
        )
        assert f"2 node(s) {REASON}" in messages[-1], messages[-1]

        # A holder goes away: the port is free again and the waiting pod takes it.
        gone, freed = sorted(bound.items())[0]
        cp.kubectl("delete", "pod", gone, "-n", NAMESPACE, "--grace-period=0", "--force")
        wait_for(
            lambda: _placement(cp, "dns-").get(waiting) == freed,
            timeout=60,
            what=f"{waiting} bound to {freed} after {gone} was deleted",
        )
        final = _placement(cp, "dns-")
        assert sorted(n for n in final.values() if n) == sorted(NODES), final
    finally:
        cp.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")
        cp.kubectl("delete", "node", *NODES, "--ignore-not-found", "--wait=false")
