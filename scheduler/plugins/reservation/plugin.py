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
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension import gang as gang_ext
from apis.extension.reservation import (
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_ALLOCATED,
    ANNOTATION_RESERVATION_NODE,
    ExactMatchReservationSpec,
    ReservationAffinity,
    get_exact_match_reservation,
    get_reservation_affinity,
    get_reservation_allocated,
    is_reservation_ignored,
    is_reserve_pod,
)
from apis.meta import unknown_toleration_values
from apis.resources import from_int_units
from apis.scheduling.reservation import Reservation
from scheduler.backend.base import PODS, RESERVATIONS, BackendError, EventType, ObjectRef, WatchEvent
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.eviction import EvictionRequest
from scheduler.framework.extensions import (
    BIND_ANNOTATIONS,
    RESERVATION_CREDIT,
    RESERVATION_NOMINATED,
    RESERVATION_TAKEN,
    RESERVATIONS_MATCHED,
    SCORE_ALWAYS,
    ReservationView,
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
from scheduler.framework.rbac import PolicyRule
from scheduler.framework.status import Status
from scheduler.plugins.helper.reservation import PODS as PODS_RESOURCE
from scheduler.plugins.helper.warnings import ObjectWarnings
from scheduler.plugins.reservation.args import ReservationArgs
from scheduler.plugins.reservation.matching import affinity_admits, exact_match
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

log = logging.getLogger(__name__)

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
ERR_NODE_NAME = "node(s) didn't match the nodeName specified by reservation"
ERR_POLICY_CONFLICT = "node(s) reservation allocate policy conflict"
ERR_NO_RESERVATION_FITS = "node(s) no reservation(s) to meet the requirements"
ERR_RESTRICTED = "node(s) Restricted reservation(s) cannot hold the pod's reserved resources"

_DEFAULT_POLICY = ""


@dataclass(slots=True)
class _Cycle:
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
class _ReservePodCycle:
    pin: str | None
    policy: str


_CYCLE = StateKey[_Cycle]("Reservation/cycle")
_RESERVE_POD = StateKey[_ReservePodCycle]("Reservation/reservePod")
_ALLOCATED = StateKey[ReservationState]("Reservation/allocated")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ReservationPlugin:
    def __init__(self, args: ReservationArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.store = ReservationStore()
        self._warnings = ObjectWarnings(handle.backend)
        self._ignored = frozenset(args.ignored_resources)
        self._queued: dict[str, int | None] = {}
        """Reserve pods queued: uid -> the reservation's ``metadata.generation`` then (a status
        change, such as our own Unschedulable condition, makes no new attempt)."""
        self._announced: set[str] = set()
        """Reserve pods of gang members shown to the pod informers (``_announce``)."""
        handle.subscribe(RESERVATIONS, self._on_reservation)
        handle.subscribe(PODS, self._on_pod)

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.ALL

    # ---- informers ---------------------------------------------------------------------------

    def _on_reservation(self, event: WatchEvent[Reservation]) -> None:
        event.dispatch(self._replace_reservations, self._upsert_reservation, self._delete_reservation)

    def _replace_reservations(self, reservations: Sequence[Reservation]) -> None:
        present = {r.metadata.uid or r.metadata.name or "" for r in reservations}
        for uid in [uid for uid in self.store.by_uid if uid not in present]:
            self._forget(uid)
        for reservation in reservations:
            try:
                self._upsert_reservation(reservation)
            except Exception:
                log.exception("reservation %s could not be handled", reservation.metadata.name)

    def _delete_reservation(self, reservation: Reservation) -> None:
        self._forget(reservation.metadata.uid or reservation.metadata.name or "")

    def _forget(self, uid: str) -> None:
        state = self.store.remove(uid)
        self._queued.pop(uid, None)
        self.handle.stand_ins.release(uid)
        if uid in self._announced:
            self._announced.discard(uid)
            if state is not None and state.pod is not None:
                self.handle.stand_ins.announce(WatchEvent(EventType.DELETED, state.pod.pod))

    def _announce(self, state: ReservationState) -> None:
        """Show the reserve pod to the pod informers (a gang of reservations is a gang), pending
        or, placed, on its node."""
        if state.pod is None:
            return
        pod = state.pod.pod
        if state.node is not None:
            pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": state.node})})
        kind = EventType.MODIFIED if state.uid in self._announced else EventType.ADDED
        self._announced.add(state.uid)
        self.handle.stand_ins.announce(WatchEvent(kind, pod))

    def _upsert_reservation(self, reservation: Reservation) -> None:
        state = ReservationState.of(reservation, self._ignored)
        finished = state.phase in ("Succeeded", "Failed") or reservation.metadata.deletion_timestamp
        if finished:
            self._forget(state.uid)
            return
        self.store.upsert(state)
        if state.placed:
            self._queued.pop(state.uid, None)
            self.handle.stand_ins.hold(state.stand_in())
            if self._is_gang_member(state):
                self._announce(state)
            return
        if state.node is not None or state.pod is None:
            if state.error is not None:
                log.warning("reservation %s cannot be scheduled: %s", state.name, state.error)
            return
        if state.pod.scheduler_name != self.handle.scheduler_name:
            return
        generation = reservation.metadata.generation
        if state.uid in self._queued and self._queued[state.uid] == generation:
            return  # only its status changed: no new attempt
        self._queued[state.uid] = generation
        if self._is_gang_member(state):
            self._announce(state)
        self.handle.stand_ins.enqueue(state.pod)

    @staticmethod
    def _is_gang_member(state: ReservationState) -> bool:
        """The reserve pod carries a gang's labels or annotations (a reservation per member)."""
        if state.pod is None:
            return False
        labels, annotations = state.pod.labels, state.pod.annotations
        return bool(
            labels.get(gang_ext.LABEL_POD_GROUP)
            or labels.get(gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME)
            or annotations.get(gang_ext.ANNOTATION_GANG_NAME)
        )

    def _on_pod(self, event: WatchEvent[Pod]) -> None:
        event.dispatch(self._replace_pods, self._upsert_pod, self._delete_pod)

    def _replace_pods(self, pods: Sequence[Pod]) -> None:
        present = set()
        for pod in pods:
            present.add(pod.metadata.uid or "")
            try:
                self._upsert_pod(pod)
            except Exception:
                log.exception("pod %s/%s could not be handled", pod.metadata.namespace, pod.metadata.name)
        for uid in [uid for uid in self.store.owner_of if uid not in present]:
            self._rehold(self.store.remove_owner(uid))

    def _upsert_pod(self, pod: Pod) -> None:
        annotations = pod.metadata.annotations
        if not annotations or ANNOTATION_RESERVATION_ALLOCATED not in annotations:
            return
        uid = pod.metadata.uid or ""
        if pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp:
            self._rehold(self.store.remove_owner(uid))
            return
        if not pod.spec.node_name:
            return
        try:
            allocated = get_reservation_allocated(annotations)
        except InvalidAnnotation:
            return
        if allocated is None or not allocated.uid:
            return
        if self.store.owner_of.get(uid) == allocated.uid:
            return
        previous = self.store.remove_owner(uid)
        self._rehold(previous)
        self._rehold(self.store.add_owner(allocated.uid, PodInfo.of(pod)))

    def _delete_pod(self, pod: Pod) -> None:
        self._rehold(self.store.remove_owner(pod.metadata.uid or ""))

    def _rehold(self, state: ReservationState | None) -> None:
        if state is not None and state.placed and self.store.by_uid.get(state.uid) is state:
            self.handle.stand_ins.hold(state.stand_in())

    # ---- PreFilter ---------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        if is_reserve_pod(pod.annotations):
            return self._pre_filter_reserve_pod(state, pod)
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
            snapshot.lift_reserved(self._held(self.store.placed()))
            return PreFilterResult(Status.skip())
        if affinity is None and not self.store.by_node:
            return PreFilterResult(Status.skip())
        passed_over: list[str] = []
        matched = self._match(pod, affinity, exact, snapshot, passed_over)
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
        snapshot.lift_reserved(self._held(s for states in matched.values() for s in states))
        state.write(RESERVATION_CREDIT, self._credit(pod, matched))
        state.write(
            RESERVATIONS_MATCHED,
            {
                snapshot.table.names[row]: tuple(_view(r, r.remaining()) for r in states)
                for row, states in matched.items()
            },
        )
        state.write(
            _CYCLE,
            _Cycle(
                matched=matched,
                required=affinity is not None,
                affinity_name=affinity.name if affinity is not None else None,
            ),
        )
        if affinity is None:
            return PreFilterResult()
        names = frozenset(snapshot.table.names[row] for row in matched)
        return PreFilterResult(node_names=names)

    @staticmethod
    def _credit(pod: PodInfo, matched: dict[int, list[ReservationState]]) -> dict[str, int]:
        """Per resource, the most of its request the pod may take from one matched reservation."""
        credit: dict[str, int] = {}
        for states in matched.values():
            for reservation in states:
                for name, amount in reservation.remaining().items():
                    if name in pod.requests and name != PODS_RESOURCE:
                        credit[name] = max(credit.get(name, 0), min(amount, pod.requests[name]))
        return credit

    @staticmethod
    def _held(states: Iterable[ReservationState]) -> Iterator[PodInfo]:
        """The stand-ins of ``states`` to lift (the cache accounts them by the reservation's uid,
        which the reserve pod carries: no copy is made per reservation and cycle)."""
        return (s.pod for s in states if s.pod is not None)

    def restore_for(self, pods: Sequence[PodInfo], snapshot: Snapshot) -> None:
        """``extensions.ReservedRoom``: release the room of every reservation one of ``pods`` may
        use (what their PreFilters would restore), for a plan made or checked outside their cycles."""
        for pod in pods:
            if is_reserve_pod(pod.annotations):
                continue
            try:
                affinity = get_reservation_affinity(pod.annotations)
                exact = get_exact_match_reservation(pod.annotations)
            except InvalidAnnotation:
                continue
            if is_reservation_ignored(pod.labels):
                snapshot.lift_reserved(self._held(self.store.placed()))
                continue
            matched = self._match(pod, affinity, exact, snapshot, [])
            snapshot.lift_reserved(self._held(s for states in matched.values() for s in states))

    def _pre_filter_reserve_pod(self, state: CycleState, pod: PodInfo) -> PreFilterResult:
        reservation = self.store.by_uid.get(pod.uid)
        if reservation is None:
            return PreFilterResult(Status.unresolvable("reservation is not active"))
        if reservation.error is not None:
            return PreFilterResult(Status.unresolvable(reservation.error))
        pin = pod.annotations.get(ANNOTATION_RESERVATION_NODE) or None
        state.write(_RESERVE_POD, _ReservePodCycle(pin, reservation.policy))
        return PreFilterResult(node_names=frozenset((pin,)) if pin else None)

    def _match(
        self,
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
        for reservation in self.store.owned_by(pod):
            node = snapshot.node(reservation.node or "")
            if node is None or node.node is None:
                continue
            why = self._unusable(pod, reservation, wanted, affinity, exact, node.labels)
            if why is not None:
                passed_over.append(f"{reservation.name} ({why})")
                continue
            matched.setdefault(table.row[node.name], []).append(reservation)
        return matched

    @staticmethod
    def _unusable(
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

    # ---- Filter ------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        reserve = state.get(_RESERVE_POD)
        if reserve is not None:
            return self._filter_reserve_pod(reserve, snapshot, rows)
        cycle = state.get(_CYCLE)
        if cycle is None:
            return FilterResult.all_feasible(rows.size)
        feasible = np.ones(rows.size, dtype=np.bool_)
        no_room = np.zeros(rows.size, dtype=np.bool_)
        unmatched = np.zeros(rows.size, dtype=np.bool_)
        restricted = np.zeros(rows.size, dtype=np.bool_)
        resources = sorted(name for name, amount in pod.requests.items() if amount)
        cols = np.array([snapshot.table.column_of(r) for r in resources], dtype=np.int64)
        requests = np.array([pod.requests[r] for r in resources], dtype=np.int64)
        for i, row in enumerate(rows.tolist()):
            states = cycle.matched.get(row)
            if not states:
                if cycle.required:
                    feasible[i], unmatched[i] = False, True
                continue
            free = snapshot.table.free(np.array([row], dtype=np.int64), cols)[0]
            choice = self._choose(state, cycle, pod, resources, requests, free, states)
            if choice is not None:
                cycle.choice[row] = choice
                _nominate(state, snapshot.table.names[row], choice)
                continue
            if any(r.restricted.intersection(resources) for r in states):
                # What the pod asks of a Restricted reservation's resources comes from it alone:
                # never from the node's free room beside it (Koordinator's e2e: the pod fails).
                feasible[i], restricted[i] = False, True
                continue
            held = self._remaining(states, resources)
            if cycle.required or np.any(requests > free - held):
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

    @staticmethod
    def _remaining(states: Sequence[ReservationState], resources: Sequence[str]) -> IntArray:
        total = np.zeros(len(resources), dtype=np.int64)
        for reservation in states:
            remaining = reservation.remaining()
            total += np.array([remaining.get(r, 0) for r in resources], dtype=np.int64)
        return total

    def _choose(
        self,
        state: CycleState,
        cycle: _Cycle,
        pod: PodInfo,
        resources: Sequence[str],
        requests: IntArray,
        free: IntArray,
        states: Sequence[ReservationState],
    ) -> ReservationState | None:
        """The reservation the pod would allocate from on this node (lowest positive order, then
        most allocated), among those whose remaining room, with the node's free room and no other
        reservation's, holds the pod."""
        held = self._remaining(states, resources)
        best: tuple[tuple[int, int, str], ReservationState] | None = None
        for reservation in states:
            if cycle.affinity_name and reservation.name != cycle.affinity_name:
                continue
            remaining = reservation.remaining()
            own = np.array([remaining.get(r, 0) for r in resources], dtype=np.int64)
            if np.any(requests > free - held + own):
                continue
            if not cycle.required and not any(
                remaining.get(name, 0)
                for name, amount in pod.requests.items()
                if amount and name != PODS_RESOURCE
            ):
                # Its first owners filled it: it gives this pod nothing, so the pod is no owner of
                # it (Koordinator's e2e: a 50%-GPU reservation gets exactly one 50% owner).
                continue
            if any(pod.requests.get(name, 0) > remaining.get(name, 0) for name in reservation.restricted):
                continue
            refused = self._refused(state, pod, reservation, remaining)
            if refused is not None:
                state.note(f"reservation {reservation.name} on {reservation.node}: {refused}")
                continue
            score = self._most_allocated(reservation, pod)
            order = reservation.order if reservation.order and reservation.order > 0 else 2**63 - 1
            key = (order, -score, reservation.name)
            if best is None or key < best[0]:
                best = (key, reservation)
        if best is None:
            return None
        cycle.scores[id(best[1])] = self._most_allocated(best[1], pod)
        return best[1]

    def _refused(
        self, state: CycleState, pod: PodInfo, reservation: ReservationState, remaining: dict[str, int]
    ) -> str | None:
        """Why a plugin of the profile refuses the pod this reservation (None: none does)."""
        filters = self.handle.profile.reservation_filters()
        if not filters:
            return None
        view = _view(reservation, remaining)
        for plugin in filters:
            status = plugin.filter_reservation(state, pod, view)
            if not status.ok:
                return f"{plugin.name}: {status.message()}"
        return None

    @staticmethod
    def _most_allocated(reservation: ReservationState, pod: PodInfo) -> int:
        """Koordinator's reservation score: mean over the reserved resources of the share the
        owners and this pod would use, 0..100."""
        allocated = reservation.allocated()
        # A resource the pod would overflow scores 0, as in Koordinator's ScoreReservation: of
        # interchangeable reservations the pod fills one it fits in, not one already full.
        used = {
            name: allocated.get(name, 0) + pod.requests.get(name, 0)
            for name, amount in reservation.allocatable.items()
            if amount > 0 and name != PODS_RESOURCE
        }
        shares = [
            MAX_NODE_SCORE * used[name] // amount if used[name] <= amount else 0
            for name, amount in reservation.allocatable.items()
            if name in used
        ]
        return sum(shares) // len(shares) if shares else 0

    def _filter_reserve_pod(
        self, reserve: _ReservePodCycle, snapshot: Snapshot, rows: IntArray
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
            for other in self.store.by_node.get(node, {}).values():
                if (reserve.policy == _DEFAULT_POLICY or other.policy == _DEFAULT_POLICY) and (
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

    # ---- PostFilter --------------------------------------------------------------------------

    async def post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> PostFilterResult:
        """A reserve pod that fits nowhere evicts lower-priority pods through the profile's
        job-level preemption when ``enablePreemption`` is set (a placed reservation is never a
        victim). An owner that finds its reservation's room filled by ``reservation-ignored``
        pods evicts just enough of them (``_evict_backfill``)."""
        if not is_reserve_pod(pod.annotations):
            cycle = state.get(_CYCLE)
            if cycle is None:
                return PostFilterResult(Status.unschedulable())
            return await self._evict_backfill(cycle, pod, snapshot, diagnosis)
        if not self.args.enable_preemption:
            return PostFilterResult(Status.unschedulable())
        preemptor = self.handle.profile.preemptor()
        if preemptor is None:
            return PostFilterResult(
                Status.unschedulable("no plugin of this profile can preempt (Coscheduling)")
            )
        return await preemptor.preempt_alone(pod, snapshot, diagnosis)

    async def _evict_backfill(
        self, cycle: _Cycle, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> PostFilterResult:
        """Backfill pods (``reservation-ignored``) may use a reservation's room only until an owner
        comes: then the fewest of them (largest first) on one node whose reservation would hold
        the owner are evicted and the owner is nominated there. Nothing is evicted otherwise."""
        table = snapshot.table
        resources = sorted(name for name, amount in pod.requests.items() if amount)
        cols = np.array([table.column_of(r) for r in resources], dtype=np.int64)
        requests = np.array([pod.requests[r] for r in resources], dtype=np.int64)
        for row in sorted(cycle.matched):
            node = table.names[row]
            backfill = [
                p
                for p in snapshot.pods_on(node)
                if is_reservation_ignored(p.labels)
                and not snapshot.is_assumed(p.uid)
                and not p.is_terminal()
                and p.pod.metadata.deletion_timestamp is None
            ]
            if not backfill:
                continue
            states = cycle.matched[row]
            free = table.free(np.array([row], dtype=np.int64), cols)[0]
            held = self._remaining(states, resources)
            for reservation in states:
                if cycle.affinity_name and reservation.name != cycle.affinity_name:
                    continue
                remaining = reservation.remaining()
                room = free - held + np.array([remaining.get(r, 0) for r in resources], dtype=np.int64)
                victims: list[PodInfo] = []
                for candidate in sorted(
                    backfill, key=lambda p: (-sum(p.requests.get(r, 0) for r in resources), p.key)
                ):
                    if not np.any(requests > room):
                        break
                    victims.append(candidate)
                    room = room + np.array([candidate.requests.get(r, 0) for r in resources], dtype=np.int64)
                if np.any(requests > room):
                    continue
                for victim in victims:
                    await self.handle.eviction.evict(
                        EvictionRequest(
                            pod=victim,
                            reason="Preempted",
                            action="Preempting",
                            message=(
                                f"Evicted from the room of reservation {reservation.name} on node {node}: "
                                f"its owner {pod.key} arrived (this pod was placed as reservation-ignored)"
                            ),
                            node=node,
                        )
                    )
                self.handle.nominator.nominate(pod, node)
                diagnosis.post_filter_message = (
                    f"{len(victims)} reservation-ignored pod(s) evicted from reservation {reservation.name} "
                    f"on node {node}."
                )
                return PostFilterResult(Status.success(), node)
        return PostFilterResult(Status.unschedulable())

    # ---- Score -------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status:
        cycle = state.get(_CYCLE)
        if cycle is None:
            return Status.skip()
        if state.planning:
            # Scored for a plan (a gang's), without this cycle's Filter: choose on these rows now.
            resources = sorted(name for name, amount in pod.requests.items() if amount)
            cols = np.array([snapshot.table.column_of(r) for r in resources], dtype=np.int64)
            requests = np.array([pod.requests[r] for r in resources], dtype=np.int64)
            for row in rows.tolist():
                states = cycle.matched.get(row)
                if states and row not in cycle.choice:
                    free = snapshot.table.free(np.array([row], dtype=np.int64), cols)[0]
                    choice = self._choose(state, cycle, pod, resources, requests, free, states)
                    if choice is not None:
                        cycle.choice[row] = choice
                        _nominate(state, snapshot.table.names[row], choice)
        return Status.success() if cycle.choice else Status.skip()

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        """The node holding the preferred reservation (lowest positive ``reservation-order``
        among the candidates) scores 100; other nodes with a usable reservation score its
        most-allocated share, at most 99; nodes without one 0."""
        cycle = state.read(_CYCLE)
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
        cycle = state.get(_CYCLE)
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
        remaining = choice.remaining()
        taken = {
            name: min(amount, remaining.get(name, 0))
            for name, amount in pod.requests.items()
            if name != PODS_RESOURCE and remaining.get(name, 0) > 0
        }
        reservation = self.store.add_owner(choice.uid, pod)
        if reservation is None:
            return Status.unschedulable("reservation is not active")
        state.write(RESERVATION_TAKEN, (reservation.uid, taken))
        self._rehold(reservation)
        state.note(f"allocated from reservation {reservation.name} on {node}")
        state.write(_ALLOCATED, reservation)
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if self.store.owner_of.get(pod.uid) is not None:
            self._rehold(self.store.remove_owner(pod.uid))

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        reservation = state.get(_ALLOCATED)
        if reservation is None:
            return Status.success()
        value = json.dumps({"name": reservation.name, "uid": reservation.uid}, separators=(",", ":"))
        # Carried by the Binding (one write instead of two): the pod gets its node and its record
        # of the reservation together.
        annotations = state.get(BIND_ANNOTATIONS) or {}
        annotations[ANNOTATION_RESERVATION_ALLOCATED] = value
        state.write(BIND_ANNOTATIONS, annotations)
        return Status.success()

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        if not is_reserve_pod(pod.annotations):
            return Status.skip()
        reservation = self.store.by_uid.get(pod.uid)
        if reservation is None:
            return Status.error(f"reservation {pod.name} is gone")
        allocatable = {
            name: str(from_int_units(name, amount)) for name, amount in reservation.allocatable.items()
        }
        now = _now()
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
        patch = {
            "status": {
                "phase": "Available",
                "nodeName": node,
                "allocatable": allocatable,
                "conditions": conditions,
            }
        }
        try:
            await self.handle.backend.patch_custom(
                RESERVATIONS, None, reservation.name, patch, subresource="status"
            )
        except BackendError as exc:
            return Status.error(f"binding reservation {reservation.name} to node {node}: {exc}")
        return Status.success()


def _view(reservation: ReservationState, remaining: dict[str, int]) -> ReservationView:
    return ReservationView(
        name=reservation.name,
        uid=reservation.uid,
        node=reservation.node or "",
        labels=reservation.labels,
        allocatable=reservation.allocatable,
        remaining=remaining,
        policy=reservation.policy,
    )


def _nominate(state: CycleState, node: str, reservation: ReservationState) -> None:
    """``interfaces.RESERVATION_NOMINATED``: what a Reserve running before ours allocates from."""
    nominated = state.get(RESERVATION_NOMINATED)
    if nominated is None:
        nominated = {}
        state.write(RESERVATION_NOMINATED, nominated)
    nominated[node] = reservation.uid


def new(args: ReservationArgs | None, handle: Handle) -> ReservationPlugin:
    return ReservationPlugin(args or ReservationArgs(), handle)
