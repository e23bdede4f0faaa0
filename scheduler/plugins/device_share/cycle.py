"""What one scheduling cycle knows of the pod's devices: its GPU and RDMA asks, hints and the nodes
they fit, read at PreFilter and kept in the CycleState for the later extension points."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from apis.errors import InvalidAnnotation
from apis.extension.device import (
    GPU_PARTITION_POLICY_HONOR,
    LABEL_GPU_PARTITION_POLICY,
    DeviceHint,
    GPUPartitionSpec,
    get_device_allocate_hints,
    get_device_joint_allocate,
    get_gpu_partition_spec,
)
from apis.extension.reservation import is_reservation_ignored
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import StateKey
from scheduler.framework.status import Status
from scheduler.plugins.device_share.allocator import Allocation
from scheduler.plugins.device_share.host_share import UNBOUNDED
from scheduler.plugins.device_share.joint import joint_types
from scheduler.plugins.device_share.rdma import InvalidRDMARequest, RDMAAllocation, Refusal, rdma_quantity
from scheduler.plugins.device_share.request import GPURequest, InvalidGPURequest, gpu_request
from scheduler.plugins.device_share.store import DeviceStore
from scheduler.plugins.device_share.templates import (
    ERR_NO_MATCHED_TEMPLATE,
    TemplateCache,
    per_card_resources,
    template_key,
)

__all__ = [
    "ALLOCATED",
    "CYCLE",
    "RDMA_ALLOCATED",
    "TEMPLATE",
    "Cycle",
    "RDMAAsk",
    "cycle_of",
    "host_capacity",
    "host_free",
    "host_take",
    "memoizable",
]


@dataclass(slots=True)
class Cycle:
    request: GPURequest | None
    """None: the pod asks for RDMA only."""
    hint: DeviceHint | None
    partition_spec: GPUPartitionSpec | None
    honor_partitions: frozenset[str]
    """Nodes labelled ``gpu-partition-policy: Honor`` (their Device may carry the label instead)."""
    fitting: frozenset[str]
    """Nodes whose cards can hold the request now."""
    with_device: frozenset[str]
    from_reservation: dict[tuple[str, str], bool] = field(default_factory=dict)
    """(node, reservation uid) -> the reservation's cards (with the node's free ones unless it is
    Restricted) hold the request, for the reservations the pod may use."""
    rdma: RDMAAsk | None = None
    refusals: Mapping[str, Refusal] = field(default_factory=dict)
    """Why each node outside ``fitting`` cannot hold the pod's devices."""
    ignore_reserved: bool = False
    """A ``reservation-ignored`` pod: the cards reservations hold for owners to come are free to
    it (an owner that arrives evicts it, Reservation's backfill eviction)."""
    templates: dict[str, list[str]] | None = None
    """``<vendor>-<model>`` -> the shared-resource templates the request equals (None: not enforced)."""
    no_template: frozenset[str] = frozenset()
    """Nodes with a Device whose model has no matching template."""
    fitting_rows: BoolArray | None = None
    """``fitting`` as a mask over the store's card rows (``card_table``), as of ``card_layout``
    (None: not kept, Filter asks by name)."""
    refused_rows: BoolArray | None = None
    """The nodes of ``refusals`` as a mask over the card rows (all refused for want of cards)."""
    card_layout: int = -1


@dataclass(frozen=True, slots=True)
class RDMAAsk:
    quantity: int
    hint: DeviceHint | None
    joint: tuple[str, ...]
    """``device-joint-allocate``'s types taking part, primary first (joint.joint_types)."""
    same_pcie: bool
    secondary: bool
    """RDMA is a secondary type of a whole-GPU joint pod: nodes whose Device says their NICs are
    well planned check it at Reserve only."""


CYCLE = StateKey[Cycle]("DeviceShare/cycle")
ALLOCATED = StateKey[tuple[str, tuple[Allocation, ...]]]("DeviceShare/allocated")
RDMA_ALLOCATED = StateKey[tuple[RDMAAllocation, ...]]("DeviceShare/rdma-allocated")
TEMPLATE = StateKey[str]("DeviceShare/template")


