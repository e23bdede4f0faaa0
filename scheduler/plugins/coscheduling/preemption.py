"""Job-level preemption: evict lower-priority pods only when the whole job fits afterwards.

Run from Coscheduling's PostFilter (``CoschedulingArgs.enablePreemption``) for a gang group, or
for a single pod as a job of one. As algorithms.md section 3, with CP-SAT choosing the victims:

1. Eligibility. The trigger pod's ``preemptionPolicy: Never`` never preempts. While victims of the
   job's last preemption still exist, or a member's nominated node still holds a terminating
   lower-priority pod, the job waits for them instead of preempting again.
2. Victims: running pods (bound, not terminating) of strictly lower priority than the trigger
   pod, without ``scheduling.koordinator.sh/disable-preemptible: "true"`` or
   ``quota.scheduling.koordinator.sh/preemptible: "false"``. A ``PreemptionExtension`` (ElasticQuota)
   may add pods of any priority that it deems reclaimable (a quota claiming its min back from
   quotas that borrowed it); those count against its eviction budget (what their quota borrowed),
   so reclaim never takes more than was lent.
3. The problem: with every eligible victim removed from the cycle's view, each class of pending
   members runs the profile's PreFilter and Filter (so every Filter of the members is honoured);
   the nodes that pass, their free resources before any eviction, their topology paths (MustGather,
   podCountMultiple) and the victims on them go to the solver (`scheduler.solver.select_victims`),
   which minimises the highest victim priority, PodDisruptionBudget violations, victim jobs (a gang
   is one job), the pods of those jobs, and the pods evicted.
4. Execution: each member is nominated (``status.nominatedNodeName``, and its requests held on that
   node in the cache so that other pods do not take what the victims free); each victim gets the
   ``DisruptionTarget`` condition, is evicted through the Eviction API with its own grace period
   (a PodDisruptionBudget that refuses it leaves a delete as kube-scheduler's preemption does) or,
   with soft eviction, is only labelled and annotated for a custom evictor; and gets a
   ``Preempted`` event naming the preemptor. A victim gang left with fewer members bound than
   its minMember goes whole: its other members are evicted too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apis.client.backend import PODS, EventType, WatchEvent
from apis.client.eviction import EvictionRequest
from apis.core import Pod
from apis.extension import preemption as preemption_ext
from apis.extension import quota as quota_ext
from apis.extension.networktopology import NetworkTopologySpec
from apis.extension.reservation import is_reserve_pod
from apis.gcpause import gc_paused
from apis.scheduling.networktopology import ClusterNetworkTopology
from scheduler import solver
from scheduler.background import BackgroundTasks
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.dry_run import Choice
from scheduler.framework.extensions import PreemptionExtension, QuotaRelease
from scheduler.framework.handle import Handle
from scheduler.framework.status import Status
from scheduler.plugins.coscheduling.victim_rooms import require_room
from scheduler.plugins.coscheduling.victims import VictimProblemBuilder
from scheduler.plugins.helper.preemption import PREEMPTION_BY_SCHEDULER, PdbIndex
from scheduler.solver import PreemptionProblem, SolveOptions, VictimSelection

__all__ = ["Choice", "JobPreemption", "Outcome", "VictimFilter"]

log = logging.getLogger(__name__)

VictimFilter = Callable[[PodInfo, PodInfo], bool]
"""(preemptor, candidate victim) -> may the candidate be evicted for it."""

SOFT_EVICTION_LABEL_VALUE = "true"
_ROOM_ROUNDS = 4
"""Selections checked against the plugins' room (GPU sets) before preemption gives up."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the PostFilter answers: a status, the trigger pod's nominated node, and the sentence
    appended to the FailedScheduling message after "preemption:"."""

    status: Status
    message: str
    nominated_node: str | None = None
    holds: bool = False
    """Victims of an earlier preemption are still terminating: keep the job's places."""


@dataclass
class _Record:
    victims: frozenset[str]
    nominated: dict[str, str]
    going: set[str] = field(default_factory=set)
    """The victims not seen deleted yet; when the last goes, the members are activated."""


