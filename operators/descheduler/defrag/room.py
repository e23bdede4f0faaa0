"""What each node has free in the planner's integer units (millicores for cpu, pod slots
included): allocatable less the requests of its live pods and of the Available Reservations."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from apis.core import Node, Pod
from apis.quantity import Quantity
from apis.resources import to_int_units
from apis.scheduling.reservation import Reservation
from operators.descheduler.lownodeload.nodefit import pod_requests_with_slot

__all__ = ["UNLIMITED_PODS", "free_by_node", "live", "units"]

UNLIMITED_PODS = 1_000_000
"""Pod slots of a node that does not say how many pods it takes."""


def units(resources: Mapping[str, Quantity]) -> dict[str, int]:
    return {name: to_int_units(name, q) for name, q in resources.items() if q}


def live(pod: Pod) -> bool:
    """Neither terminating nor terminal."""
    phase = pod.status.phase if pod.status else None
    return pod.metadata.deletion_timestamp is None and phase != "Succeeded" and phase != "Failed"


def free_by_node(
    nodes: Sequence[Node], pods_on: Callable[[str], Sequence[Pod]], reservations: Sequence[Reservation]
) -> dict[str, dict[str, int]]:
    free: dict[str, dict[str, int]] = {}
    for node in nodes:
        name = node.metadata.name or ""
        room = units(node.status.allocatable or {})
        room.setdefault("pods", UNLIMITED_PODS)
        for pod in pods_on(name):
            if live(pod):
                for r, q in units(pod_requests_with_slot(pod)).items():
                    room[r] = room.get(r, 0) - q
        free[name] = room
    for reservation in reservations:
        status = reservation.status
        if status is None or status.phase != "Available" or status.node_name not in free:
            continue
        room = free[status.node_name]
        for r, q in units(status.allocatable or {}).items():
            room[r] = room.get(r, 0) - q
    return free
