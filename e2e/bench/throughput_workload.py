"""The throughput benchmark's cluster and workload: the node description, the pending pods, the
check that both workloads fit, and the KubeSchedulerConfiguration both schedulers run with."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from apis.quantity import Quantity
from e2e.bench.harness import BenchError
from e2e.bench.processes import KOORD
from e2e.bench.throughput_model import Options
from e2e.bench.throughput_reservations import RESERVATION_CPU, RESERVATION_MEMORY, owner_label
from scheduler.simulator.description import ClusterDescription, NodePool

__all__ = ["bench_description", "check_fits", "pods_path", "scheduler_config", "workload"]

CPU_SIZES = ("250m", "500m", "1", "2")
MEMORY_SIZES = ("256Mi", "512Mi", "768Mi", "1Gi", "2Gi")
ZONES = ("a", "b", "c", "d")
FILL_LIMIT = 0.8
"""Both workloads together may use at most this share of the cluster's cpu, memory and pod slots."""


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
    namespace: str, scheduler_name: str, count: int, *, reservations: int = 0, owner_share: float = 0.0
) -> list[dict[str, Any]]:
    """``count`` pending pods ``bench-00000`` ... with cycling cpu and memory requests, labelled
    ``app=bench`` but for the ``owner_share`` that own one of ``reservations`` reservations."""
    width = max(5, len(str(count - 1)))
    pods = []
    for i in range(count):
        requests = {"cpu": CPU_SIZES[i % len(CPU_SIZES)], "memory": MEMORY_SIZES[i % len(MEMORY_SIZES)]}
        app = owner_label(i, owner_share, reservations) or "bench"
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"bench-{i:0{width}d}",
                    "namespace": namespace,
                    "labels": {"app": app},
                },
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
        )
    return pods


def check_fits(opts: Options, workloads: int) -> None:
    """Refuse sizes where the workloads together, and the reservations, would fill more than
    FILL_LIMIT of the cluster."""
    pods = workload("x", "x", opts.pods)
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
