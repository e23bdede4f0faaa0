"""NodeResourceTopology objects as koordlet writes them, and pods for the NodeNUMAResource tests.

The machine is the issue's small topology: 2 sockets x 2 NUMA nodes x 8 cores x 2 threads, CPU
``t * 32 + c`` is thread ``t`` of core ``c``, NUMA node n holds cores 8n..8n+7 (CPUs 8n..8n+7 and
32+8n..32+8n+7), 16 CPUs and 64 GiB per NUMA node.
"""

from __future__ import annotations

import json
from typing import Any

from apis.extension.numa import ANNOTATION_KUBELET_CPU_MANAGER_POLICY, ANNOTATION_NODE_CPU_TOPOLOGY

GIB = 2**30
CORES = 32
NUMA_NODES = 4


def cpu_topology_annotation(sockets: int = 2, numa_per_socket: int = 2, cores_per_numa: int = 8) -> str:
    total = sockets * numa_per_socket * cores_per_numa
    detail = []
    for thread in range(2):
        for core in range(total):
            numa = core // cores_per_numa
            socket = numa // numa_per_socket
            detail.append({"id": thread * total + core, "core": core, "socket": socket, "node": numa})
    return json.dumps({"detail": sorted(detail, key=lambda d: d["id"])})


def nrt(
    node: str,
    *,
    policies: list[str] | None = None,
    kubelet: dict[str, Any] | None = None,
    numa_nodes: int = NUMA_NODES,
    extra: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The NRT of one node: one zone per NUMA node with 16 CPUs and 64 GiB (``extra``: more
    resources per zone, e.g. batch-cpu)."""
    zones = []
    for numa in range(numa_nodes):
        resources = [
            {"name": "cpu", "capacity": "16", "allocatable": "16", "available": "16"},
            {"name": "memory", "capacity": "64Gi", "allocatable": "64Gi", "available": "64Gi"},
        ]
        for name, amount in (extra or {}).items():
            resources.append({"name": name, "capacity": amount, "allocatable": amount, "available": amount})
        zones.append({"name": f"node-{numa}", "type": "Node", "resources": resources})
    # The 2 x 2 machine; another NUMA count: one socket of that many NUMA nodes.
    layout = (2, 2) if numa_nodes == NUMA_NODES else (1, numa_nodes)
    all_annotations = {ANNOTATION_NODE_CPU_TOPOLOGY: cpu_topology_annotation(*layout)}
    if kubelet is not None:
        all_annotations[ANNOTATION_KUBELET_CPU_MANAGER_POLICY] = json.dumps(kubelet)
    all_annotations.update(annotations or {})
    return {
        "metadata": {
            "name": node,
            "labels": {"app.kubernetes.io/managed-by": "Koordinator"},
            "annotations": all_annotations,
        },
        "topologyPolicies": policies or ["None"],
        "zones": zones,
    }


def node(name: str, *, labels: dict[str, str] | None = None, numa_nodes: int = NUMA_NODES) -> dict[str, Any]:
    cpus = 16 * numa_nodes
    allocatable = {"cpu": str(cpus), "memory": f"{64 * numa_nodes}Gi", "pods": "110"}
    return {"metadata": {"name": name, "labels": labels or {}}, "status": {"allocatable": allocatable}}


def pod(
    name: str,
    cpu: str,
    memory: str = "1Gi",
    *,
    qos: str | None = "LSR",
    numa_policy: str | None = None,
    exclusive: str | None = None,
    spec: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
    node_name: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A koord-prod pod (by QoS) asking for ``cpu`` and ``memory`` (requests = limits)."""
    wanted = {"cpu": cpu, "memory": memory, **(extra or {})}
    all_annotations = dict(annotations or {})
    if numa_policy is not None or exclusive is not None:
        numa_spec: dict[str, str] = {}
        if numa_policy is not None:
            numa_spec["numaTopologyPolicy"] = numa_policy
        if exclusive is not None:
            numa_spec["singleNUMANodeExclusive"] = exclusive
        all_annotations["scheduling.koordinator.sh/numa-topology-spec"] = json.dumps(numa_spec)
    if spec is not None:
        all_annotations["scheduling.koordinator.sh/resource-spec"] = json.dumps(spec)
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    body: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "containers": [{"name": "c", "resources": {"requests": wanted, "limits": wanted}}],
    }
    if node_name:
        body["nodeName"] = node_name
    metadata = {
        "name": name,
        "namespace": "default",
        "uid": name,
        "labels": labels,
        "annotations": all_annotations,
    }
    return {"metadata": metadata, "spec": body}
