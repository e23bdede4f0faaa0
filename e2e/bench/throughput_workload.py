"""The throughput benchmark's cluster and workload: the node description, the pending pods, the
check that both workloads fit, and the KubeSchedulerConfiguration both schedulers run with.

Two workloads (``--workload``): ``mixed``, pods of cycling cpu and memory requests, and
``identical``, the replicas of one Deployment: every pod has the same requests, labels
(``pod-template-hash`` included) and controller (one ReplicaSet, by name and uid), so a scheduler
that recognises pods of one template can share their Filter and Score (issue 32).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from apis.quantity import Quantity
from e2e.bench.harness import BenchError
from e2e.bench.processes import KOORD
from e2e.bench.throughput_model import Options, WorkloadKind
from e2e.bench.throughput_reservations import RESERVATION_CPU, RESERVATION_MEMORY, owner_label
from scheduler.simulator.description import ClusterDescription, NodePool

__all__ = [
    "IDENTICAL_CPU",
    "IDENTICAL_MEMORY",
    "IDENTICAL_OWNER",
    "bench_description",
    "check_fits",
    "controller_manager_args",
    "pods_path",
    "scheduler_config",
    "workload",
]

CPU_SIZES = ("250m", "500m", "1", "2")
MEMORY_SIZES = ("256Mi", "512Mi", "768Mi", "1Gi", "2Gi")
ZONES = ("a", "b", "c", "d")
FILL_LIMIT = 0.8
"""Both workloads together may use at most this share of the cluster's cpu, memory and pod slots."""

IDENTICAL_CPU = "500m"
IDENTICAL_MEMORY = "512Mi"
TEMPLATE_HASH = "5c9d8f7b6d"
"""The ``pod-template-hash`` a Deployment's controller gives its ReplicaSet and that set's pods."""
IDENTICAL_OWNER = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": f"identical-{TEMPLATE_HASH}",
    "uid": "3f6b2c1e-8d4a-4e6f-9b1c-7a5d2e0f4c83",
    "controller": True,
    "blockOwnerDeletion": True,
}
"""The one controller of every identical pod. The ReplicaSet is never created: neither scheduler
reads it but for the default spread constraints' selector, which is then empty in both."""


def controller_manager_args(opts: Options) -> tuple[tuple[str, str], ...]:
    """The identical workload's cluster runs kube-controller-manager without its garbage
    collector, which deletes a pod whose owner does not exist (every pod of a 20-node run was
    gone before the first scheduler started)."""
    if opts.workload != "identical":
        return ()
    return (("controllers", "*,-garbage-collector-controller"),)


def bench_description(opts: Options) -> ClusterDescription:
    """``opts.nodes`` nodes in four pools (one per zone), ``bench-<zone>-<i>``."""
    pools = []
    for i, zone in enumerate(ZONES):
        count = opts.nodes // len(ZONES) + (1 if i < opts.nodes % len(ZONES) else 0)
        if count == 0:
            continue
        pools.append(
            NodePool(
                name=f"bench-{zone}",
                count=count,
                cpu=Quantity.parse(opts.node_cpu),
                memory=Quantity.parse(opts.node_memory),
                pods=opts.node_pods,
                labels={
                    "topology.kubernetes.io/zone": f"zone-{zone}",
                    "node.kubernetes.io/instance-type": "bench.8xlarge",
                },
            )
        )
    return ClusterDescription(name=opts.cluster_name, node_pools=pools)