def host_take(pod: PodInfo) -> tuple[int, int]:
    """The cpu (milli) and memory (bytes) ``pod`` asks of its node besides devices."""
    return pod.requests.get("cpu", 0), pod.requests.get("memory", 0)


def host_free(snapshot: Snapshot, rows: IntArray) -> IntArray:
    """(rows, 2): each node's free cpu (milli) and memory (bytes); unbounded where the node does
    not report the resource."""
    table = snapshot.table
    free = np.full((rows.size, 2), UNBOUNDED, dtype=np.int64)
    for i, name in enumerate(("cpu", "memory")):
        col = table.column.get(name)
        if col is not None:
            # ``NodeTable.free`` column by column: gathering the rows of one column at a time is
            # half the cost of taking both columns of every node and then the rows.
            np.subtract(table.allocatable[rows, col], table.requested[rows, col], out=free[:, i])
    return free


def host_capacity(snapshot: Snapshot, rows: IntArray) -> IntArray:
    """(rows, 2): each node's allocatable cpu (milli) and memory (bytes); unbounded where the node
    does not report the resource."""
    table = snapshot.table
    capacity = np.full((rows.size, 2), UNBOUNDED, dtype=np.int64)
    for i, name in enumerate(("cpu", "memory")):
        col = table.column.get(name)
        if col is not None:
            capacity[:, i] = table.allocatable[rows, col]
    return capacity


def memoizable(cycle: Cycle) -> bool:
    """Whether a node's answer for this cycle follows from its cards, their usage and the
    request alone (``node_memo``): not so with a device hint, a partition spec, an RDMA ask, or
    reservations the pod may take cards from."""
    return (
        cycle.request is not None
        and cycle.hint is None
        and cycle.partition_spec is None
        and cycle.rdma is None
        and not cycle.ignore_reserved
    )


def cycle_of(
    pod: PodInfo, snapshot: Snapshot, store: DeviceStore, templates: TemplateCache
) -> Cycle | Status:
    """The pod's request and hints (``fitting`` left empty), or why the plugin skips or refuses it."""
    try:
        request = gpu_request(pod.requests)
    except InvalidGPURequest as exc:
        return Status.unresolvable(f"invalid GPU request: {exc}")
    try:
        rdma = rdma_quantity(pod.requests)
    except InvalidRDMARequest as exc:
        return Status.unresolvable(str(exc))
    if request is None and rdma is None:
        return Status.skip()
    try:
        hints = get_device_allocate_hints(pod.annotations) or {}
        partition_spec = get_gpu_partition_spec(pod.annotations)
        joint = get_device_joint_allocate(pod.annotations)
    except InvalidAnnotation as exc:
        return Status.unresolvable(str(exc))
    honor_rows = snapshot.label_values(LABEL_GPU_PARTITION_POLICY).get(GPU_PARTITION_POLICY_HONOR, set())
    names = snapshot.table.names
    cycle = Cycle(
        request,
        hints.get("gpu"),
        partition_spec,
        frozenset(names[row] for row in honor_rows),
        frozenset(),
        store.device_names(),
    )
    if request is not None:
        per_card = per_card_resources(request)
        if templates.enforced(per_card, not request.whole):
            cycle.templates = templates.matched(per_card)
            if not cycle.templates:
                return Status.unresolvable(ERR_NO_MATCHED_TEMPLATE)
            cycle.no_template = frozenset(
                node
                for node in store.has_device
                if template_key(*store.vendor_model(node)) not in cycle.templates
            )
    cycle.ignore_reserved = is_reservation_ignored(pod.labels)
    if rdma is not None:
        requested = frozenset(t for t, asked in (("gpu", request), ("rdma", rdma)) if asked is not None)
        types = joint_types(joint, requested, hints)
        cycle.rdma = RDMAAsk(
            rdma,
            hints.get("rdma"),
            types,
            joint is not None and joint.required_scope == "SamePCIe",
            bool(types) and types[0] != "rdma" and request is not None and request.whole,
        )
    return cycle
