"""Reservation: schedule reservations as reserve pods, and let owner pods use the room they hold.

As Koordinator's Reservation plugin (algorithms.md section 5), on this scheduler's vectorised
framework:

- Informers. A Pending reservation whose template names this profile's scheduler becomes a
  reserve pod in the queue (scheduled first: int32-max priority unless the template sets one).
  A placed one (Available, ``status.nodeName``) is accounted on its node by a stand-in pod
  holding its remaining room. Owner pods (``reservation-allocated``) are followed on the pod
  watch, so the held room shrinks as owners arrive and grows back when they finish.
- Reserve pods: PreFilter pins them to ``template.spec.nodeName``; Filter keeps a Default-policy
  reservation off nodes with Aligned/Restricted ones and the other way round; Bind writes the
  reservation's status (Available, nodeName, allocatable, Scheduled/Ready) instead of binding.
- Other pods: PreFilter finds the placed reservations the pod may use (owners, reservation
  affinity with taints and tolerations, exact match, the pods limit) and restores their room
  for this cycle (the v1.6 AfterPreFilter restore: ``Snapshot.lift_reserved``), so every other
  plugin sees reserved room as free on those nodes. Filter then allows only one reservation's
  room per pod: a node passes when the pod fits its free room plus one matched reservation's
  remaining room, or, without a reservation affinity, its free room alone. A pod is an owner
  only of a reservation that still holds something it asks for; a Restricted reservation gives
  its reserved resources from itself only, and its node takes no such pod from the free room
  beside it. Score prefers the nodes holding the reservation to use (lowest
  ``reservation-order`` first, then most allocated). Reserve allocates the pod from
  the chosen reservation, PreBind writes ``reservation-allocated``.
- ``reservation-ignored`` pods see every reservation's room as free.

This module holds the extension points only: the informers' handlers are in ``handlers/``, the
reservations a pod may use in candidates.py, the one it allocates from in nominator.py, their
score in scoring.py, the reserve pod's own cycle in reserve_pods.py, backfill eviction in
backfill.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from apis.client.backend import PODS, RESERVATIONS, ObjectRef
from apis.client.rbac import PolicyRule
from apis.errors import InvalidAnnotation
from apis.extension.reservation import (
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_ALLOCATED,
    get_exact_match_reservation,
    get_reservation_affinity,
    is_reservation_ignored,
    is_reserve_pod,
)
from apis.meta import unknown_toleration_values
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import (
    RESERVATION_CREDIT,
    RESERVATION_TAKEN,
    RESERVATIONS_MATCHED,
    SCORE_ALWAYS,
    carry_on_binding,
)
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    ClusterEvent,
    Diagnosis,
    FilterResult,
    PostFilterResult,
    PreFilterResult,
)
from scheduler.framework.status import Status
from scheduler.plugins.helper.warnings import ObjectWarnings
from scheduler.plugins.reservation.args import ReservationArgs
from scheduler.plugins.reservation.backfill import evict_backfill
from scheduler.plugins.reservation.candidates import match, usable
from scheduler.plugins.reservation.cycle import (
    ALLOCATED,
    CYCLE,
    RESERVE_POD,
    Cycle,
    credit,
    held,
    takes,
    view,
)
from scheduler.plugins.reservation.handlers.pods import PodHandler
from scheduler.plugins.reservation.handlers.reservations import ReservationHandler
from scheduler.plugins.reservation.nominator import Ask, Nominator
from scheduler.plugins.reservation.reserve_pods import (
    ERR_NODE_NAME,
    ERR_POLICY_CONFLICT,
    bind_reserve_pod,
    filter_reserve_pod,
    pre_filter_reserve_pod,
)
from scheduler.plugins.reservation.scoring import remaining
from scheduler.plugins.reservation.stand_ins import rehold
from scheduler.plugins.reservation.state import ReservationState
from scheduler.plugins.reservation.store import ReservationStore

__all__ = [
    "ERR_AFFINITY",
    "ERR_NODE_NAME",
    "ERR_NO_RESERVATION_FITS",
    "ERR_POLICY_CONFLICT",
    "ERR_RESTRICTED",
    "NAME",
    "RBAC",
    "ReservationPlugin",
    "new",
]

NAME = "Reservation"
RBAC = (
    PolicyRule.watching(RESERVATIONS, why="Reservation: the reservations to schedule and to allocate from."),
    PolicyRule.on(
        RESERVATIONS,
        "get",
        "patch",
        "update",
        subresource="status",
        why="Reservation: a placed reservation's status (Available, nodeName, allocatable, conditions).",
    ),
)

ERR_AFFINITY = "node(s) no reservations match reservation affinity"
ERR_NO_RESERVATION_FITS = "node(s) no reservation(s) to meet the requirements"
ERR_RESTRICTED = "node(s) Restricted reservation(s) cannot hold the pod's reserved resources"


class ReservationPlugin:
    def __init__(self, args: ReservationArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.store = ReservationStore()
        self._warnings = ObjectWarnings(handle.backend)
        self._nominator = Nominator(handle)
        self._on_reservation = ReservationHandler(
            handle, self.store, frozenset(args.ignored_resources)
        ).on_event
        self._on_pod = PodHandler(handle, self.store).on_event
        handle.subscribe(RESERVATIONS, self._on_reservation)
        handle.subscribe(PODS, self._on_pod)

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.ALL

    # ---- PreFilter ---------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        if is_reserve_pod(pod.annotations):
            return pre_filter_reserve_pod(self.store, state, pod)
        try:
            affinity = get_reservation_affinity(pod.annotations)
            exact = get_exact_match_reservation(pod.annotations)
        except InvalidAnnotation as exc:
            return PreFilterResult(Status.unresolvable(str(exc)))
        if affinity is not None and (unknown := unknown_toleration_values(affinity.tolerations)):
            # Koordinator accepts these and such a toleration tolerates nothing: so do we, saying so.
            meta = pod.pod.metadata
            self._warnings.warn(
                ObjectRef(kind="Pod", namespace=meta.namespace, name=meta.name or "", uid=meta.uid),
                f"{ANNOTATION_RESERVATION_AFFINITY}: {'; '.join(unknown)} (it tolerates nothing)",
            )
        if is_reservation_ignored(pod.labels):
            # Koordinator's "matched or ignored": the pod may fill any reservation's unused room.
            snapshot.lift_reserved(held(self.store.placed()))
            return PreFilterResult(Status.skip())
        if affinity is None and not self.store.by_node:
            return PreFilterResult(Status.skip())
        passed_over: list[str] = []
        matched = match(self.store, pod, affinity, exact, snapshot, passed_over)
        if passed_over:
            state.note(
                "reservation(s) the pod's owners match but it may not use: " + ", ".join(sorted(passed_over))
            )
        if matched:
            usable = sorted(f"{r.name} on {r.node}" for states in matched.values() for r in states)
            state.note("reservation(s) the pod may use: " + ", ".join(usable))
        if not matched:
            if affinity is not None:
                return PreFilterResult(Status.unresolvable(ERR_AFFINITY))
            return PreFilterResult(Status.skip())
        snapshot.lift_reserved(held(s for states in matched.values() for s in states))
        state.write(RESERVATION_CREDIT, credit(pod, matched))
        state.write(
            RESERVATIONS_MATCHED,
            {
                snapshot.table.names[row]: tuple(view(r, r.remaining()) for r in states)
                for row, states in matched.items()
            },
        )
        state.write(
            CYCLE,
            Cycle(
                matched=matched,
                required=affinity is not None,
                affinity_name=affinity.name if affinity is not None else None,
            ),
        )
        if affinity is None:
            return PreFilterResult()
        names = frozenset(snapshot.table.names[row] for row in matched)
        return PreFilterResult(node_names=names)

    def restore_for(self, pods: Sequence[PodInfo], snapshot: Snapshot) -> None:
        """``extensions.ReservedRoom``: release the room of every reservation one of ``pods`` may
        use (what their PreFilters would restore), for a plan made or checked outside their cycles."""
        for pod in pods:
            snapshot.lift_reserved(held(usable(self.store, pod, snapshot)))

    # ---- Filter ------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        reserve = state.get(RESERVE_POD)
        if reserve is not None:
            return filter_reserve_pod(self.store, reserve, snapshot, rows)
        cycle = state.get(CYCLE)
        if cycle is None:
            return FilterResult.all_feasible(rows.size)
        feasible = np.ones(rows.size, dtype=np.bool_)
        no_room = np.zeros(rows.size, dtype=np.bool_)
        unmatched = np.zeros(rows.size, dtype=np.bool_)
        restricted = np.zeros(rows.size, dtype=np.bool_)
        ask = Ask.of(pod, snapshot)
        for i, row in enumerate(rows.tolist()):
            states = cycle.matched.get(row)
            if not states:
                if cycle.required:
                    feasible[i], unmatched[i] = False, True
                continue
            if self._nominator.nominate_on(state, cycle, pod, ask, snapshot, row, states) is not None:
                continue
            if any(r.restricted.intersection(ask.resources) for r in states):
                # What the pod asks of a Restricted reservation's resources comes from it alone:
                # never from the node's free room beside it (Koordinator's e2e: the pod fails).
                feasible[i], restricted[i] = False, True
                continue
            held_there = remaining(states, ask.resources)
            if cycle.required or np.any(ask.requests > ask.free(snapshot, row) - held_there):
                feasible[i], no_room[i] = False, True
        if cycle.choice:
            # The nodes holding a reservation the pod would use are scored even when the cycle
            # samples (percentageOfNodesToScore): otherwise most owners of a large cluster would
            # never see their reservation's node.
            state.write(SCORE_ALWAYS, frozenset(cycle.choice))
        return FilterResult(
            feasible=feasible,
            rejections=[
                (ERR_AFFINITY, unmatched),
                (ERR_RESTRICTED, restricted),
                (ERR_NO_RESERVATION_FITS, no_room),
            ],
            unresolvable=unmatched,
        )

    # ---- PostFilter --------------------------------------------------------------------------

    async def post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> PostFilterResult:
        """A reserve pod that fits nowhere evicts lower-priority pods through the profile's
        job-level preemption when ``enablePreemption`` is set (a placed reservation is never a
        victim). An owner that finds its reservation's room filled by ``reservation-ignored``
        pods evicts just enough of them (backfill.py)."""
        if not is_reserve_pod(pod.annotations):
            cycle = state.get(CYCLE)
            if cycle is None:
                return PostFilterResult(Status.unschedulable())
            return await evict_backfill(self.handle, cycle, pod, snapshot, diagnosis)
        if not self.args.enable_preemption:
            return PostFilterResult(Status.unschedulable())
        preemptor = self.handle.profile.preemptor()
        if preemptor is None:
            return PostFilterResult(
                Status.unschedulable("no plugin of this profile can preempt (Coscheduling)")
            )
        return await preemptor.preempt_alone(pod, snapshot, diagnosis)

    # ---- Score -------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status:
        cycle = state.get(CYCLE)
        if cycle is None:
            return Status.skip()
        if state.planning:
            # Scored for a plan (a gang's), without this cycle's Filter: choose on these rows now.
            ask = Ask.of(pod, snapshot)
            for row in rows.tolist():
                states = cycle.matched.get(row)
                if states and row not in cycle.choice:
                    self._nominator.nominate_on(state, cycle, pod, ask, snapshot, row, states)
        return Status.success() if cycle.choice else Status.skip()

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        """The node holding the preferred reservation (lowest positive ``reservation-order``
        among the candidates) scores 100; other nodes with a usable reservation score its
        most-allocated share, at most 99; nodes without one 0."""
        cycle = state.read(CYCLE)
        scores = np.zeros(rows.size, dtype=np.int64)
        orders = [(c.order, row) for row, c in cycle.choice.items() if c.order is not None and c.order > 0]
        best_row = min(orders)[1] if orders else None
        for i, row in enumerate(rows.tolist()):
            choice = cycle.choice.get(row)
            if choice is None:
                continue
            # Below the preferred one, however full: the order decides, not a tie broken at random
            # (reservations of one owner are interchangeable, the order says which goes first).
            share = cycle.scores.get(id(choice), 0)
            scores[i] = MAX_NODE_SCORE if row == best_row else min(MAX_NODE_SCORE - 1, max(1, share))
        return scores

    # ---- Reserve / PreBind / Bind ------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        cycle = state.get(CYCLE)
        if cycle is None:
            return Status.success()
        row = self.handle.snapshot().table.row.get(node)
        choice = cycle.choice.get(row) if row is not None else None
        if choice is None:
            if cycle.required:
                return Status.unschedulable(ERR_NO_RESERVATION_FITS)
            if row in cycle.matched:
                state.note(
                    f"no reservation on {node} had room left for the pod: it took the node's free room"
                )
            return Status.success()
        taken = takes(pod, choice)
        reservation = self.store.add_owner(choice.uid, pod)
        if reservation is None:
            return Status.unschedulable("reservation is not active")
        state.write(RESERVATION_TAKEN, (reservation.uid, taken))
        rehold(self.handle, self.store, reservation)
        state.note(f"allocated from reservation {reservation.name} on {node}")
        state.write(ALLOCATED, reservation)
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if self.store.owner_of.get(pod.uid) is not None:
            rehold(self.handle, self.store, self.store.remove_owner(pod.uid))

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        reservation: ReservationState | None = state.get(ALLOCATED)
        if reservation is None:
            return Status.success()
        value = json.dumps({"name": reservation.name, "uid": reservation.uid}, separators=(",", ":"))
        # Carried by the Binding (one write instead of two): the pod gets its node and its record
        # of the reservation together.
        carry_on_binding(state, {ANNOTATION_RESERVATION_ALLOCATED: value})
        return Status.success()

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        if not is_reserve_pod(pod.annotations):
            return Status.skip()
        reservation = self.store.by_uid.get(pod.uid)
        if reservation is None:
            return Status.error(f"reservation {pod.name} is gone")
        return await bind_reserve_pod(self.handle, reservation, node)


def new(args: ReservationArgs | None, handle: Handle) -> ReservationPlugin:
    return ReservationPlugin(args or ReservationArgs(), handle)