def workload(
    namespace: str,
    scheduler_name: str,
    count: int,
    *,
    kind: WorkloadKind = "mixed",
    reservations: int = 0,
    owner_share: float = 0.0,
) -> list[dict[str, Any]]:
    """``count`` pending pods. ``mixed``: ``bench-00000`` ... with cycling cpu and memory
    requests, labelled ``app=bench`` but for the ``owner_share`` that own one of ``reservations``
    reservations. ``identical``: ``identical-<hash>-00000`` ..., the replicas of one template."""
    width = max(5, len(str(count - 1)))
    if kind == "identical":
        return [
            _identical_pod(f"{IDENTICAL_OWNER['name']}-{i:0{width}d}", namespace, scheduler_name)
            for i in range(count)
        ]
    pods = []
    for i in range(count):
        requests = {"cpu": CPU_SIZES[i % len(CPU_SIZES)], "memory": MEMORY_SIZES[i % len(MEMORY_SIZES)]}
        app = owner_label(i, owner_share, reservations) or "bench"
        metadata = {"name": f"bench-{i:0{width}d}", "namespace": namespace, "labels": {"app": app}}
        pods.append(_pod(metadata, scheduler_name, requests))
    return pods


def _identical_pod(name: str, namespace: str, scheduler_name: str) -> dict[str, Any]:
    metadata = {
        "name": name,
        "namespace": namespace,
        "labels": {"app": "identical", "pod-template-hash": TEMPLATE_HASH},
        "ownerReferences": [dict(IDENTICAL_OWNER)],
    }
    return _pod(metadata, scheduler_name, {"cpu": IDENTICAL_CPU, "memory": IDENTICAL_MEMORY})


def _pod(metadata: dict[str, Any], scheduler_name: str, requests: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": requests},
                }
            ],
        },
    }


def check_fits(opts: Options, workloads: int) -> None:
    """Refuse sizes where the workloads together, and the reservations, would fill more than
    FILL_LIMIT of the cluster."""
    pods = workload("x", "x", opts.pods, kind=opts.workload)
    cpu = sum(
        Quantity.parse(p["spec"]["containers"][0]["resources"]["requests"]["cpu"]).milli_value() for p in pods
    )
    memory = sum(
        Quantity.parse(p["spec"]["containers"][0]["resources"]["requests"]["memory"]).value() for p in pods
    )
    demand = {
        "cpu": cpu * workloads + Quantity.parse(RESERVATION_CPU).milli_value() * opts.reservations,
        "memory": memory * workloads + Quantity.parse(RESERVATION_MEMORY).value() * opts.reservations,
        "pods": opts.pods * workloads + opts.reservations,
    }
    per_node = {
        "cpu": Quantity.parse(opts.node_cpu).milli_value(),
        "memory": Quantity.parse(opts.node_memory).value(),
        "pods": opts.node_pods,
    }
    for resource, needed in demand.items():
        fits = per_node[resource] * opts.nodes * FILL_LIMIT
        if needed > fits:
            minimum = math.ceil(needed / (per_node[resource] * FILL_LIMIT))
            raise BenchError(
                f"{workloads} x {opts.pods} pods and {opts.reservations} reservations need {resource} "
                f"of at least {minimum} nodes "
                f"(at most {FILL_LIMIT:.0%} full); got --nodes {opts.nodes}"
            )


def scheduler_config(opts: Options, kubeconfig: Path, scheduler_name: str) -> str:
    """The KubeSchedulerConfiguration both schedulers run with, but for the profile's name."""
    parallelism = "" if opts.parallelism is None else f"parallelism: {opts.parallelism}\n"
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "leaderElection:\n"
        "  leaderElect: false\n"
        "clientConnection:\n"
        f"  kubeconfig: {kubeconfig}\n"
        f"  qps: {opts.qps:g}\n"
        f"  burst: {opts.burst}\n"
        f"{parallelism}"
        "profiles:\n"
        f"- schedulerName: {scheduler_name}\n"
        + (_LOAD_AWARE if opts.load_aware and scheduler_name == KOORD else "")
    )


_LOAD_AWARE = "  plugins:\n    multiPoint:\n      enabled: [{name: LoadAwareScheduling}]\n"
"""``--load-aware``: LoadAwareScheduling is enabled by configuration (it is not in the default set)."""


def pods_path(pod: dict[str, Any]) -> str:
    return f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods"
