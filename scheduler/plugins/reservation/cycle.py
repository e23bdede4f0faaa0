"""What one scheduling cycle knows of the reservations a pod may use (PreFilter writes it, the
later extension points read it), and what it tells other plugins through the CycleState."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import RESERVATION_NOMINATED, ReservationView
from scheduler.plugins.helper.reservation import PODS as PODS_RESOURCE
from scheduler.plugins.reservation.state import ReservationState

__all__ = [
    "ALLOCATED",
    "CYCLE",
    "DEFAULT_POLICY",
    "RESERVE_POD",
    "Cycle",
    "ReservePodCycle",
    "credit",
    "held",
    "nominate",
    "takes",
    "view",
]

DEFAULT_POLICY = ""


@dataclass(slots=True)
class Cycle:
    """What PreFilter found for one (non-reserve) pod."""

    matched: dict[int, list[ReservationState]]
    """Row -> the placed reservations on that node the pod may use (their room is restored)."""
    required: bool
    """The pod has a reservation affinity: it must use one of them."""
    affinity_name: str | None
    choice: dict[int, ReservationState] = field(default_factory=dict)
    """Row -> the reservation the pod would allocate from there (set by Filter)."""
    scores: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class ReservePodCycle:
    pin: str | None
    policy: str


CYCLE = StateKey[Cycle]("Reservation/cycle")
RESERVE_POD = StateKey[ReservePodCycle]("Reservation/reservePod")
ALLOCATED = StateKey[ReservationState]("Reservation/allocated")


def credit(pod: PodInfo, matched: dict[int, list[ReservationState]]) -> dict[str, int]:
    """Per resource, the most of its request the pod may take from one matched reservation."""
    most: dict[str, int] = {}
    for states in matched.values():
        for reservation in states:
            for name, amount in reservation.remaining().items():
                if name in pod.requests and name != PODS_RESOURCE:
                    most[name] = max(most.get(name, 0), min(amount, pod.requests[name]))
    return most


def takes(pod: PodInfo, reservation: ReservationState) -> dict[str, int]:
    """What ``pod`` takes from ``reservation`` (``extensions.RESERVATION_TAKEN``)."""
    left = reservation.remaining()
    return {
        name: min(amount, left.get(name, 0))
        for name, amount in pod.requests.items()
        if name != PODS_RESOURCE and left.get(name, 0) > 0
    }


def held(states: Iterable[ReservationState]) -> Iterator[PodInfo]:
    """The stand-ins of ``states`` to lift (the cache accounts them by the reservation's uid,
    which the reserve pod carries: no copy is made per reservation and cycle)."""
    return (s.pod for s in states if s.pod is not None)


def view(reservation: ReservationState, remaining: dict[str, int]) -> ReservationView:
    return ReservationView(
        name=reservation.name,
        uid=reservation.uid,
        node=reservation.node or "",
        labels=reservation.labels,
        allocatable=reservation.allocatable,
        remaining=remaining,
        policy=reservation.policy,
    )


def nominate(state: CycleState, node: str, reservation: ReservationState) -> None:
    """``extensions.RESERVATION_NOMINATED``: what a Reserve running before ours allocates from."""
    nominated = state.get(RESERVATION_NOMINATED)
    if nominated is None:
        nominated = {}
        state.write(RESERVATION_NOMINATED, nominated)
    nominated[node] = reservation.uid
