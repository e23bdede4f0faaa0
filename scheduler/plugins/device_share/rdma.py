"""RDMA NICs of one node and which of them (and which SR-IOV VF) a pod gets: pure logic.

Koordinator's default device allocation (algorithms 6.2, 6.3 d and 6): a ``koordinator.sh/rdma``
request is a percent of one NIC (a multiple of 100 above 100 asks for that many whole NICs); the
``device-allocate-hint`` may turn it into a count (``RequestsAsCount``: 1 per NIC, 100 with
``exclusivePolicy: DeviceLevel``) or ask for every NIC (``ApplyForAll``), and ``vfSelector`` makes
every chosen NIC give one VF of a matching VF group, the lowest free bus id first. NICs are taken
by device score, then minor; under joint allocation the NICs on the GPUs' PCIe switches come
first, round-robin over those switches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from apis.extension.device import (
    RESOURCE_RDMA,
    DeviceAllocation,
    DeviceAllocations,
    DeviceHint,
    canonical_device_resource,
)
from apis.meta import LabelSelector
from apis.resources import to_int_units
from apis.scheduling.device import Device
from scheduler.plugins.device_share.allocator import ScoringType, percent

__all__ = [
    "ERR_INSUFFICIENT_RDMA",
    "ERR_INSUFFICIENT_VF",
    "RDMA",
    "VF",
    "InvalidRDMARequest",
    "RDMAAllocation",
    "RDMAUsage",
    "Refusal",
    "VFGroup",
    "allocate_rdma",
    "rdma_allocations_of",
    "rdma_entries",
    "rdma_node_score",
    "rdma_quantity",
    "rdmas_of",
    "wanted",
]

_RDMA = "rdma"
ERR_INSUFFICIENT_RDMA = "Insufficient rdma devices"
ERR_INSUFFICIENT_VF = "Insufficient rdma VirtualFunctions"


class Refusal(NamedTuple):
    """Why a node cannot hold the pod's devices (unresolvable: preemption would not help)."""

    reason: str
    unresolvable: bool = False


class InvalidRDMARequest(ValueError):
    """The pod's ``koordinator.sh/rdma`` is above 100 and not a multiple of 100."""


@dataclass(frozen=True, slots=True)
class VF:
    minor: int
    bus_id: str


@dataclass(frozen=True, slots=True)
class VFGroup:
    labels: Mapping[str, str]
    vfs: tuple[VF, ...]


