"""PostFilter for an owner whose reservation's room ``reservation-ignored`` pods have filled:
the fewest of them (largest first) on one node whose reservation would then hold the owner are
evicted, and the owner is nominated there (Koordinator's backfill eviction)."""

from __future__ import annotations

import numpy as np

from apis.client.eviction import EvictionRequest
from apis.extension.reservation import is_reservation_ignored
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis, PostFilterResult
from scheduler.framework.status import Status
from scheduler.plugins.reservation.cycle import Cycle
from scheduler.plugins.reservation.nominator import Ask
from scheduler.plugins.reservation.scoring import remaining
from scheduler.plugins.reservation.state import ReservationState

__all__ = ["evict_backfill"]


async def evict_backfill(
    handle: Handle, cycle: Cycle, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
) -> PostFilterResult:
    """Nothing is evicted unless evicting makes one reservation hold the owner."""
    table = snapshot.table
    ask = Ask.of(pod, snapshot)
    for row in sorted(cycle.matched):
        node = table.names[row]
        backfill = [
            p
            for p in snapshot.pods_on(node)
            if is_reservation_ignored(p.labels)
            and not snapshot.is_assumed(p.uid)
            and not p.is_terminal()
            and p.pod.metadata.deletion_timestamp is None
        ]
        if not backfill:
            continue
        states = cycle.matched[row]
        free = ask.free(snapshot, row)
        held = remaining(states, ask.resources)
        for reservation in states:
            if cycle.affinity_name and reservation.name != cycle.affinity_name:
                continue
            left = reservation.remaining()
            room = free - held + np.array([left.get(r, 0) for r in ask.resources], dtype=np.int64)
            victims = _fewest(backfill, ask, room)
            if victims is None:
                continue
            await _evict(handle, victims, reservation, pod, node)
            handle.nominator.nominate(pod, node)
            diagnosis.post_filter_message = (
                f"{len(victims)} reservation-ignored pod(s) evicted from reservation {reservation.name} "
                f"on node {node}."
            )
            return PostFilterResult(Status.success(), node)
    return PostFilterResult(Status.unschedulable())


def _fewest(backfill: list[PodInfo], ask: Ask, room: IntArray) -> list[PodInfo] | None:
    """The largest backfill pods first, until the owner fits ``room``; None: it never does."""
    victims: list[PodInfo] = []
    for candidate in sorted(
        backfill, key=lambda p: (-sum(p.requests.get(r, 0) for r in ask.resources), p.key)
    ):
        if not np.any(ask.requests > room):
            break
        victims.append(candidate)
        room = room + np.array([candidate.requests.get(r, 0) for r in ask.resources], dtype=np.int64)
    if np.any(ask.requests > room):
        return None
    return victims


async def _evict(
    handle: Handle, victims: list[PodInfo], reservation: ReservationState, owner: PodInfo, node: str
) -> None:
    for victim in victims:
        await handle.eviction.evict(
            EvictionRequest(
                pod=victim,
                reason="Preempted",
                action="Preempting",
                message=(
                    f"Evicted from the room of reservation {reservation.name} on node {node}: "
                    f"its owner {owner.key} arrived (this pod was placed as reservation-ignored)"
                ),
                node=node,
            )
        )
