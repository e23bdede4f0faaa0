"""The reserve pod's own cycle: PreFilter pins it to ``template.spec.nodeName``, Filter keeps a
Default-policy reservation off nodes with Aligned/Restricted ones and the other way round, and
Bind writes the reservation's status (Available, nodeName, allocatable, Scheduled/Ready) instead
of binding a pod."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from apis.client.backend import RESERVATIONS, BackendError
from apis.extension.reservation import ANNOTATION_RESERVATION_NODE
from apis.resources import from_int_units
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import FilterResult, PreFilterResult
from scheduler.framework.status import Status
from scheduler.plugins.reservation.cycle import DEFAULT_POLICY, RESERVE_POD, ReservePodCycle
from scheduler.plugins.reservation.state import ReservationState
from scheduler.plugins.reservation.store import ReservationStore

__all__ = [
    "ERR_NODE_NAME",
    "ERR_POLICY_CONFLICT",
    "bind_reserve_pod",
    "filter_reserve_pod",
    "pre_filter_reserve_pod",
]

ERR_NODE_NAME = "node(s) didn't match the nodeName specified by reservation"
ERR_POLICY_CONFLICT = "node(s) reservation allocate policy conflict"


def pre_filter_reserve_pod(store: ReservationStore, state: CycleState, pod: PodInfo) -> PreFilterResult:
    reservation = store.by_uid.get(pod.uid)
    if reservation is None:
        return PreFilterResult(Status.unresolvable("reservation is not active"))
    if reservation.error is not None:
        return PreFilterResult(Status.unresolvable(reservation.error))
    pin = pod.annotations.get(ANNOTATION_RESERVATION_NODE) or None
    state.write(RESERVE_POD, ReservePodCycle(pin, reservation.policy))
    return PreFilterResult(node_names=frozenset((pin,)) if pin else None)


def filter_reserve_pod(
    store: ReservationStore, reserve: ReservePodCycle, snapshot: Snapshot, rows: IntArray
) -> FilterResult:
    feasible = np.ones(rows.size, dtype=np.bool_)
    wrong_node = np.zeros(rows.size, dtype=np.bool_)
    conflict = np.zeros(rows.size, dtype=np.bool_)
    names = snapshot.table.names
    for i, row in enumerate(rows.tolist()):
        node = names[row]
        if reserve.pin is not None and node != reserve.pin:
            feasible[i], wrong_node[i] = False, True
            continue
        for other in store.by_node.get(node, {}).values():
            if (reserve.policy == DEFAULT_POLICY or other.policy == DEFAULT_POLICY) and (
                other.policy != reserve.policy
            ):
                feasible[i], conflict[i] = False, True
                break
    rejected = wrong_node | conflict
    return FilterResult(
        feasible=feasible,
        rejections=[(ERR_NODE_NAME, wrong_node), (ERR_POLICY_CONFLICT, conflict)],
        unresolvable=rejected,
    )


async def bind_reserve_pod(handle: Handle, reservation: ReservationState, node: str) -> Status:
    try:
        await handle.backend.patch_custom(
            RESERVATIONS, None, reservation.name, available_patch(reservation, node), subresource="status"
        )
    except BackendError as exc:
        return Status.error(f"binding reservation {reservation.name} to node {node}: {exc}")
    return Status.success()


def available_patch(reservation: ReservationState, node: str) -> dict[str, Any]:
    """The status of a reservation placed on ``node``."""
    allocatable = {
        name: str(from_int_units(name, amount)) for name, amount in reservation.allocatable.items()
    }
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions: list[dict[str, Any]] = [
        {
            "type": "Scheduled",
            "status": "True",
            "reason": "Scheduled",
            "lastProbeTime": now,
            "lastTransitionTime": now,
        },
        {
            "type": "Ready",
            "status": "True",
            "reason": "Available",
            "lastProbeTime": now,
            "lastTransitionTime": now,
        },
    ]
    return {
        "status": {
            "phase": "Available",
            "nodeName": node,
            "allocatable": allocatable,
            "conditions": conditions,
        }
    }
