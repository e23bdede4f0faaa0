"""Coscheduling: all-or-nothing gangs (PodGroup CRs and Koordinator's lightweight gang annotations).

The plugin is an adapter; the gang bookkeeping lives in ``gangs.Gangs``. Per member:

1. PreEnqueue keeps a member out of the active queue until its whole gang group is ready (every
   gang known, initialized, with at least minMember pods), and lets it straight in once the group
   has been satisfied (``once-satisfied``).
2. PreFilter rejects a member whose group is not ready (UnschedulableAndUnresolvable: preemption
   cannot create missing pods), and restricts a member to the node its group's placement chose.
3. Permit holds each assumed member (WAIT, with the gang's wait time) until every gang of the
   group counts minMember members by its match policy, then releases them all together. No member
   is bound before that.
4. A member that finds no node, or a waiting member that times out or is rejected, rolls back
   every waiting member of the group in Strict mode (NonStrict members keep their places).
5. PreBind adds the gang-group id and member count annotations Koordinator writes (both the
   internal and the deprecated keys) to the Binding; PostBind marks the group satisfied. A member
   whose binding fails after Permit released it keeps its room (``HOLD_ROOM``) for its retry.
   A group whose running members are all gone is no longer satisfied, and one found part bound
   (after a restart) counts its running members at Permit (``Gangs.recount``): what is left of a
   gang never runs alone as plain pods.
6. PreScore/Score order the nodes of a pod with a network-topology-selector by the
   ClusterNetworkTopology, as Koordinator's (``topology_score``).
7. With ``enablePreemption``, PostFilter first tries job-level preemption (``preemption.py``): the
   whole group, or a pod that belongs to no gang as a job of one, evicts the cheapest victims that
   let every pending member fit; members are nominated and waiting members keep their places.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from apis.client.backend import (
    PDBS,
    PODGROUPS,
    PODS,
    TOPOLOGIES,
    EventRecord,
    EventType,
    ObjectRef,
    WatchEvent,
)
from apis.client.eviction import EVICTION_RULES
from apis.client.rbac import PolicyRule
from apis.core import Pod
from apis.extension import gang as gang_ext
from apis.extension.networktopology import NetworkTopologySpec, get_network_topology_selector
from apis.extension.reservation import is_reserve_pod
from apis.scheduling.networktopology import ClusterNetworkTopology
from apis.scheduling.podgroup import PodGroup
from scheduler.background import BackgroundTasks
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.dry_run import Choice, JobDryRun, PendingJob, PlacementSetting
from scheduler.framework.extensions import (
    GANG_PLAN,
    HOLD_ROOM,
    JobResolver,
    OffCycleWork,
    PreemptionExtension,
    QuotaRelease,
    carry_on_binding,
)
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    ClusterEvent,
    Diagnosis,
    EnqueueExtensions,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.status import Status
from scheduler.plugins.coscheduling.args import CoschedulingArgs
from scheduler.plugins.coscheduling.gangs import Gang, Gangs, gang_name_of
from scheduler.plugins.coscheduling.group_placement import GroupPlanner
from scheduler.plugins.coscheduling.preemption import JobPreemption
from scheduler.plugins.coscheduling.topology_score import normalize_reversed, selector_counts, topology_order
from scheduler.solver.problem import SolveOptions
from scheduler.solver.warm import warm_in_background

__all__ = ["NAME", "RBAC", "Coscheduling", "CoschedulingArgs", "new"]

NAME = "Coscheduling"
RBAC = (
    PolicyRule.watching(PODGROUPS, why="Gangs: PodGroups (Coscheduling's informer)."),
    PolicyRule.watching(TOPOLOGIES, why="The network topology gangs are placed on."),
    PolicyRule.watching(PDBS, why="Job-level preemption weighs PodDisruptionBudgets when it picks victims."),
    *EVICTION_RULES,
)
_NODE_ORDER = StateKey[dict[str, int]]("Coscheduling/nodeOrder")
"""Written at PreScore: node -> its index in the network-topology order (0: the best)."""

log = logging.getLogger(__name__)


class Coscheduling(
    PreEnqueuePlugin,
    PreFilterPlugin,
    PostFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ScoreExtensions,
    ReservePlugin,
    PermitPlugin,
    PreBindPlugin,
    PostBindPlugin,
    EnqueueExtensions,
    JobResolver,
    JobDryRun,
    OffCycleWork,
):
    def __init__(self, args: CoschedulingArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.default_timeout = args.default_timeout_seconds()
        self.gangs = Gangs(default_match_policy=args.default_match_policy)
        self.topology: ClusterNetworkTopology | None = None
        self._reported: dict[str, str] = {}
        self._background = BackgroundTasks()
        self.options = SolveOptions(
            time_limit_seconds=args.solver_time_limit_seconds,
            strategy=args.placement_strategy,
            relative_gap=args.solver_relative_gap,
        )
        self.planner = GroupPlanner(
            handle,
            self.options,
            aware_network_topology=args.aware_network_topology,
            topology=lambda: self.topology,
            report=self._report_on_pod_groups,
        )
        handle.subscribe(PODS, self._on_pod_event)
        handle.subscribe(PODGROUPS, self._on_pod_group_event)
        handle.subscribe(TOPOLOGIES, self._on_topology_event)
        self.preemption: JobPreemption | None = None
        self._preemption_on_request: JobPreemption | None = None
        """The engine built when another plugin asks (``preempt_alone``) although this plugin's
        own PostFilter does not preempt (``enablePreemption`` false)."""
        if args.enable_preemption:
            self.preemption = JobPreemption(
                handle,
                self.options,
                soft_eviction=args.eviction_mode == "SoftEviction",
                gang_floor=self.gang_floor,
            )
            if self.options.strategy != "greedy":
                warm_in_background()  # job-level preemption asked for: no cold CP-SAT in a cycle

    @property
    def name(self) -> str:
        return NAME

    def off_cycle_tasks(self) -> int:
        """Gang placements being solved and job victims being evicted (``ext.OffCycleWork``)."""
        engines = (self.preemption, self._preemption_on_request)
        return self.planner.solves_in_flight() + sum(e.evicting() for e in engines if e is not None)

    def events_to_register(self) -> ClusterEvent:
        return (
            ClusterEvent.POD_ADD
            | ClusterEvent.POD_DELETE
            | ClusterEvent.CUSTOM_RESOURCE
            | ClusterEvent.NODE_ADD
        )

    # ---- informers ---------------------------------------------------------------------------

    def _on_pod_event(self, event: WatchEvent[Pod]) -> None:
        if event.type is EventType.LISTED:  # a page of the first list: no wake-ups until its REPLACED
            for obj in event.objects:
                self.gangs.on_pod(PodInfo.of(obj))
            return
        if event.type is EventType.REPLACED:
            self.gangs.replace_pods((PodInfo.of(obj) for obj in event.objects), told=event.told)
            return
        assert event.obj is not None
        info = PodInfo.of(event.obj)
        gang = self.gangs.on_pod_deleted(info) if event.type is EventType.DELETED else self.gangs.on_pod(info)
        if gang is not None and event.type is EventType.ADDED:
            self._activate_if_ready(gang)

    def _on_pod_group_event(self, event: WatchEvent[PodGroup]) -> None:
        if event.type is EventType.REPLACED:
            self.gangs.replace_pod_groups(event.objects)
            return
        assert event.obj is not None
        if event.type is EventType.DELETED:
            self.gangs.on_pod_group_deleted(event.obj)
        else:
            self._activate_if_ready(self.gangs.on_pod_group(event.obj))

    def _on_topology_event(self, event: WatchEvent[ClusterNetworkTopology]) -> None:
        """Only the ClusterNetworkTopology named ``default`` is used, as in Koordinator."""
        if event.type is EventType.REPLACED:
            self.topology = next((t for t in event.objects if t.metadata.name == "default"), None)
        elif event.obj is not None and event.obj.metadata.name == "default":
            self.topology = None if event.type is EventType.DELETED else event.obj

    def job_of(self, pod: PodInfo) -> str:
        """A gang member's job is its gang group; any other pod is a job of its own."""
        gang = self.gangs.gang_of(pod)
        return gang.group_id if gang is not None else pod.uid

    def gang_floor(self, pod: PodInfo) -> int:
        """The members ``pod``'s gang group needs bound to run: the sum of its gangs' minMember."""
        gang = self.gangs.gang_of(pod)
        if gang is None:
            return 1
        return sum(g.min_member for g in self.gangs.members_of_group(gang))

    # ---- dry run (what-if) -------------------------------------------------------------------

    def placement_setting(self) -> PlacementSetting:
        return PlacementSetting(
            options=self.options,
            topology=self.topology,
            aware_network_topology=self.args.aware_network_topology,
            preemption=self.preemption is not None,
        )

    def gang_id_of(self, namespace: str, name: str) -> str | None:
        gang = self.gangs.gang_of_pod_named(namespace, name)
        return gang.id if gang is not None else None

    def pending_gang(self, gang_id: str) -> PendingJob | None:
        gang = self.gangs.gang(gang_id)
        if gang is None:
            return None
        group = self.gangs.members_of_group(gang)
        return PendingJob(
            job=gang.group_id,
            members=tuple(p for g in group for p in g.pending()),
            min_member=max(1, sum(g.min_member for g in group) - sum(g.running() for g in group)),
            spec=gang.topology_spec if self.args.aware_network_topology else None,
        )

    async def choose_victims(
        self,
        trigger: PodInfo,
        job: str,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        *,
        topology: ClusterNetworkTopology | None,
        spec: NetworkTopologySpec | None,
        release: QuotaRelease | None,
        admit: PreemptionExtension | None,
    ) -> Choice:
        engine = self.preemption
        if engine is None:
            return Choice(Status.unschedulable(), "job-level preemption is not enabled (enablePreemption).")
        return await engine.choose(
            trigger,
            job,
            members,
            snapshot,
            topology=topology,
            spec=spec,
            release=release,
            admit=admit,
            record=False,
            lift_lower=True,
        )

    def queue_first(self, pod: PodInfo) -> bool:
        """The rest of a gang group some of whose members are bound but that never was satisfied
        (a scheduler killed between its bindings): it goes first among its priority, before pods
        that would take the room it needs and leave the bound members idle for good
        (``QueuePrecedence``). Beyond Koordinator, which orders it as any gang."""
        gang = self.gangs.gang_of(pod)
        if gang is None or self.gangs.group(gang).once_satisfied:
            return False
        return any(member.bound and member.running() for member in self.gangs.members_of_group(gang))

    def _activate_if_ready(self, gang: Gang) -> None:
        if self.gangs.check(gang) is None:
            self.handle.activate({p.uid for g in self.gangs.members_of_group(gang) for p in g.pending()})

    # ---- queue -------------------------------------------------------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status:
        gang = self.gangs.gang_of(pod)
        if gang is None:
            return (
                Status.success() if self._not_a_gang(pod) else Status.pending(f"gang of {pod.key} not found")
            )
        if self.gangs.group(gang).once_satisfied:
            return Status.success()
        malformed = self.gangs.malformed(gang)
        if malformed is not None:
            return Status.unresolvable(malformed)  # the pod's own fault: reported, not waited on
        problem = self.gangs.check(gang)
        return Status.pending(problem) if problem else Status.success()

    def _not_a_gang(self, pod: PodInfo) -> bool:
        return gang_name_of(pod) is None

    # ---- filtering ---------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        if state.planning:
            return PreFilterResult(Status.skip())  # evaluating a member for the group's plan
        gang = self.gangs.gang_of(pod)
        if gang is None:
            if self._not_a_gang(pod):
                return PreFilterResult(Status.skip())
            return PreFilterResult(Status.unresolvable(f"gang of {pod.key} not found"))
        group = self.gangs.group(gang)
        if group.once_satisfied:
            return PreFilterResult(Status.skip())
        if gang.defrag_note:
            state.note(gang.defrag_note)
        problem = self.gangs.check(gang)
        if problem:
            return PreFilterResult(Status.unresolvable(problem))
        planned = group.plan.get(pod.uid)
        if planned is None:
            failure = self.planner.plan(
                gang,
                group,
                lambda: [p for g in self.gangs.members_of_group(gang) for p in g.pending()],
                snapshot,
                inline=self.queue_first(pod),
            )
            if failure is not None:
                return PreFilterResult(failure)
            planned = group.plan.get(pod.uid)
        if planned is None:
            return PreFilterResult(Status.error(f"the placement of gang group {group.id} left out {pod.key}"))

        def rest_of_plan() -> dict[str, tuple[PodInfo, str]]:
            others = (p for g in self.gangs.members_of_group(gang) for p in g.pending() if p.uid != pod.uid)
            return {p.uid: (p, group.plan[p.uid]) for p in others if p.uid in group.plan}

        state.write(GANG_PLAN, rest_of_plan)
        return PreFilterResult(node_names=frozenset({planned}))

    async def preempt_alone(self, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis) -> PostFilterResult:
        """Job-level preemption for ``pod`` alone, asked by another plugin (a reserve pod)."""
        engine = self.preemption
        if engine is None:
            if self._preemption_on_request is None:
                self._preemption_on_request = JobPreemption(
                    self.handle,
                    self.options,
                    soft_eviction=self.args.eviction_mode == "SoftEviction",
                    gang_floor=self.gang_floor,
                )
            engine = self._preemption_on_request
        outcome = await engine.preempt(pod, self.job_of(pod), [pod], snapshot)
        diagnosis.post_filter_message = outcome.message
        return PostFilterResult(outcome.status, outcome.nominated_node)

    async def post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> PostFilterResult:
        if is_reserve_pod(pod.annotations):
            return PostFilterResult(Status.unschedulable())  # ReservationArgs.enablePreemption decides
        gang = self.gangs.gang_of(pod)
        if gang is None and not self._not_a_gang(pod):
            return PostFilterResult(Status.unschedulable())
        solo = gang is None or self.gangs.group(gang).once_satisfied
        members = (
            [pod]
            if solo or gang is None
            else [p for g in self.gangs.members_of_group(gang) for p in g.pending()]
        )
        release: QuotaRelease | None = None
        admit: PreemptionExtension | None = None
        if diagnosis.pre_filter_message is not None and NAME not in diagnosis.rejecting_plugins:
            # Another plugin's PreFilter rejected the job for every node: only a plugin that says
            # what evictions would free (a quota: its own lower-priority pods) makes preemption help.
            extensions = self.handle.profile.preemption_extensions()
            admit = next((e for e in extensions if e.name in diagnosis.rejecting_plugins), None)
            release = admit.quota_release(pod, members) if admit is not None else None
            if self.preemption is None or release is None:
                return PostFilterResult(Status.unschedulable())
        if solo or gang is None:
            # A pod of no gang, or a member after its gang was satisfied: a job of one.
            if self.preemption is None:
                return PostFilterResult(Status.unschedulable())
            outcome = await self.preemption.preempt(
                pod, self.job_of(pod), [pod], snapshot, release=release, admit=admit
            )
            diagnosis.post_filter_message = outcome.message
            return PostFilterResult(outcome.status, outcome.nominated_node)
        group = self.gangs.group(gang)
        if self.preemption is not None:
            spec = gang.topology_spec if self.args.aware_network_topology else None
            outcome = await self.preemption.preempt(
                pod,
                group.id,
                members,
                snapshot,
                topology=self.topology if spec else None,
                spec=spec,
                release=release,
                admit=admit,
            )
            diagnosis.post_filter_message = outcome.message
            if outcome.status.ok or outcome.holds:
                # Victims are going (now or from an earlier preemption): members keep their
                # nominations and those waiting at Permit keep their places.
                self.planner.drop(group)
                return PostFilterResult(outcome.status, outcome.nominated_node)
        if diagnosis.pre_filter_message is not None:
            # The group's own placement failed at PreFilter: ``group.failure`` already says why, and
            # members waiting at Permit were never part of that plan's decision to roll back.
            return PostFilterResult(Status.unschedulable())
        waiting = sum(len(g.waiting) for g in self.gangs.members_of_group(gang))
        group.failure = (
            f"gang group {group.id} rejected because member {pod.key} is unschedulable: "
            f"{diagnosis.message()} (members already waiting: {waiting})"
        )
        self.planner.drop(group)
        if gang.mode == gang_ext.GANG_MODE_STRICT:
            self._reject_waiting(gang, group.failure)
        return PostFilterResult(Status.unschedulable(group.failure))

    # ---- scoring -----------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status:
        selector = get_network_topology_selector(pod.annotations)
        if not selector or self.topology is None:
            return Status.skip()
        names = snapshot.table.names
        labels = {names[r]: snapshot.node_at(r).labels for r in snapshot.candidate_rows().tolist()}
        existing = selector_counts(
            selector, ((p, n) for p in snapshot.assigned_pods() if (n := snapshot.node_of(p.uid)))
        )
        order = topology_order([names[r] for r in rows.tolist()], labels, self.topology, existing)
        if order is None:
            return Status.skip()
        state.write(_NODE_ORDER, order)
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        order = state.get(_NODE_ORDER) or {}
        names = snapshot.table.names
        return np.fromiter((order.get(names[r], 0) for r in rows.tolist()), dtype=np.int64, count=rows.size)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return normalize_reversed(scores)

    # ---- reserve / permit --------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        gang = self.gangs.gang_of(pod)
        if gang is None:
            return
        gang.waiting.discard(pod.uid)
        if pod.uid in gang.allowed:
            # Its binding failed after Permit released it: members of its gang may be bound
            # already, so it keeps its room for the retry instead of leaving the gang part bound.
            gang.allowed.discard(pod.uid)
            state.write(HOLD_ROOM, True)
            self.gangs.recount(gang)  # its bound members may have gone meanwhile
        group = self.gangs.group(gang)
        self.planner.drop(group, (pod.uid,))
        if not group.once_satisfied and gang.mode == gang_ext.GANG_MODE_STRICT:
            self._reject_waiting(
                gang, f"gang group {group.id} rolled back: member {pod.key} could not be bound"
            )

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        gang = self.gangs.gang_of(pod)
        if gang is None:
            return Status.success(), 0.0
        if self.gangs.group(gang).once_satisfied:
            gang.allowed.add(pod.uid)
            return Status.success(), 0.0
        gang.waiting.add(pod.uid)
        if not self.gangs.satisfied(gang):
            timeout = gang.wait_time.total_seconds() if gang.wait_time else self.default_timeout
            return Status.wait(f"waiting for gang group {gang.group_id}"), timeout
        # The group is complete: release every member waiting at Permit (this one is not yet).
        for member in self.gangs.members_of_group(gang):
            for uid in member.waiting:
                waiting = self.handle.waiting_pods.get(uid)
                if waiting is not None:
                    member.allowed.add(uid)
                    waiting.allow(NAME)
        gang.allowed.add(pod.uid)
        self.gangs.group(gang).failure = None
        return Status.success(), 0.0

    def _report_on_pod_groups(self, gang: Gang, message: str) -> None:
        """The group's placement failed: say so on each PodGroup of the group too (once per message),
        so `kubectl describe podgroup` shows the same reason as the members."""
        for member in self.gangs.members_of_group(gang):
            if not member.from_pod_group or self._reported.get(member.id) == message:
                continue
            self._reported[member.id] = message
            namespace, name = member.id.split("/", 1)
            event = EventRecord(
                regarding=ObjectRef(
                    api_version=PODGROUPS.api_version, kind="PodGroup", namespace=namespace, name=name
                ),
                type="Warning",
                reason="FailedScheduling",
                message=message,
            )
            self._background.spawn(self.handle.backend.record_event(event))

    def _reject_waiting(self, gang: Gang, reason: str) -> None:
        for member in self.gangs.members_of_group(gang):
            for uid in list(member.waiting):
                waiting = self.handle.waiting_pods.get(uid)
                if waiting is not None:
                    waiting.reject(NAME, reason)

    # ---- binding -----------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        gang = self.gangs.gang_of(pod)
        if gang is None or is_reserve_pod(pod.annotations):
            return Status.success()  # a reserve pod is no pod to annotate
        # Koordinator records the members its Permit released the group with: minMember of each
        # gang, also for members bound after (an oversubscribed gang with pods > minMember).
        count = sum(g.min_member for g in self.gangs.members_of_group(gang))
        if count <= 1:
            return Status.success()
        annotations = {
            gang_ext.ANNOTATION_BIND_GANG_GROUP_ID: gang.group_id,
            gang_ext.ANNOTATION_BIND_GANG_MEMBER_COUNT: str(count),
            gang_ext.DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID: gang.group_id,
            gang_ext.DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT: str(count),
        }
        # Carried by the Binding (the API server copies its annotations onto the pod): one write
        # per member instead of two, and no member bound without its gang record.
        carry_on_binding(state, annotations)
        return Status.success()

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        gang = self.gangs.gang_of(pod)
        if gang is None:
            return
        gang.waiting.discard(pod.uid)
        gang.allowed.discard(pod.uid)
        gang.bound.add(pod.uid)
        self.gangs.group(gang).once_satisfied = True


def new(args: CoschedulingArgs | None, handle: Handle) -> Coscheduling:
    return Coscheduling(args or CoschedulingArgs(), handle)
