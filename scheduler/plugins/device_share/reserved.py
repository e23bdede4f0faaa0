"""Cards held by Reservations (algorithms 6.3 step 2): what each placed reservation holds and what
its owners took from it.

A reservation is scheduled as a reserve pod and gets specific cards, recorded as Koordinator does
in the ``device-allocated`` annotation of the Reservation object. In the store it is one holder
(its uid) holding its *remaining* cards: what it was given less what its owners took on each card,
floored at 0; the owners hold their own allocations as any pod does. So a node's usage is always
"pods + reservations' unused part", other pods never get reserved cards, and an owner sees the
reservation's remaining part as free (``restored_usage``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.plugins.device_share.allocator import Allocation, GPUUsage
from scheduler.plugins.device_share.store import DeviceStore

__all__ = ["RESTRICTED", "ReservedCards", "ReservedDevices"]

RESTRICTED = "Restricted"


@dataclass(frozen=True, slots=True)
class ReservedCards:
    node: str
    allocations: tuple[Allocation, ...]
    policy: str
    assumed: bool
    """Given at this scheduler's Reserve, not yet seen on the Reservation object."""

    @property
    def minors(self) -> frozenset[int]:
        return frozenset(a.minor for a in self.allocations)


def _floor(usage: GPUUsage) -> GPUUsage:
    return GPUUsage(max(0, usage.core), max(0, usage.memory), max(0, usage.ratio))


class ReservedDevices:
    """Reservation uid -> its cards; owner pod uid -> (reservation uid, its allocations)."""

    def __init__(self, store: DeviceStore) -> None:
        self.store = store
        self.reservations: dict[str, ReservedCards] = {}
        self._owners: dict[str, tuple[str, tuple[Allocation, ...]]] = {}

    def on_node(self, node: str) -> set[str]:
        """The reservations holding cards on ``node``."""
        return {uid for uid, cards in self.reservations.items() if cards.node == node}

    def knows(self, uid: str) -> bool:
        return uid in self.reservations

    def get(self, uid: str) -> ReservedCards | None:
        return self.reservations.get(uid)

    def set_reservation(self, uid: str, cards: ReservedCards) -> None:
        self.reservations[uid] = cards
        self._rehold(uid)

    def remove_reservation(self, uid: str) -> None:
        if self.reservations.pop(uid, None) is not None:
            self.store.release(uid)

    def set_owner(self, pod_uid: str, reservation_uid: str, allocations: Sequence[Allocation]) -> None:
        previous = self._owners.get(pod_uid)
        self._owners[pod_uid] = (reservation_uid, tuple(allocations))
        if previous is not None and previous[0] != reservation_uid:
            self._rehold(previous[0])
        self._rehold(reservation_uid)

    def remove_owner(self, pod_uid: str) -> None:
        previous = self._owners.pop(pod_uid, None)
        if previous is not None:
            self._rehold(previous[0])

    def remaining(self, uid: str) -> dict[int, GPUUsage]:
        """Minor -> what the reservation still holds on that card for owners to come."""
        cards = self.reservations.get(uid)
        if cards is None:
            return {}
        left = {a.minor: a.usage for a in cards.allocations}
        for reservation_uid, allocations in self._owners.values():
            if reservation_uid != uid:
                continue
            for a in allocations:
                if a.minor in left:
                    left[a.minor] = _floor(left[a.minor] - a.usage)
        return {minor: usage for minor, usage in left.items() if not usage.idle}

    def restored_usage(self, node: str, uid: str) -> dict[int, GPUUsage]:
        """``node``'s usage with the reservation's remaining cards free (for one of its owners)."""
        usage = dict(self.store.usage(node))
        cards = self.reservations.get(uid)
        if cards is None or cards.node != node:
            return usage
        for minor, held in self.remaining(uid).items():
            usage[minor] = _floor(usage.get(minor, GPUUsage()) - held)
        return usage

    def restricted_usage(
        self, uid: str, capacity: Mapping[int, GPUUsage]
    ) -> tuple[frozenset[int], dict[int, GPUUsage]]:
        """For a Restricted owner: the reservation's cards, each with everything but the
        reservation's remaining part counted as used (so no more than that part can be given)."""
        remaining = self.remaining(uid)
        usage = {minor: _floor(total - remaining.get(minor, GPUUsage())) for minor, total in capacity.items()}
        return frozenset(remaining), usage

    def _rehold(self, uid: str) -> None:
        cards = self.reservations.get(uid)
        if cards is None:
            return
        remaining = self.remaining(uid)
        self.store.hold(
            uid,
            cards.node,
            [Allocation(minor, usage) for minor, usage in sorted(remaining.items())],
            assumed=cards.assumed,
        )
