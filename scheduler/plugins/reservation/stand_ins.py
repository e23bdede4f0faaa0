"""A placed reservation's room on its node: the stand-in pod the cache accounts for it, held
again whenever its owners change what is left."""

from __future__ import annotations

from scheduler.framework.handle import Handle
from scheduler.plugins.reservation.state import ReservationState
from scheduler.plugins.reservation.store import ReservationStore

__all__ = ["rehold"]


def rehold(handle: Handle, store: ReservationStore, state: ReservationState | None) -> None:
    """Hold ``state``'s remaining room again, if it is still the placed reservation the store knows."""
    if state is not None and state.placed and store.by_uid.get(state.uid) is state:
        handle.stand_ins.hold(state.stand_in())
