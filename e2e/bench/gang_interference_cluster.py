"""The gang-interference benchmark's cluster and workload, as wire objects for the in-memory backend.

The cluster is ``gang_placement.build_cluster``'s fragmented two-spine cluster made concrete: every
node has 8 GPUs and 128 cores, and a filler pod bound to it (``spec.nodeName``) takes what that
cluster says is not free, so CP-SAT sees the same fragmented free capacity the placement benchmark
measures. The nodes carry NVIDIA topograph's spine and block labels and the ClusterNetworkTopology
``default`` is Koordinator v1.7's spine -> block -> node example.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from apis.extension import gang as gang_ext
from apis.extension import networktopology as topology_ext
from apis.quantity import Quantity
from e2e.bench.gang_placement import CPU_PER_NODE, GPUS_PER_NODE, build_cluster
from e2e.bench.processes import KOORD
from e2e.bench.throughput_workload import workload
from scheduler.simulator.description import ClusterDescription, NodePool

__all__ = [
    "GANG_NAMESPACE",
    "GANG_PRIORITY",
    "PLAIN_NAMESPACE",
    "Cluster",
    "build",
    "gang",
    "plain_pods",
    "scheduler_config",
    "topology",
]

GPU = "nvidia.com/gpu"
NODE_MEMORY = "1Ti"
FILL_NAMESPACE = "bench-fill"
PLAIN_NAMESPACE = "bench-plain"
GANG_NAMESPACE = "bench-gangs"
MEMBER_REQUESTS = {GPU: "2", "cpu": "16", "memory": "32Gi"}
"""One gang member: gang_placement.py's member (2 GPUs, 16 cores) plus some memory."""
GANG_PRIORITY = 1000
"""Gang members outrank the plain pods (priority 0), as a training job of a higher priority class
would: a gang is placed as soon as it is submitted, in the middle of the plain backlog, rather than
after it (the queue orders equal priorities by creation time)."""


@dataclass(frozen=True)
class Cluster:
    nodes: list[dict[str, Any]]
    fillers: list[dict[str, Any]]
    spines: int
    blocks: int
    free_gpus: int


def build(n_nodes: int, seed: int) -> Cluster:
    """``n_nodes`` nodes in per-block pools (``<block>-<i>``) and the fillers that fragment them."""
    specs = build_cluster(n_nodes, random.Random(seed))
    per_block = Counter(spec.path[1] for spec in specs)
    pools = [
        NodePool(
            name=block,
            count=count,
            cpu=Quantity.from_int(CPU_PER_NODE // 1000),
            memory=Quantity.parse(NODE_MEMORY),
            extended_resources={GPU: Quantity.from_int(GPUS_PER_NODE)},
            labels={
                topology_ext.LABEL_NVIDIA_TOPOLOGY_SPINE: block.split("-")[0],
                topology_ext.LABEL_NVIDIA_TOPOLOGY_BLOCK: block,
            },
        )
        for block, count in sorted(per_block.items())
    ]
    nodes = ClusterDescription(name="gang-interference", node_pools=pools).nodes()
    index: Counter[str] = Counter()
    fillers = []
    for spec in specs:
        block = spec.path[1]
        node = f"{block}-{index[block]}"
        index[block] += 1
        gpus, cpu = spec.free.values
        if gpus < GPUS_PER_NODE or cpu < CPU_PER_NODE:
            fillers.append(_filler(node, GPUS_PER_NODE - gpus, CPU_PER_NODE - cpu))
    return Cluster(
        nodes=nodes,
        fillers=fillers,
        spines=len({spec.path[0] for spec in specs}),
        blocks=len(per_block),
        free_gpus=sum(spec.free.values[0] for spec in specs),
    )


def _filler(node: str, gpus: int, milli_cpu: int) -> dict[str, Any]:
    """A running pod bound to ``node`` that takes ``gpus`` GPUs and ``milli_cpu`` of its cores."""
    requests = {GPU: str(gpus), "cpu": f"{milli_cpu}m"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"filler-{node}", "namespace": FILL_NAMESPACE},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": requests, "limits": {GPU: str(gpus)}},
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def topology() -> dict[str, Any]:
    """The ClusterNetworkTopology ``default``: spine -> block -> node (docs/examples/v1.7)."""
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {
            "networkTopologySpec": [
                {"labelKey": [topology_ext.LABEL_NVIDIA_TOPOLOGY_SPINE], "topologyLayer": "SpineLayer"},
                {
                    "labelKey": [topology_ext.LABEL_NVIDIA_TOPOLOGY_BLOCK],
                    "parentTopologyLayer": "SpineLayer",
                    "topologyLayer": "BlockLayer",
                },
                {"parentTopologyLayer": "BlockLayer", "topologyLayer": topology_ext.NODE_TOPOLOGY_LAYER},
            ]
        },
    }


def plain_pods(count: int) -> list[dict[str, Any]]:
    """The throughput benchmark's pods (cpu 250m..2, memory 256Mi..2Gi, no GPU), pending."""
    return workload(PLAIN_NAMESPACE, KOORD, count)


def gang(name: str, size: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A PodGroup (minMember ``size``, PreferGather on BlockLayer) and its ``size`` ranked members."""
    spec = json.dumps({"gatherStrategy": [{"layer": "BlockLayer", "strategy": "PreferGather"}]})
    pod_group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": GANG_NAMESPACE,
            "annotations": {topology_ext.ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC: spec},
        },
        "spec": {"minMember": size},
    }
    width = len(str(size - 1))
    members = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{rank:0{width}d}",
                "namespace": GANG_NAMESPACE,
                "labels": {gang_ext.LABEL_POD_GROUP: name},
                "annotations": {gang_ext.ANNOTATION_GANG_NETWORK_TOPOLOGY_INDEX: str(rank)},
            },
            "spec": {
                "schedulerName": KOORD,
                "priority": GANG_PRIORITY,
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": MEMBER_REQUESTS, "limits": {GPU: MEMBER_REQUESTS[GPU]}},
                    }
                ],
            },
        }
        for rank in range(size)
    ]
    return pod_group, members


def scheduler_config(solver_time_limit_seconds: float) -> str:
    """The default profile with network-topology-aware gangs, as ``make up`` runs it."""
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        f"- schedulerName: {KOORD}\n"
        "  pluginConfig:\n"
        "  - name: Coscheduling\n"
        "    args:\n"
        "      awareNetworkTopology: true\n"
        f"      solverTimeLimitSeconds: {solver_time_limit_seconds:g}\n"
    )
