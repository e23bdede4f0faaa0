"""One Reservation as the scheduler holds it, and its reserve pod (api-reference 1.3).

A Pending reservation is scheduled as a *reserve pod* built from its template. Once placed
(phase Available, ``status.nodeName``) it is accounted on its node by a stand-in pod holding what
the reservation has not yet given to its owners (``remaining``, plus one pod slot), so that
everyone else sees that room as taken; the pods allowed to use it see it restored for their
cycle (``Snapshot.lift_reserved``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from apis.errors import InvalidAnnotation
from apis.extension.reservation import (
    ReservationOwner,
    get_reservation_order,
    get_reservation_restricted_options,
)
from apis.meta import Taint
from apis.scheduling.reservation import Reservation
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.quantity_range import check_list
from scheduler.plugins.helper.reservation import AVAILABLE, PODS, explicit_pods, reserve_pod

__all__ = ["RESTRICTED", "ReservationState"]

RESTRICTED = "Restricted"


@dataclass(eq=False)
class ReservationState:
    """What the scheduler knows of one reservation and the owners allocated from it."""

    reservation: Reservation
    uid: str
    name: str
    phase: str
    node: str | None
    labels: dict[str, str]
    owners: tuple[ReservationOwner, ...]
    allocate_once: bool
    policy: str
    unschedulable: bool
    taints: tuple[Taint, ...]
    order: int | None
    allocatable: dict[str, int]
    """What the reservation holds in all (no ``pods`` unless the template asks for a limit)."""
    pod: PodInfo | None
    """The reserve pod; None when the template is invalid (``error`` says why)."""
    error: str | None = None
    restricted: frozenset[str] = frozenset()
    """Restricted: the reserved resources an owner takes from this reservation only (all of them,
    or those the reservation's ``reservation-restricted-options`` lists, as Koordinator's
    GetReservationRestrictedResources); empty under the other policies."""
    previous_owners: int = 0
    """Owners named in ``status.currentOwners`` (an allocate-once reservation is then used up)."""
    owner_requests: dict[str, dict[str, int]] = field(default_factory=dict)
    """Owner pod uid -> what it takes from the reservation (its requests masked to allocatable)."""

    @classmethod
    def of(cls, reservation: Reservation, ignored: frozenset[str] = frozenset()) -> ReservationState:
        meta = reservation.metadata
        spec = reservation.spec
        status = reservation.status
        error: str | None = None
        pod: PodInfo | None = None
        try:
            pod = reserve_pod(reservation)
        except ValueError as exc:
            error = str(exc)
        order: int | None = None
        try:
            order = get_reservation_order(meta.labels)
        except ValueError as exc:
            error = error or str(exc)
        if status is not None and status.allocatable:
            allocatable = dict(check_list(status.allocatable, "status.allocatable").amounts)
        elif pod is not None:
            allocatable = {k: v for k, v in pod.requests.items() if k != PODS}
            template_spec = ((spec.template if spec else None) or {}).get("spec") or {}
            explicit = explicit_pods(template_spec)
            if explicit:
                allocatable[PODS] = explicit
        else:
            allocatable = {}
        for name in ignored:
            allocatable.pop(name, None)
        if spec is None:
            error = error or "spec is missing"
        policy = (spec.allocate_policy if spec is not None else None) or ""
        restricted: frozenset[str] = frozenset()
        if policy == RESTRICTED:
            reserved = frozenset(name for name in allocatable if name != PODS)
            try:
                listed = get_reservation_restricted_options(meta.annotations).resources or ()
            except InvalidAnnotation as exc:
                error, listed = error or str(exc), ()
            restricted = (reserved & frozenset(listed)) or reserved
        return cls(
            reservation=reservation,
            uid=meta.uid or meta.name or "",
            name=meta.name or "",
            phase=(status.phase if status is not None else None) or "Pending",
            node=(status.node_name if status is not None else None) or None,
            labels=dict(meta.labels or {}),
            owners=tuple(spec.owners) if spec is not None else (),  # type: ignore[arg-type]
            allocate_once=spec.allocate_once if spec is not None else True,
            policy=policy,
            unschedulable=bool(spec.unschedulable) if spec is not None else False,
            taints=tuple(spec.taints or ()) if spec is not None else (),
            order=order,
            allocatable=allocatable,
            pod=pod,
            error=error,
            restricted=restricted,
            previous_owners=len(status.current_owners or ()) if status is not None else 0,
        )

    @property
    def placed(self) -> bool:
        return self.phase == AVAILABLE and self.node is not None and self.pod is not None

    @property
    def used_up(self) -> bool:
        """allocateOnce and an owner already allocated."""
        return self.allocate_once and bool(self.owner_requests or self.previous_owners)

    @property
    def matchable(self) -> bool:
        return self.placed and self.error is None and not self.used_up

    def allocated(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for requests in self.owner_requests.values():
            for name, amount in requests.items():
                total[name] = total.get(name, 0) + amount
        return total

    def remaining(self) -> dict[str, int]:
        """allocatable - allocated, floored at 0 (the room still held for owners)."""
        allocated = self.allocated()
        return {name: max(0, amount - allocated.get(name, 0)) for name, amount in self.allocatable.items()}

    def taken_by(self, requests: dict[str, int]) -> dict[str, int]:
        """What a pod with ``requests`` takes from this reservation: its requests masked to the
        reserved resources (a ``pods`` limit counts one per owner)."""
        taken = {name: requests.get(name, 0) for name in self.allocatable if name != PODS}
        if PODS in self.allocatable:
            taken[PODS] = 1
        return taken

    def stand_in(self) -> PodInfo:
        """The pod accounted on the node for this placed reservation: its remaining room and one
        pod slot, with no labels or host ports (it counts for no pod selector)."""
        assert self.pod is not None
        assert self.node is not None
        remaining = self.remaining()
        requests = {name: amount for name, amount in remaining.items() if amount and name != PODS}
        requests[PODS] = 1
        base = self.pod.pod
        pod = base.model_copy(
            update={
                "metadata": base.metadata.model_copy(update={"labels": None}),
                "spec": base.spec.model_copy(update={"node_name": self.node}),
            }
        )
        return dataclasses.replace(
            self.pod,
            pod=pod,
            requests=requests,
            labels={},
            non_zero=(remaining.get("cpu", 0), remaining.get("memory", 0)),
            host_ports=(),
        )
