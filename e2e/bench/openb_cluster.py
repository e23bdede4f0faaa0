"""The openb trace as Kubernetes objects: its nodes as a cluster description (nodes and Devices), its
tasks as pods asking for GPUs the way DeviceShare reads them.

Nodes of the same shape (CPU, memory, GPU count and model) form one node pool of
``scheduler.simulator.description``, so each gets the node labels koord-manager copies from its
Device (``node.koordinator.sh/gpu-model`` is the trace's model: ``V100M16``, ``G2``, ...) and a Device
with one card per GPU. A task asks for ``koordinator.sh/gpu-core`` and ``gpu-memory-ratio`` (100 per
whole card; a share of one card below 100, in whole percents), its CPU and memory; a ``gpu_spec`` is a
required node affinity on the GPU model label.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from apis.extension.device import LABEL_GPU_MODEL, RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY_RATIO
from apis.quantity import Quantity
from e2e.bench.openb_trace import FULL_GPU_MILLI, Submission, TraceNode, TraceTask
from scheduler.simulator.description import ClusterDescription, GPUSpec, NodePool

__all__ = ["GPU_MEMORY", "NAMESPACE", "SCHEDULER", "cluster_description", "gpu_percent", "pod_manifest"]

NAMESPACE = "openb"
SCHEDULER = "koord-scheduler"

GPU_MEMORY = {
    "P100": "16Gi",
    "T4": "16Gi",
    "V100M16": "16Gi",
    "V100M32": "32Gi",
    "A10": "24Gi",
    "G1": "16Gi",
    "G2": "16Gi",
    "G3": "32Gi",
}
"""Memory of one card per model. The trace's in-house models (G1, G2, G3) do not say theirs; the
tasks ask for a ratio of a card's memory, never bytes, so these only fill the Device's
``gpu-memory`` and change no placement."""
_DEFAULT_GPU_MEMORY = "16Gi"


_Shape = tuple[int, int, int, str]


def _pool_name(shape: _Shape, taken: set[str]) -> str:
    cpu_milli, memory_mib, gpus, model = shape
    memory = f"{memory_mib // 1024}g" if memory_mib % 1024 == 0 else f"{memory_mib}mi"
    base = f"openb-{cpu_milli // 1000}c-{memory}" + (f"-{gpus}x{model.lower()}" if gpus else "")
    name, suffix = base, 1
    while name in taken:  # shapes that differ below a whole core share a name otherwise
        name, suffix = f"{base}-{suffix}", suffix + 1
    taken.add(name)
    return name


def cluster_description(nodes: Sequence[TraceNode]) -> ClusterDescription:
    """One node pool per node shape, in order of first appearance: the nodes are ``<pool>-<i>``."""
    shapes: dict[_Shape, int] = {}
    for node in nodes:
        shape = (node.cpu_milli, node.memory_mib, node.gpus, node.model)
        shapes[shape] = shapes.get(shape, 0) + 1
    taken: set[str] = set()
    node_pools = []
    for shape, count in shapes.items():
        cpu_milli, memory_mib, gpu_count, model = shape
        gpus = None
        if gpu_count:
            memory = Quantity.parse(GPU_MEMORY.get(model, _DEFAULT_GPU_MEMORY))
            gpus = GPUSpec(count=gpu_count, model=model, memory=memory)
        node_pools.append(
            NodePool(
                name=_pool_name(shape, taken),
                count=count,
                cpu=Quantity.from_milli(cpu_milli),
                memory=Quantity.parse(f"{memory_mib}Mi"),
                gpus=gpus,
            )
        )
    return ClusterDescription(name="openb", node_pools=node_pools)


def gpu_percent(task: TraceTask) -> int:
    """The ``gpu-core`` (and ``gpu-memory-ratio``) a task asks for: 100 per whole card, a share of
    one card in whole percents (rounded up: a task never gets less than it asked for)."""
    if task.shares_a_gpu:
        return math.ceil(task.gpu_milli * 100 / FULL_GPU_MILLI)
    return 100 * task.num_gpu


def _affinity(models: Sequence[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": LABEL_GPU_MODEL, "operator": "In", "values": list(models)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def pod_manifest(submission: Submission) -> dict[str, Any]:
    task = submission.task
    resources: dict[str, str] = {}
    if task.cpu_milli:
        resources["cpu"] = f"{task.cpu_milli}m"
    if task.memory_mib:
        resources["memory"] = f"{task.memory_mib}Mi"
    if task.num_gpu:
        percent = str(gpu_percent(task))
        resources[RESOURCE_GPU_CORE] = percent
        resources[RESOURCE_GPU_MEMORY_RATIO] = percent
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": resources, "limits": resources}}
        ],
    }
    if task.gpu_models:
        spec["affinity"] = _affinity(task.gpu_models)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": submission.pod_name, "namespace": NAMESPACE, "labels": {"app": "openb"}},
        "spec": spec,
    }
