"""Koordinator's reservation score (``reservation/scoring.go``) and the room reservations hold."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.interfaces import MAX_NODE_SCORE
from scheduler.plugins.helper.reservation import PODS as PODS_RESOURCE
from scheduler.plugins.reservation.state import ReservationState

__all__ = ["most_allocated", "remaining"]


def remaining(states: Sequence[ReservationState], resources: Sequence[str]) -> IntArray:
    """What ``states`` hold together of ``resources`` that their owners have not taken."""
    total = np.zeros(len(resources), dtype=np.int64)
    for reservation in states:
        left = reservation.remaining()
        total += np.array([left.get(r, 0) for r in resources], dtype=np.int64)
    return total


def most_allocated(reservation: ReservationState, pod: PodInfo) -> int:
    """The mean over the reserved resources of the share the owners and this pod would use, 0..100."""
    allocated = reservation.allocated()
    # A resource the pod would overflow scores 0, as in Koordinator's ScoreReservation: of
    # interchangeable reservations the pod fills one it fits in, not one already full.
    used = {
        name: allocated.get(name, 0) + pod.requests.get(name, 0)
        for name, amount in reservation.allocatable.items()
        if amount > 0 and name != PODS_RESOURCE
    }
    shares = [
        MAX_NODE_SCORE * used[name] // amount if used[name] <= amount else 0
        for name, amount in reservation.allocatable.items()
        if name in used
    ]
    return sum(shares) // len(shares) if shares else 0
