"""A reservation charges its quota from its creation, so its owners are charged only for what it
does not hold for them: PreFilter admits an owner for its request less the credit of the
reservations it may use, and Reserve shrinks the reservation's charge by what the owner took from
it (Unreserve puts the charge back)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import RESERVATION_TAKEN
from scheduler.plugins.elastic_quota.ledger import Ledger

__all__ = ["credited", "restore_reservation_charge", "shrink_reservation_charge"]

_SHRUNK = StateKey[PodInfo]("ElasticQuota/reservationShrunk")
"""The reservation's charge before an owner took room from it at Reserve (Unreserve restores it)."""


def credited(pod: PodInfo, credit: Mapping[str, int] | None) -> PodInfo:
    """``pod`` asking its quota only for what no reservation it may use already charges
    (``extensions.RESERVATION_CREDIT``)."""
    if not credit:
        return pod
    requests = {k: v - credit.get(k, 0) for k, v in pod.requests.items()}
    return dataclasses.replace(pod, requests={k: v for k, v in requests.items() if v > 0})


def shrink_reservation_charge(state: CycleState, ledger: Ledger) -> bool:
    """Whether the pod took room from a reservation (``extensions.RESERVATION_TAKEN``): that
    reservation's charge then shrinks by what it took."""
    taken = state.get(RESERVATION_TAKEN)
    if taken is None:
        return False
    uid, amounts = taken
    charge = ledger.charge(uid)
    if charge is not None:
        requests = {k: max(0, v - amounts.get(k, 0)) for k, v in charge.pod.requests.items()}
        before = ledger.replace_requests(uid, requests)
        if before is not None:
            state.write(_SHRUNK, before)
    return True


def restore_reservation_charge(state: CycleState, ledger: Ledger) -> None:
    shrunk = state.get(_SHRUNK)
    if shrunk is not None:
        ledger.restore(shrunk)
