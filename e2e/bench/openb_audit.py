"""After a replay: is anything over-allocated? Checked from the stored objects alone.

Every bound pod's requests (CPU, memory) are summed per node against the node's allocatable, its
``device-allocated`` annotation per card against what the node's Device says the card has
(gpu-core, gpu-memory-ratio, gpu-memory); the cards a pod got must add up to the gpu-core it asked
for, be cards of its node, and be of a model its GPU affinity allows. Nothing here asks the
scheduler: a bookkeeping bug of the scheduler's cache cannot hide itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from apis.client.backend import DEVICES, NODES, PODS
from apis.extension.device import (
    LABEL_GPU_MODEL,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    get_device_allocations,
)
from apis.podrequests import pod_requests
from apis.quantity import Quantity
from apis.resources import to_int_units
from scheduler.backend.memory import MemoryBackend

__all__ = ["Audit", "NodeLeft", "OverAllocationError", "audit"]

_CARD_RESOURCES = (RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY_RATIO, RESOURCE_GPU_MEMORY)
_NODE_RESOURCES = ("cpu", "memory")
_MAX_LISTED = 20


class NodeLeft(BaseModel, frozen=True):
    """What a node has left at the end of a replay (to see why the last pods found no room)."""

    node: str
    model: str | None
    cpu_milli: int
    memory_mib: int
    gpu_core: list[int]
    """Free gpu-core of each card, by minor (100: an idle card)."""


class Audit(BaseModel):
    pods: int
    """Bound pods checked."""
    nodes: int
    cards: int
    violations: list[str] = Field(default_factory=list)
    """What was found over-allocated or inconsistent (the first few)."""
    violation_count: int = 0
    left: list[NodeLeft] = Field(default_factory=list)


class OverAllocationError(RuntimeError):
    """The replay left something over-allocated: a bug of the scheduler, never a figure to report."""

    def __init__(self, strategy: str, result: Audit) -> None:
        listed = "\n  ".join(result.violations)
        super().__init__(
            f"{strategy}: {result.violation_count} over-allocations or inconsistencies:\n  {listed}"
        )
        self.audit = result


def _quantity(resources: Mapping[str, Quantity] | None, name: str) -> int:
    value = (resources or {}).get(name)
    return 0 if value is None else to_int_units(name, value)


def audit(backend: MemoryBackend, gpu_models: Mapping[str, Sequence[str]] | None = None) -> Audit:
    """The audit of every bound pod in ``backend``; ``gpu_models`` names the models each pod (by
    name) may run on, where it is restricted."""
    violations: list[str] = []
    nodes = {n.metadata.name or "": n for n in backend.list(NODES)}
    cards: dict[tuple[str, int], dict[str, int]] = {}
    for device in backend.list(DEVICES):
        for info in (device.spec.devices if device.spec else None) or ():
            if info.type == "gpu" and info.minor is not None:
                cards[(device.metadata.name or "", info.minor)] = {
                    r: _quantity(info.resources, r) for r in _CARD_RESOURCES
                }
    node_used: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(_NODE_RESOURCES, 0))
    card_used: dict[tuple[str, int], dict[str, int]] = defaultdict(lambda: dict.fromkeys(_CARD_RESOURCES, 0))
    bound = 0
    for pod in backend.list(PODS):
        node_name, name = pod.spec.node_name, pod.metadata.name or ""
        if not node_name:
            violations.append(f"pod {name} is left unbound (a failed pod is withdrawn)")
            continue
        bound += 1
        node = nodes.get(node_name)
        if node is None:
            violations.append(f"pod {name} is bound to {node_name}, which does not exist")
            continue
        requests = pod_requests(pod.spec)
        for resource in _NODE_RESOURCES:
            node_used[node_name][resource] += _quantity(requests, resource)
        allocated = get_device_allocations(pod.metadata.annotations) or {}
        granted = 0
        for entry in allocated.get("gpu", ()):
            key = (node_name, entry.minor)
            if key not in cards:
                violations.append(f"pod {name} holds GPU {entry.minor} of {node_name}: no such card")
                continue
            for resource in _CARD_RESOURCES:
                card_used[key][resource] += _quantity(entry.resources, resource)
            granted += _quantity(entry.resources, RESOURCE_GPU_CORE)
        asked = _quantity(requests, RESOURCE_GPU_CORE)
        if granted != asked:
            violations.append(f"pod {name} asked for gpu-core {asked} and holds {granted}")
        allowed = (gpu_models or {}).get(name)
        model = (node.metadata.labels or {}).get(LABEL_GPU_MODEL)
        if allowed and granted and model not in allowed:
            violations.append(f"pod {name} may run on {'|'.join(allowed)} and got {model} on {node_name}")
    for node_name, used in sorted(node_used.items()):
        allocatable = nodes[node_name].status.allocatable if nodes[node_name].status else None
        for resource, amount in used.items():
            limit = _quantity(allocatable, resource)
            if amount > limit:
                violations.append(f"node {node_name}: {resource} {amount} allocated of {limit}")
    for (node_name, minor), used in sorted(card_used.items()):
        for resource, amount in used.items():
            limit = cards[(node_name, minor)][resource]
            if amount > limit:
                violations.append(f"node {node_name} GPU {minor}: {resource} {amount} allocated of {limit}")
    minors: dict[str, list[int]] = defaultdict(list)
    for node_name, minor in sorted(cards):
        minors[node_name].append(minor)
    left = []
    for node_name, node in sorted(nodes.items()):
        allocatable = node.status.allocatable if node.status else None
        used = node_used.get(node_name, dict.fromkeys(_NODE_RESOURCES, 0))
        core = []
        for minor in minors[node_name]:
            taken = card_used.get((node_name, minor), {}).get(RESOURCE_GPU_CORE, 0)
            core.append(cards[(node_name, minor)][RESOURCE_GPU_CORE] - taken)
        left.append(
            NodeLeft(
                node=node_name,
                model=(node.metadata.labels or {}).get(LABEL_GPU_MODEL),
                cpu_milli=_quantity(allocatable, "cpu") - used["cpu"],
                memory_mib=(_quantity(allocatable, "memory") - used["memory"]) // 2**20,
                gpu_core=core,
            )
        )
    return Audit(
        pods=bound,
        nodes=len(nodes),
        cards=len(cards),
        violations=violations[:_MAX_LISTED],
        violation_count=len(violations),
        left=left,
    )
