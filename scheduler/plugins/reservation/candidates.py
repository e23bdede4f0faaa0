"""The placed reservations a pod may use on each node: those its owners match, less those its
reservation affinity, exact-match spec or their pods limit rule out."""

from __future__ import annotations

from apis.errors import InvalidAnnotation
from apis.extension.reservation import (
    ExactMatchReservationSpec,
    ReservationAffinity,
    get_exact_match_reservation,
    get_reservation_affinity,
    is_reservation_ignored,
    is_reserve_pod,
)
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.helper.reservation import PODS as PODS_RESOURCE
from scheduler.plugins.reservation.matching import affinity_admits, exact_match
from scheduler.plugins.reservation.state import ReservationState
from scheduler.plugins.reservation.store import ReservationStore

__all__ = ["match", "unusable", "usable"]


def usable(store: ReservationStore, pod: PodInfo, snapshot: Snapshot) -> list[ReservationState]:
    """Every reservation ``pod`` may use (what its PreFilter would restore), for a plan made or
    checked outside its cycle: none for a reserve pod or malformed annotations, all placed ones
    for a ``reservation-ignored`` pod."""
    if is_reserve_pod(pod.annotations):
        return []
    try:
        affinity = get_reservation_affinity(pod.annotations)
        exact = get_exact_match_reservation(pod.annotations)
    except InvalidAnnotation:
        return []
    if is_reservation_ignored(pod.labels):
        return list(store.placed())
    matched = match(store, pod, affinity, exact, snapshot, [])
    return [s for states in matched.values() for s in states]


def match(
    store: ReservationStore,
    pod: PodInfo,
    affinity: ReservationAffinity | None,
    exact: ExactMatchReservationSpec | None,
    snapshot: Snapshot,
    passed_over: list[str],
) -> dict[int, list[ReservationState]]:
    """Row -> the reservations on that node the pod may use; ``passed_over`` collects the
    reservations its owners match that it may not use, and why."""
    table = snapshot.table
    wanted = affinity if affinity is not None else ReservationAffinity()
    matched: dict[int, list[ReservationState]] = {}
    for reservation in store.owned_by(pod):
        node = snapshot.node(reservation.node or "")
        if node is None or node.node is None:
            continue
        why = unusable(pod, reservation, wanted, affinity, exact, node.labels)
        if why is not None:
            passed_over.append(f"{reservation.name} ({why})")
            continue
        matched.setdefault(table.row[node.name], []).append(reservation)
    return matched


def unusable(
    pod: PodInfo,
    reservation: ReservationState,
    wanted: ReservationAffinity,
    affinity: ReservationAffinity | None,
    exact: ExactMatchReservationSpec | None,
    node_labels: dict[str, str],
) -> str | None:
    """Why the pod may not use this reservation its owners match (None: it may)."""
    if not affinity_admits(
        wanted,
        name=reservation.name,
        labels=reservation.labels,
        node_labels=node_labels,
        unschedulable=reservation.unschedulable,
        taints=reservation.taints,
    ):
        return "reservation affinity, unschedulable or taints"
    if not exact_match(exact, pod.requests, reservation.allocatable):
        return "exact-match-reservation"
    limit = reservation.allocatable.get(PODS_RESOURCE)
    if limit is not None and len(reservation.owner_requests) + 1 > limit:
        return f"already {len(reservation.owner_requests)} of {limit} pods"
    if affinity is None and not (set(reservation.allocatable) - {PODS_RESOURCE}) & set(pod.requests):
        return "reserves nothing the pod requests"  # using it would only cost a pod slot
    return None
