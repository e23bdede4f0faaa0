"""Per-node device state beside the cache: the cards and RDMA NICs each node's Device reports and
what pods hold (NIC amounts and VFs included).

Fed by the Device informer (cards) and by pods: assumed at Reserve, forgotten at Unreserve, and
confirmed from a bound pod's ``device-allocated`` annotation on the pod watch, so a restarted
scheduler rebuilds every node's usage from the pods it lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from apis.errors import InvalidAnnotation
from apis.extension.device import (
    ANNOTATION_GPU_PARTITIONS,
    GPU_PARTITION_POLICY_HONOR,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    DeviceAllocations,
    GPUPartitionTable,
    get_gpu_partition_table,
    gpu_partition_policy,
    is_secondary_device_well_planned,
)
from apis.extension.gpu_partition_tables import builtin_partition_table
from apis.resources import to_int_units
from apis.scheduling.device import Device
from scheduler.plugins.device_share.allocator import GPU, Allocation, GPUUsage
from scheduler.plugins.device_share.card_table import CardTable
from scheduler.plugins.device_share.npu import npu_capacity
from scheduler.plugins.device_share.rdma import RDMA, RDMAAllocation, RDMAUsage, rdmas_of

__all__ = ["DeviceStore", "NodeGPUs", "allocations_of", "gpus_of"]

_GPU = "gpu"


def gpus_of(device: Device) -> list[GPU]:
    """The healthy GPUs of a Device object (an unhealthy card, or one without resources, is skipped)."""
    gpus: list[GPU] = []
    for info in (device.spec.devices if device.spec else None) or ():
        if info.type != _GPU or info.minor is None or not info.health or not info.resources:
            continue
        resources = info.resources
        core = resources.get(RESOURCE_GPU_CORE)
        memory = resources.get(RESOURCE_GPU_MEMORY)
        ratio = resources.get(RESOURCE_GPU_MEMORY_RATIO)
        npu = npu_capacity(resources)
        topology = info.topology
        gpus.append(
            GPU(
                minor=info.minor,
                memory=to_int_units(RESOURCE_GPU_MEMORY, memory) if memory is not None else 0,
                core=to_int_units(RESOURCE_GPU_CORE, core) if core is not None else 0 if any(npu) else 100,
                ratio=to_int_units(RESOURCE_GPU_MEMORY_RATIO, ratio) if ratio is not None else 100,
                numa=topology.node_id if topology else None,
                pcie=topology.pcie_id if topology else None,
                uuid=info.uuid,
                labels=dict(info.labels or {}),
                npu=npu,
            )
        )
    return sorted(gpus, key=lambda g: g.minor)


def _gpu_minors(device: Device) -> list[int]:
    """Every GPU minor the Device lists, healthy or not (the board's layout, for built-in tables)."""
    infos = (device.spec.devices if device.spec else None) or ()
    return [i.minor for i in infos if i.type == _GPU and i.minor is not None]


def allocations_of(allocated: DeviceAllocations) -> list[Allocation]:
    """The GPU entries of a ``device-allocated`` annotation."""
    result = []
    for entry in allocated.get(_GPU, ()):
        res = entry.resources
        core, memory, ratio = (
            res.get(n) for n in (RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY, RESOURCE_GPU_MEMORY_RATIO)
        )
        result.append(
            Allocation(
                entry.minor,
                GPUUsage(
                    core=core.value() if core is not None else 0,
                    memory=memory.value() if memory is not None else 0,
                    ratio=ratio.value() if ratio is not None else 0,
                    npu=npu_capacity(res),
                ),
            )
        )
    return result


@dataclass(slots=True)
class NodeGPUs:
    gpus: list[GPU] = field(default_factory=list)
    partitions: GPUPartitionTable | None = None
    """The Device's ``gpu-partitions`` table (None: none, or malformed)."""
    honor_partitions: bool = False
    """The Device is labelled ``gpu-partition-policy: Honor`` (as the v1.6 notes show it)."""
    vendor: str | None = None
    model: str | None = None
    """The Device's ``gpu-vendor`` / ``gpu-model`` labels (koordlet writes them; vendor adaptation and
    shared-resource templates are keyed by them)."""
    usage: dict[int, GPUUsage] = field(default_factory=dict)
    """Minor -> the sum of what pods hold on it (including minors the Device no longer lists)."""
    rdmas: list[RDMA] = field(default_factory=list)
    rdma_usage: RDMAUsage = field(default_factory=RDMAUsage)
    secondary_well_planned: bool = False
    """The Device is labelled ``secondary-device-well-planned: true`` (its NICs are planned for
    whole-GPU joint pods, so Filter and Score leave them to Reserve)."""


_CHANGES_KEPT_PER_NODE = 4
_CHANGES_KEPT = 4096
"""The change log keeps at least this many entries (plus four per node) before it drops its older half."""


@dataclass(slots=True)
class _Held:
    node: str
    allocations: tuple[Allocation, ...]
    assumed: bool
    rdma: tuple[RDMAAllocation, ...] = ()


class DeviceStore:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeGPUs] = {}
        self.has_device: set[str] = set()
        """Nodes whose Device object exists (possibly with no healthy GPU)."""
        self._held: dict[str, _Held] = {}
        self._changes: list[str] = []
        """The nodes changed, in order (``changed_since``); its first entry is change number
        ``_changes_start``."""
        self._changes_start = 0
        self._cards = CardTable()
        self._stale_rows: set[str] = set()
        """Nodes changed since ``cards`` last rewrote their rows."""
        self._device_names: frozenset[str] | None = None

    # ---- Devices ----

    def set_device(self, device: Device) -> None:
        name = device.metadata.name or ""
        node = self.nodes.setdefault(name, NodeGPUs())
        node.gpus = gpus_of(device)
        try:
            node.partitions = get_gpu_partition_table(device.metadata.annotations)
        except InvalidAnnotation:
            node.partitions = None
        if node.partitions is None and ANNOTATION_GPU_PARTITIONS not in (device.metadata.annotations or {}):
            model = (device.metadata.labels or {}).get(LABEL_GPU_MODEL)
            node.partitions = builtin_partition_table(model, _gpu_minors(device))
        node.honor_partitions = gpu_partition_policy(device.metadata.labels) == GPU_PARTITION_POLICY_HONOR
        node.rdmas = rdmas_of(device)
        node.secondary_well_planned = is_secondary_device_well_planned(device.metadata.labels)
        labels = device.metadata.labels or {}
        node.vendor, node.model = labels.get(LABEL_GPU_VENDOR), labels.get(LABEL_GPU_MODEL)
        self.has_device.add(name)
        self._device_names = None
        self._touch(name)

    def remove_device(self, name: str) -> None:
        self.has_device.discard(name)
        self._device_names = None
        node = self.nodes.get(name)
        if node is not None:
            node.gpus = []
            node.partitions = None
            node.rdmas = []
            self._touch(name)

    def replace_devices(self, devices: Sequence[Device]) -> None:
        present = {d.metadata.name or "" for d in devices}
        for name in [n for n in self.has_device if n not in present]:
            self.remove_device(name)
        for device in devices:
            self.set_device(device)

    # ---- pods ----

    def held(self, uid: str) -> tuple[str, tuple[Allocation, ...]] | None:
        entry = self._held.get(uid)
        return (entry.node, entry.allocations) if entry else None

    def hold(
        self,
        uid: str,
        node: str,
        allocations: Sequence[Allocation],
        *,
        assumed: bool,
        rdma: Sequence[RDMAAllocation] = (),
    ) -> None:
        """``uid`` holds ``allocations`` (and NICs ``rdma``) on ``node`` (replacing what it held
        before)."""
        self.release(uid)
        self._held[uid] = _Held(node, tuple(allocations), assumed, tuple(rdma))
        entry = self.nodes.setdefault(node, NodeGPUs())
        self._touch(node)
        entry.rdma_usage.add(rdma)
        usage = entry.usage
        for a in allocations:
            usage[a.minor] = usage.get(a.minor, GPUUsage()) + a.usage

    def release(self, uid: str) -> None:
        entry = self._held.pop(uid, None)
        if entry is None:
            return
        self._touch(entry.node)
        self.nodes[entry.node].rdma_usage.remove(entry.rdma)
        usage = self.nodes[entry.node].usage
        for a in entry.allocations:
            left = usage.get(a.minor, GPUUsage()) - a.usage
            if left.idle:
                usage.pop(a.minor, None)
            else:
                usage[a.minor] = left

    def usage_without(self, node: str, uids: set[str]) -> dict[int, GPUUsage]:
        """``node``'s usage were the pods ``uids`` gone (victims a preemption is weighing)."""
        usage = dict(self.usage(node))
        for uid in uids:
            entry = self._held.get(uid)
            if entry is None or entry.node != node:
                continue
            for a in entry.allocations:
                usage[a.minor] = usage.get(a.minor, GPUUsage()) - a.usage
        return usage

    def rdma_usage_without(self, node: str, uids: set[str]) -> RDMAUsage:
        """``node``'s NIC usage were the pods ``uids`` gone."""
        usage = self.rdma_usage(node).copy()
        for uid in uids:
            entry = self._held.get(uid)
            if entry is not None and entry.node == node:
                usage.remove(entry.rdma)
        return usage

    def is_assumed(self, uid: str) -> bool:
        entry = self._held.get(uid)
        return entry is not None and entry.assumed

    def holders(self) -> list[str]:
        return list(self._held)

    def _touch(self, name: str) -> None:
        """``name``'s cards or what is held on them changed."""
        self._stale_rows.add(name)
        self._changes.append(name)
        if len(self._changes) > _CHANGES_KEPT_PER_NODE * len(self.nodes) + _CHANGES_KEPT:
            dropped = len(self._changes) // 2
            del self._changes[:dropped]
            self._changes_start += dropped

    @property
    def changes(self) -> int:
        """How many changes of nodes there have been (the position ``changed_since`` takes)."""
        return self._changes_start + len(self._changes)

    def changed_since(self, position: int) -> set[str] | None:
        """The nodes changed after ``changes`` was ``position``; None when that is older than the
        changes kept (the caller looks at every node again)."""
        if position < self._changes_start:
            return None
        return set(self._changes[position - self._changes_start :])

    def cards(self) -> CardTable:
        """Every node's cards and usage as arrays (``card_table``), up to date."""
        table = self._cards
        for name in self._stale_rows:
            entry = self.nodes.get(name) or NodeGPUs()
            table.write(
                name,
                entry.gpus,
                entry.usage,
                device=name in self.has_device,
                partitions=bool(entry.partitions),
            )
        self._stale_rows.clear()
        return table

    def device_names(self) -> frozenset[str]:
        """``has_device`` frozen, kept until a Device comes or goes."""
        if self._device_names is None:
            self._device_names = frozenset(self.has_device)
        return self._device_names

    def usage(self, node: str) -> Mapping[int, GPUUsage]:
        entry = self.nodes.get(node)
        return entry.usage if entry else {}

    def partitions(self, node: str) -> GPUPartitionTable | None:
        entry = self.nodes.get(node)
        return entry.partitions if entry else None

    def honors_partitions(self, node: str) -> bool:
        entry = self.nodes.get(node)
        return entry is not None and entry.honor_partitions

    def vendor_model(self, node: str) -> tuple[str | None, str | None]:
        entry = self.nodes.get(node)
        return (entry.vendor, entry.model) if entry else (None, None)

    def gpus(self, node: str) -> list[GPU]:
        entry = self.nodes.get(node)
        return entry.gpus if entry else []

    def rdmas(self, node: str) -> list[RDMA]:
        entry = self.nodes.get(node)
        return entry.rdmas if entry else []

    def rdma_usage(self, node: str) -> RDMAUsage:
        entry = self.nodes.get(node)
        return entry.rdma_usage if entry else RDMAUsage()

    def secondary_well_planned(self, node: str) -> bool:
        entry = self.nodes.get(node)
        return entry is not None and entry.secondary_well_planned