@dataclass(frozen=True, slots=True)
class RDMA:
    """One healthy NIC as the Device object reports it."""

    minor: int
    total: int = 100
    numa: int | None = None
    pcie: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    vf_groups: tuple[VFGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class RDMAAllocation:
    """What one NIC gives the pod."""

    minor: int
    amount: int
    vf: VF | None = None


def rdmas_of(device: Device) -> list[RDMA]:
    """The healthy RDMA NICs of a Device object (an unhealthy one, or one without resources, is
    skipped)."""
    nics: list[RDMA] = []
    for info in (device.spec.devices if device.spec else None) or ():
        if info.type != _RDMA or info.minor is None or not info.health or not info.resources:
            continue
        total = info.resources.get(RESOURCE_RDMA)
        groups = tuple(
            VFGroup(
                dict(group.labels or {}),
                tuple(VF(vf.minor, vf.bus_id) for vf in group.vfs or () if vf.bus_id),
            )
            for group in info.vf_groups or ()
        )
        topology = info.topology
        nics.append(
            RDMA(
                minor=info.minor,
                total=to_int_units(RESOURCE_RDMA, total) if total is not None else 100,
                numa=topology.node_id if topology else None,
                pcie=topology.pcie_id if topology else None,
                labels=dict(info.labels or {}),
                vf_groups=groups,
            )
        )
    return sorted(nics, key=lambda n: n.minor)


def rdma_quantity(requests: Mapping[str, int]) -> int | None:
    """The pod's summed ``koordinator.sh/rdma`` (legacy name included); None: it asks for none."""
    total = sum(v for n, v in requests.items() if canonical_device_resource(n) == RESOURCE_RDMA and v > 0)
    if total <= 0:
        return None
    if total > 100 and total % 100:
        raise InvalidRDMARequest(f"invalid resource unit {RESOURCE_RDMA}: {total}")
    return total


def wanted(quantity: int, hint: DeviceHint | None, nics: Sequence[RDMA]) -> tuple[int, int] | Refusal:
    """(amount per NIC, number of NICs) for ``quantity`` on a node with ``nics`` (Koordinator's
    default device handler)."""
    if not nics:
        return Refusal(ERR_INSUFFICIENT_RDMA, unresolvable=True)
    if quantity > 100 and quantity % 100 == 0:
        return 100, quantity // 100
    if hint is not None and hint.allocate_strategy == "ApplyForAll":
        selector = hint.selector
        count = sum(1 for n in nics if selector is None or selector.matches(n.labels))
        if count == 0:
            return Refusal(ERR_INSUFFICIENT_RDMA, unresolvable=True)
        return quantity, count
    if hint is not None and hint.allocate_strategy == "RequestsAsCount":
        return (100 if hint.exclusive_policy == "DeviceLevel" else 1), quantity
    return quantity, 1


@dataclass(slots=True)
class RDMAUsage:
    """What pods hold on one node's NICs: amounts and VFs (a VF held twice is counted twice, so
    that releasing one holder does not free it)."""

    amounts: dict[int, int] = field(default_factory=dict)
    vfs: dict[int, dict[str, int]] = field(default_factory=dict)

    def add(self, allocations: Iterable[RDMAAllocation], sign: int = 1) -> None:
        for a in allocations:
            left = self.amounts.get(a.minor, 0) + sign * a.amount
            if left:
                self.amounts[a.minor] = left
            else:
                self.amounts.pop(a.minor, None)
            if a.vf is None:
                continue
            held = self.vfs.setdefault(a.minor, {})
            count = held.get(a.vf.bus_id, 0) + sign
            if count > 0:
                held[a.vf.bus_id] = count
            else:
                held.pop(a.vf.bus_id, None)
                if not held:
                    del self.vfs[a.minor]

    def remove(self, allocations: Iterable[RDMAAllocation]) -> None:
        self.add(allocations, -1)

    def copy(self) -> RDMAUsage:
        return RDMAUsage(dict(self.amounts), {m: dict(v) for m, v in self.vfs.items()})

    def free(self, nic: RDMA) -> int:
        return nic.total - self.amounts.get(nic.minor, 0)

    def vf_taken(self, minor: int, bus_id: str) -> bool:
        return self.vfs.get(minor, {}).get(bus_id, 0) > 0


def _free_vf(nic: RDMA, usage: RDMAUsage, selector: LabelSelector) -> VF | None:
    free = [
        vf
        for group in nic.vf_groups
        if selector.matches(group.labels)
        for vf in group.vfs
        if not usage.vf_taken(nic.minor, vf.bus_id)
    ]
    return min(free, key=lambda vf: vf.bus_id) if free else None


def _score(nic: RDMA, usage: RDMAUsage, amount: int, strategy: ScoringType, weight: int) -> int:
    if not weight or not nic.total:
        return 0
    return percent(nic.total - usage.free(nic) + amount, nic.total, strategy)


def rdma_node_score(
    nics: Sequence[RDMA], usage: RDMAUsage, amount: int, strategy: ScoringType, weight: int
) -> int:
    """Koordinator's node score for RDMA: the device formula over the NICs' summed totals and free
    amounts, with the per-NIC amount."""
    total = sum(n.total for n in nics)
    if not weight or not total:
        return 0
    free = sum(usage.free(n) for n in nics)
    return percent(total - free + amount, total, strategy)


def _order(
    nics: Sequence[RDMA],
    usage: RDMAUsage,
    amount: int,
    strategy: ScoringType,
    weight: int,
    preferred_pcies: frozenset[str],
) -> list[RDMA]:
    def key(n: RDMA) -> tuple[int, int]:
        return -_score(n, usage, amount, strategy, weight), n.minor

    ranked = sorted(nics, key=key)
    if not preferred_pcies:
        return ranked
    by_pcie: dict[str, list[RDMA]] = {}
    rest: list[RDMA] = []
    for n in ranked:
        if n.pcie is not None and n.pcie in preferred_pcies:
            by_pcie.setdefault(n.pcie, []).append(n)
        else:
            rest.append(n)
    # Round-robin: the best NIC of every preferred switch, then the second of each, and so on, so
    # that every switch the GPUs sit on gets a NIC before any gets two.
    rounds: list[RDMA] = []
    depth = max((len(v) for v in by_pcie.values()), default=0)
    for i in range(depth):
        rounds.extend(sorted((v[i] for v in by_pcie.values() if i < len(v)), key=key))
    return rounds + rest


def allocate_rdma(
    nics: Sequence[RDMA],
    usage: RDMAUsage,
    amount: int,
    count: int,
    hint: DeviceHint | None = None,
    strategy: ScoringType = "MostAllocated",
    weight: int = 1,
    preferred_pcies: frozenset[str] = frozenset(),
    at_most: int | None = None,
) -> list[RDMAAllocation] | Refusal:
    """``amount`` on each of at least ``count`` NICs (up to ``at_most``, default ``count``), with a
    VF each when the hint has a ``vfSelector``; a Refusal when the node cannot."""
    vf_selector = hint.vf_selector if hint is not None else None
    if vf_selector is not None and not any(n.vf_groups for n in nics):
        return Refusal(ERR_INSUFFICIENT_VF, unresolvable=True)
    if hint is not None and hint.selector is not None:
        selector = hint.selector
        nics = [n for n in nics if selector.matches(n.labels)]
    limit = max(count, at_most or 0)
    chosen: list[RDMAAllocation] = []
    for nic in _order(nics, usage, amount, strategy, weight, preferred_pcies):
        free = usage.free(nic)
        if free <= 0 or amount > free:
            continue
        vf = None
        if vf_selector is not None:
            vf = _free_vf(nic, usage, vf_selector)
            if vf is None:
                continue
        chosen.append(RDMAAllocation(nic.minor, amount, vf))
        if len(chosen) == limit:
            break
    if len(chosen) < count:
        return Refusal(ERR_INSUFFICIENT_RDMA)
    return chosen


def rdma_entries(allocations: Sequence[RDMAAllocation]) -> list[dict[str, Any]]:
    """Koordinator's ``device-allocated`` rdma entries."""
    entries: list[dict[str, Any]] = []
    for a in allocations:
        entry: dict[str, Any] = {"minor": a.minor, "resources": {RESOURCE_RDMA: str(a.amount)}}
        if a.vf is not None:
            # Koordinator's VirtualFunction fields are omitempty: VF 0 has no "minor".
            vf: dict[str, Any] = {"minor": a.vf.minor} if a.vf.minor else {}
            entry["extension"] = {"vfs": [{**vf, "busID": a.vf.bus_id}]}
        entries.append(entry)
    return entries


def _read(entry: DeviceAllocation) -> list[RDMAAllocation]:
    amount = entry.resources.get(RESOURCE_RDMA)
    value = amount.value() if amount is not None else 0
    vfs = [vf for vf in (entry.extension.vfs if entry.extension else None) or () if vf.bus_id]
    if not vfs:
        return [RDMAAllocation(entry.minor, value)]
    # Several VFs of one NIC in one entry: the amount is held once, each VF once.
    first, *others = vfs
    return [
        RDMAAllocation(entry.minor, value, VF(first.minor or 0, first.bus_id or "")),
        *(RDMAAllocation(entry.minor, 0, VF(vf.minor or 0, vf.bus_id or "")) for vf in others),
    ]


def rdma_allocations_of(allocated: DeviceAllocations) -> list[RDMAAllocation]:
    """The rdma entries of a ``device-allocated`` annotation."""
    return [a for entry in allocated.get(_RDMA, ()) for a in _read(entry)]