@dataclass
class JobPreemption:
    handle: Handle
    options: SolveOptions
    soft_eviction: bool = False
    victim_filters: list[VictimFilter] = field(default_factory=list)
    gang_floor: Callable[[PodInfo], int] = lambda pod: 1
    """The members a victim's gang group needs bound to be of any use (the sum of its gangs'
    minMember; 1 for a pod of no gang): a gang broken below it goes whole."""
    _pdbs: PdbIndex = field(init=False)
    _records: dict[str, _Record] = field(default_factory=dict)
    _background: BackgroundTasks = field(default_factory=BackgroundTasks)

    def __post_init__(self) -> None:
        self._pdbs = PdbIndex(self.handle)
        self.handle.subscribe(PODS, self._on_pod_event)

    def _on_pod_event(self, event: WatchEvent[Pod]) -> None:
        """The last victim of a job's preemption is gone: its members go straight to the active
        queue, whatever backoff their cycles while the victims terminated have earned them (as
        kube-scheduler requeues a preemptor without backoff once the deletion freed its room)."""
        if not self._records:
            return
        if event.type is EventType.REPLACED:  # a relist: a victim not listed is gone
            present = {p.metadata.uid for p in event.objects}
            for record in self._records.values():
                self._victims_gone(record, record.going - present)
        elif event.type is EventType.DELETED and event.obj is not None and event.obj.metadata.uid:
            uid = event.obj.metadata.uid
            for record in self._records.values():
                if uid in record.going:
                    self._victims_gone(record, {uid})

    def _victims_gone(self, record: _Record, uids: set[str]) -> None:
        if not uids:
            return
        record.going -= uids
        if not record.going:
            self.handle.activate(set(record.nominated))

    # ---- the decision ------------------------------------------------------------------------

    async def preempt(
        self,
        trigger: PodInfo,
        job: str,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        *,
        topology: ClusterNetworkTopology | None = None,
        spec: NetworkTopologySpec | None = None,
        release: QuotaRelease | None = None,
        admit: PreemptionExtension | None = None,
    ) -> Outcome:
        """Choose victims so that every pending member of ``job`` fits, evict them and nominate the
        members; or explain why not. ``members`` are the job's pending pods (the trigger included).

        When no victims help and no earlier preemption's victims are still going, the members'
        nominations (held room and ``status.nominatedNodeName``) are cleared, as kube-scheduler's
        preemption clears a pod's nominated node when it finds no candidates: a nomination left
        from an earlier preemption (or from before a restart) must not hold room for nothing."""
        outcome = await self._preempt(trigger, job, members, snapshot, topology, spec, release, admit)
        if not outcome.status.ok and not outcome.holds and outcome.nominated_node is None:
            self._clear_nominations(members, snapshot)
        return outcome

    def _clear_nominations(self, members: Sequence[PodInfo], snapshot: Snapshot) -> None:
        for member in members:
            if snapshot.nominated_node(member.uid) is not None:
                self.handle.nominator.clear_nomination(member.uid)
            if member.pod.status.nominated_node_name:
                self._spawn(self._set_nominated(member, None))

    async def _preempt(
        self,
        trigger: PodInfo,
        job: str,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        topology: ClusterNetworkTopology | None,
        spec: NetworkTopologySpec | None,
        release: QuotaRelease | None,
        admit: PreemptionExtension | None,
    ) -> Outcome:
        if trigger.pod.spec.preemption_policy == "Never":
            return Outcome(Status.unresolvable(), "not eligible due to preemptionPolicy=Never.")
        waiting = self._waiting_for_victims(trigger, job, members, snapshot)
        if waiting is not None:
            # Unresolvable ends PostFilter here: DefaultPreemption after it would find victims that
            # are only marked (soft eviction) or evict beside those already going.
            return Outcome(Status.unresolvable(), waiting, snapshot.nominated_node(trigger.uid), holds=True)
        choice = await self.choose(
            trigger, job, members, snapshot, topology=topology, spec=spec, release=release, admit=admit
        )
        if choice.selection is None:
            return Outcome(choice.status, choice.message)
        selection = choice.selection
        if not selection.victims:
            self.handle.activate({m.uid for m in members})
            return Outcome(Status.unschedulable(), choice.message)
        self._execute(trigger, job, members, selection, snapshot)
        return Outcome(
            Status.success(),
            self._summary(job, trigger, selection, snapshot),
            selection.assignment.get(trigger.uid),
        )

    async def choose(
        self,
        trigger: PodInfo,
        job: str,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        *,
        topology: ClusterNetworkTopology | None = None,
        spec: NetworkTopologySpec | None = None,
        release: QuotaRelease | None = None,
        admit: PreemptionExtension | None = None,
        record: bool = True,
        lift_lower: bool = False,
    ) -> Choice:
        """The victims that let every member of ``job`` fit, chosen exactly as ``preempt`` chooses
        them, with nothing evicted, nominated or activated: ``preempt`` executes the choice, a
        what-if only reports it (``record`` False also leaves the solver metrics alone).
        ``lift_lower``: lift the nominations of lower priorities while the problem is built, as
        the cycle does for its pod (a what-if has no cycle; the lift ends before any await)."""
        if trigger.pod.spec.preemption_policy == "Never":
            return Choice(Status.unresolvable(), "not eligible due to preemptionPolicy=Never.")
        if not members:
            return Choice(Status.unschedulable(), "no pending member to place.")

        if release is None:
            candidates = [p for p in snapshot.assigned_pods() if self._eligible(trigger, p, snapshot)]
        else:  # the job's quota rejected it: only its quota's lower-priority pods can free it
            candidates = [
                p
                for p in snapshot.assigned_pods()
                if p.priority < trigger.priority and release.holds(p) and self._eligible(trigger, p, snapshot)
            ]
        admitting = (
            admit.admitting({m.uid for m in members}) if admit is not None else contextlib.nullcontext()
        )
        builder = VictimProblemBuilder(self.handle.profile, self.options, self._budget, self._pdbs.pdbs)
        unlift = (
            snapshot.lift_nominations(lambda n: n.pod.priority < trigger.priority) if lift_lower else None
        )
        try:
            with admitting, gc_paused():  # its temporaries die with it: no collection midway
                problem = builder.build(
                    trigger, job, members, candidates, snapshot, topology=topology, spec=spec, release=release
                )
        finally:
            if unlift is not None:
                unlift()
        if isinstance(problem, str):
            return Choice(Status.unresolvable(), problem, candidates=len(candidates))
        fell_back = False

        def fallback(_: PreemptionProblem) -> None:
            nonlocal fell_back
            fell_back = True

        started = time.perf_counter()
        # The problem is plain frozen data: solve it off the event loop (CP-SAT releases the GIL),
        # so watches and bindings go on meanwhile; what changed by then is re-read in _execute.
        selection = await asyncio.to_thread(solver.select_victims, problem, on_fallback=fallback)
        for _ in range(_ROOM_ROUNDS):  # victims that free counts but not the cards: choose again
            if selection is None:
                break
            again = require_room(problem, selection, members, snapshot, self.handle.profile)
            if again is None:
                break
            problem = again
            selection = await asyncio.to_thread(solver.select_victims, problem, on_fallback=fallback)
        else:
            selection = None
        if record:
            self.handle.solver_metrics.solved(
                f"preemption-{self.options.strategy}",
                selection.status if selection is not None else "INFEASIBLE",
                time.perf_counter() - started,
                fell_back,
                selection.gap if selection is not None else None,
            )
        if selection is None:
            if record:
                self.handle.solver_metrics.preemption(0)
            what = f"gang group {job}" if len(members) > 1 or job != trigger.uid else f"pod {trigger.key}"
            if not candidates:
                return Choice(Status.unschedulable(), "no pod may be evicted for it: nothing was evicted.")
            return Choice(
                Status.unschedulable(),
                f"evicting every lower-priority pod ({len(candidates)}) would still leave {what} "
                "without room: nothing was evicted.",
                candidates=len(candidates),
            )
        if not selection.victims:
            return Choice(
                Status.unschedulable(),
                "the job fits without evicting anyone; retrying.",
                selection,
                len(candidates),
            )
        if release is not None:
            chosen = [p for uid in selection.victims if (p := snapshot.pod(uid)) is not None]
            if not release.fits_after(members, chosen):
                return Choice(
                    Status.unschedulable(),
                    "the victims found would not free enough of the quota: nothing was evicted.",
                    candidates=len(candidates),
                )
        return Choice(Status.success(), "", selection, len(candidates))

    def _eligible(self, trigger: PodInfo, pod: PodInfo, snapshot: Snapshot) -> bool:
        if snapshot.is_assumed(pod.uid) or pod.is_terminal() or pod.uid == trigger.uid:
            return False
        if pod.pod.metadata.deletion_timestamp is not None:
            return False  # already going
        if is_reserve_pod(pod.annotations):
            return False  # a placed reservation is never preempted (as in Koordinator)
        if not preemption_ext.is_pod_preemptible(pod.labels) or not quota_ext.is_preemptible(pod.labels):
            return False
        if not all(accept(trigger, pod) for accept in self.victim_filters):
            return False
        return pod.priority < trigger.priority or self._reclaimable(trigger, pod)

    def _reclaimable(self, trigger: PodInfo, pod: PodInfo) -> bool:
        return any(ext.reclaimable(trigger, pod) for ext in self.handle.profile.preemption_extensions())

    def _budget(self, trigger: PodInfo, pod: PodInfo) -> tuple[str, Mapping[str, int]] | None:
        """A victim that is not of lower priority is only reclaimed: it counts against a budget."""
        if pod.priority < trigger.priority:
            return None
        for ext in self.handle.profile.preemption_extensions():
            found = ext.eviction_budget(pod)
            if found is not None:
                return found
        return None

    def _waiting_for_victims(
        self, trigger: PodInfo, job: str, members: Sequence[PodInfo], snapshot: Snapshot
    ) -> str | None:
        record = self._records.get(job)
        if record is not None:
            left = [uid for uid in record.victims if snapshot.pod(uid) is not None]
            if left:
                return f"waiting for {len(left)} victim(s) of the last preemption to terminate."
            del self._records[job]
        for member in members:
            node = snapshot.nominated_node(member.uid) or member.pod.status.nominated_node_name
            if not node:
                continue
            going = [
                p
                for p in snapshot.pods_on(node)
                if p.pod.metadata.deletion_timestamp is not None and p.priority < trigger.priority
            ]
            if going:
                return f"waiting for {len(going)} terminating pod(s) on nominated node {node}."
        return None

    def _summary(self, job: str, trigger: PodInfo, selection: VictimSelection, snapshot: Snapshot) -> str:
        nodes = sorted({n for uid in selection.victims if (n := snapshot.node_of(uid))})
        who = f"gang group {job}" if job != trigger.uid else f"pod {trigger.key}"
        return (
            f"evicting {len(selection.victims)} lower-priority pod(s) of {selection.objective[2]} job(s) "
            f"on {len(nodes)} node(s) ({', '.join(nodes)}) for {who}; every member is nominated."
        )

    # ---- execution ---------------------------------------------------------------------------

    def _execute(
        self,
        trigger: PodInfo,
        job: str,
        members: Sequence[PodInfo],
        selection: VictimSelection,
        snapshot: Snapshot,
    ) -> None:
        self.handle.solver_metrics.preemption(len(selection.victims))
        victims = self._with_broken_gangs(
            [p for uid in selection.victims if (p := snapshot.pod(uid)) is not None], snapshot
        )
        placed = dict(selection.assignment)
        going = {uid for uid in selection.victims if snapshot.pod(uid) is not None}
        self._records[job] = _Record(frozenset(selection.victims), placed, going)
        for member in members:
            node = placed.get(member.uid)
            if node is None:
                continue
            self.handle.nominator.nominate(member, node)
            if member.uid != trigger.uid:  # the loop writes the trigger pod's status itself
                self._spawn(self._set_nominated(member, node))
        for victim in victims:
            node = snapshot.node_of(victim.uid) or ""
            self._spawn(self._evict(victim, trigger, node))
        log.info(
            "job-level preemption for %s (%s): evicting %s; members nominated to %s",
            job,
            selection.status,
            [v.key for v in victims],
            sorted(set(placed.values())),
        )

    def _with_broken_gangs(self, victims: list[PodInfo], snapshot: Snapshot) -> list[PodInfo]:
        """The victims, plus the other bound members of each victim gang left below its floor: the
        solver already counts a broken job as all its pods, and a gang left part running would hold
        its room for nothing (and never be whole again)."""
        job_of = self.handle.profile.job_of
        chosen = {v.uid for v in victims}
        first: dict[str, PodInfo] = {}
        for victim in victims:
            if (job := job_of(victim)) != victim.uid:
                first.setdefault(job, victim)
        if not first:
            return victims
        rest: dict[str, list[PodInfo]] = {job: [] for job in first}
        for pod in snapshot.assigned_pods():
            job = job_of(pod)
            if job in rest and pod.uid not in chosen and pod.pod.metadata.deletion_timestamp is None:
                rest[job].append(pod)
        extra = [
            pod
            for job, pods in rest.items()
            if pods and len(pods) < self.gang_floor(first[job])
            for pod in sorted(pods, key=lambda p: p.key)
        ]
        return victims + extra

    async def _set_nominated(self, member: PodInfo, node: str | None) -> None:
        """Write (None: remove) ``status.nominatedNodeName``."""
        try:
            await self.handle.backend.patch_pod_status(member.pod, {"status": {"nominatedNodeName": node}})
        except Exception as exc:
            log.info("could not write the nominated node of %s: %s", member.key, exc)

    async def _evict(self, victim: PodInfo, preemptor: PodInfo, node: str) -> None:
        await self.handle.eviction.evict(
            EvictionRequest(
                pod=victim,
                reason="Preempted",
                action="Preempting",
                message=f"Preempted by pod {preemptor.key} ({preemptor.uid}) on node {node}",
                node=node,
                disruption_reason=PREEMPTION_BY_SCHEDULER,
                delete_if_refused=True,
                soft=self.soft_eviction,
            )
        )

    def evicting(self) -> int:
        """Evictions of chosen victims in flight."""
        return len(self._background)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._background.spawn(coro)
