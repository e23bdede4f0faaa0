"""Which reservation on a node a pod would allocate from (Koordinator's ``reservation/nominator.go``):
the lowest positive ``reservation-order``, then the most allocated, among those whose remaining
room, with the node's free room and no other reservation's, holds the pod and that no plugin of
the profile refuses (``extensions.ReservationFilterPlugin``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.plugins.helper.reservation import PODS as PODS_RESOURCE
from scheduler.plugins.reservation.cycle import Cycle, nominate, view
from scheduler.plugins.reservation.scoring import most_allocated, remaining
from scheduler.plugins.reservation.state import ReservationState

__all__ = ["Ask", "Nominator"]


@dataclass(frozen=True, slots=True)
class Ask:
    """The resources the pod asks for, their node-table columns and amounts."""

    resources: list[str]
    cols: IntArray
    requests: IntArray

    @classmethod
    def of(cls, pod: PodInfo, snapshot: Snapshot) -> Ask:
        resources = sorted(name for name, amount in pod.requests.items() if amount)
        cols = np.array([snapshot.table.column_of(r) for r in resources], dtype=np.int64)
        requests = np.array([pod.requests[r] for r in resources], dtype=np.int64)
        return cls(resources, cols, requests)

    def free(self, snapshot: Snapshot, row: int) -> IntArray:
        """The node's free room of the asked resources."""
        free: IntArray = snapshot.table.free(np.array([row], dtype=np.int64), self.cols)[0]
        return free


class Nominator:
    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def nominate_on(
        self,
        state: CycleState,
        cycle: Cycle,
        pod: PodInfo,
        ask: Ask,
        snapshot: Snapshot,
        row: int,
        states: Sequence[ReservationState],
    ) -> ReservationState | None:
        """Choose on ``row`` and, if a reservation is chosen, record it for the cycle and for
        the plugins whose Reserve runs before ours (``extensions.RESERVATION_NOMINATED``)."""
        choice = self.choose(state, cycle, pod, ask, ask.free(snapshot, row), states)
        if choice is not None:
            cycle.choice[row] = choice
            nominate(state, snapshot.table.names[row], choice)
        return choice

    def choose(
        self,
        state: CycleState,
        cycle: Cycle,
        pod: PodInfo,
        ask: Ask,
        free: IntArray,
        states: Sequence[ReservationState],
    ) -> ReservationState | None:
        """The reservation the pod would allocate from on this node (None: none holds it)."""
        held = remaining(states, ask.resources)
        best: tuple[tuple[int, int, str], ReservationState] | None = None
        for reservation in states:
            if cycle.affinity_name and reservation.name != cycle.affinity_name:
                continue
            left = reservation.remaining()
            own = np.array([left.get(r, 0) for r in ask.resources], dtype=np.int64)
            if np.any(ask.requests > free - held + own):
                continue
            if not cycle.required and not any(
                left.get(name, 0) for name, amount in pod.requests.items() if amount and name != PODS_RESOURCE
            ):
                # Its first owners filled it: it gives this pod nothing, so the pod is no owner of
                # it (Koordinator's e2e: a 50%-GPU reservation gets exactly one 50% owner).
                continue
            if any(pod.requests.get(name, 0) > left.get(name, 0) for name in reservation.restricted):
                continue
            refused = self._refused(state, pod, reservation, left)
            if refused is not None:
                state.note(f"reservation {reservation.name} on {reservation.node}: {refused}")
                continue
            score = most_allocated(reservation, pod)
            order = reservation.order if reservation.order and reservation.order > 0 else 2**63 - 1
            key = (order, -score, reservation.name)
            if best is None or key < best[0]:
                best = (key, reservation)
        if best is None:
            return None
        cycle.scores[id(best[1])] = most_allocated(best[1], pod)
        return best[1]

    def _refused(
        self, state: CycleState, pod: PodInfo, reservation: ReservationState, left: dict[str, int]
    ) -> str | None:
        """Why a plugin of the profile refuses the pod this reservation (None: none does)."""
        filters = self.handle.profile.reservation_filters()
        if not filters:
            return None
        seen = view(reservation, left)
        for plugin in filters:
            status = plugin.filter_reservation(state, pod, seen)
            if not status.ok:
                return f"{plugin.name}: {status.message()}"
        return None
