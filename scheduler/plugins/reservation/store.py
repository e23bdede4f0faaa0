"""Every reservation the scheduler knows, by uid and by node, and an index from what a pod is
(its uid, name, controllers, labels) to the placed reservations whose owners may name it.

Matching a pod against 1,000 reservations one by one would cost every cycle; the index anchors
each owner item on one thing the pod must have (``object.uid``, ``object.name``,
``controller.uid``, or one ``matchLabels`` pair) so a pod only checks the few reservations it
could match. Owner items without an anchor (an empty item, expressions only) are checked for
every pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from apis.extension.reservation import ReservationOwner
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.reservation.matching import owners_match
from scheduler.plugins.reservation.state import ReservationState

__all__ = ["ReservationStore"]

_Anchor = tuple[str, ...]


def _anchor(owner: ReservationOwner) -> _Anchor | None:
    if owner.object is not None and owner.object.uid:
        return ("uid", owner.object.uid)
    if owner.object is not None and owner.object.name:
        return ("name", owner.object.namespace or "", owner.object.name)
    if owner.controller is not None and owner.controller.uid:
        return ("controller", owner.controller.uid)
    selector = owner.label_selector
    if selector is not None and selector.match_labels:
        key, value = min(selector.match_labels.items())
        return ("label", key, value)
    return None


def _pod_anchors(pod: PodInfo) -> Iterator[_Anchor]:
    meta = pod.pod.metadata
    if meta.uid:
        yield ("uid", meta.uid)
    if meta.name:
        yield ("name", pod.namespace, meta.name)
        yield ("name", "", meta.name)
    for ref in meta.owner_references or ():
        if ref.uid:
            yield ("controller", ref.uid)
    for item in pod.labels.items():
        yield ("label", *item)


class ReservationStore:
    def __init__(self) -> None:
        self.by_uid: dict[str, ReservationState] = {}
        self.by_node: dict[str, dict[str, ReservationState]] = {}
        self.owner_of: dict[str, str] = {}
        """Owner pod uid -> the uid of the reservation it allocated from."""
        self._anchored: dict[_Anchor, set[str]] = {}
        self._unanchored: set[str] = set()
        self._early_owners: dict[str, dict[str, PodInfo]] = {}
        """Reservation uid -> owners seen before the reservation itself (a restart lists pods and
        reservations in either order): attached when it arrives."""

    def __len__(self) -> int:
        return len(self.by_uid)

    def placed(self) -> Iterable[ReservationState]:
        for states in self.by_node.values():
            yield from states.values()

    # ---- changes -----------------------------------------------------------------------------

    def upsert(self, state: ReservationState) -> ReservationState:
        """Keep ``state`` (replacing an older version, whose owners it inherits)."""
        old = self.remove(state.uid)
        if old is not None:
            state.owner_requests = old.owner_requests
        for pod in self._early_owners.pop(state.uid, {}).values():
            state.owner_requests[pod.uid] = state.taken_by(pod.requests)
        self.by_uid[state.uid] = state
        if state.placed and state.node is not None:
            self.by_node.setdefault(state.node, {})[state.uid] = state
        self._index(state)
        return state

    def remove(self, uid: str) -> ReservationState | None:
        state = self.by_uid.pop(uid, None)
        if state is None:
            return None
        if state.node is not None:
            on_node = self.by_node.get(state.node)
            if on_node is not None:
                on_node.pop(uid, None)
                if not on_node:
                    del self.by_node[state.node]
        self._unindex(state)
        return state

    def add_owner(self, reservation_uid: str, pod: PodInfo) -> ReservationState | None:
        """Record that ``pod`` allocates from the reservation (moving it from any other)."""
        previous = self.remove_owner(pod.uid)
        self.owner_of[pod.uid] = reservation_uid
        state = self.by_uid.get(reservation_uid)
        if state is None:
            self._early_owners.setdefault(reservation_uid, {})[pod.uid] = pod
            return previous
        state.owner_requests[pod.uid] = state.taken_by(pod.requests)
        return state

    def remove_owner(self, pod_uid: str) -> ReservationState | None:
        uid = self.owner_of.pop(pod_uid, None)
        if uid is not None and uid in self._early_owners:
            self._early_owners[uid].pop(pod_uid, None)
            if not self._early_owners[uid]:
                del self._early_owners[uid]
        state = self.by_uid.get(uid) if uid is not None else None
        if state is not None:
            state.owner_requests.pop(pod_uid, None)
        return state

    def _index(self, state: ReservationState) -> None:
        for owner in state.owners:
            anchor = _anchor(owner)
            if anchor is None:
                self._unanchored.add(state.uid)
            else:
                self._anchored.setdefault(anchor, set()).add(state.uid)

    def _unindex(self, state: ReservationState) -> None:
        self._unanchored.discard(state.uid)
        for owner in state.owners:
            anchor = _anchor(owner)
            if anchor is not None:
                uids = self._anchored.get(anchor)
                if uids is not None:
                    uids.discard(state.uid)
                    if not uids:
                        del self._anchored[anchor]

    # ---- reads -------------------------------------------------------------------------------

    def owned_by(self, pod: PodInfo) -> list[ReservationState]:
        """The placed, usable reservations whose owners match ``pod``."""
        uids = set(self._unanchored)
        for anchor in _pod_anchors(pod):
            found = self._anchored.get(anchor)
            if found:
                uids |= found
        matched = []
        for uid in uids:
            state = self.by_uid.get(uid)
            if state is not None and state.matchable and owners_match(state.owners, pod):
                matched.append(state)
        return matched
