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
   ``Preempted`` event naming the preemptor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apis.core import PodDisruptionBudget
from apis.extension import preemption as preemption_ext
from apis.extension import quota as quota_ext
from apis.extension.networktopology import NetworkTopologySpec
from apis.scheduling.networktopology import ClusterNetworkTopology
from scheduler import solver
from scheduler.backend.base import PDBS, BackendError, EventRecord, NotFound, ObjectRef, WatchEvent
from scheduler.background import BackgroundTasks
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import PreemptionExtension, QuotaRelease
from scheduler.framework.status import Status
from scheduler.plugins.coscheduling.placement import TopologyError, build_problem
from scheduler.solver import PreemptionProblem, ResourceVector, SolveOptions, VictimSelection, VictimSpec

__all__ = ["JobPreemption", "Outcome", "VictimFilter"]

log = logging.getLogger(__name__)

VictimFilter = Callable[[PodInfo, PodInfo], bool]
"""(preemptor, candidate victim) -> may the candidate be evicted for it."""

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
SOFT_EVICTION_LABEL_VALUE = "true"


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


@dataclass
class JobPreemption:
    handle: Handle
    options: SolveOptions
    soft_eviction: bool = False
    victim_filters: list[VictimFilter] = field(default_factory=list)
    _pdbs: dict[str, PodDisruptionBudget] = field(default_factory=dict)
    _records: dict[str, _Record] = field(default_factory=dict)
    _background: BackgroundTasks = field(default_factory=BackgroundTasks)

    def __post_init__(self) -> None:
        self.handle.subscribe(PDBS, self._on_pdb_event)

    def _on_pdb_event(self, event: WatchEvent[PodDisruptionBudget]) -> None:
        def key(pdb: PodDisruptionBudget) -> str:
            return f"{pdb.metadata.namespace or 'default'}/{pdb.metadata.name}"

        def replace(pdbs: Sequence[PodDisruptionBudget]) -> None:
            self._pdbs = {key(p): p for p in pdbs}

        def upsert(pdb: PodDisruptionBudget) -> None:
            self._pdbs[key(pdb)] = pdb

        event.dispatch(replace, upsert, lambda pdb: self._pdbs.pop(key(pdb), None))

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
        members; or explain why not. ``members`` are the job's pending pods (the trigger included)."""
        if trigger.pod.spec.preemption_policy == "Never":
            return Outcome(Status.unresolvable(), "not eligible due to preemptionPolicy=Never.")
        waiting = self._waiting_for_victims(trigger, job, members, snapshot)
        if waiting is not None:
            return Outcome(Status.unschedulable(), waiting, snapshot.nominated_node(trigger.uid), holds=True)
        if not members:
            return Outcome(Status.unschedulable(), "no pending member to place.")

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
        with admitting:
            problem = self._problem(trigger, job, members, candidates, snapshot, topology, spec, release)
        if isinstance(problem, str):
            return Outcome(Status.unresolvable(), problem)
        fell_back = False

        def fallback(_: PreemptionProblem) -> None:
            nonlocal fell_back
            fell_back = True

        started = time.perf_counter()
        # The problem is plain frozen data: solve it off the event loop (CP-SAT releases the GIL),
        # so watches and bindings go on meanwhile; what changed by then is re-read in _execute.
        selection = await asyncio.to_thread(solver.select_victims, problem, on_fallback=fallback)
        status = selection.status if selection is not None else "INFEASIBLE"
        self.handle.observe_solver(
            f"preemption-{self.options.strategy}", status, time.perf_counter() - started, fell_back
        )
        if selection is None:
            self.handle.observe_preemption(0)
            what = f"gang group {job}" if len(members) > 1 or job != trigger.uid else f"pod {trigger.key}"
            if not candidates:
                return Outcome(Status.unschedulable(), "no pod may be evicted for it: nothing was evicted.")
            return Outcome(
                Status.unschedulable(),
                f"evicting every lower-priority pod ({len(candidates)}) would still leave {what} "
                "without room: nothing was evicted.",
            )
        if not selection.victims:
            self.handle.activate({m.uid for m in members})
            return Outcome(Status.unschedulable(), "the job fits without evicting anyone; retrying.")
        if release is not None:
            chosen = [p for uid in selection.victims if (p := snapshot.pod(uid)) is not None]
            if not release.fits_after(members, chosen):
                return Outcome(
                    Status.unschedulable(),
                    "the victims found would not free enough of the quota: nothing was evicted.",
                )
        self._execute(trigger, job, members, selection, snapshot)
        return Outcome(
            Status.success(),
            self._summary(job, trigger, selection, snapshot),
            selection.assignment.get(trigger.uid),
        )

    def _eligible(self, trigger: PodInfo, pod: PodInfo, snapshot: Snapshot) -> bool:
        if snapshot.is_assumed(pod.uid) or pod.is_terminal() or pod.uid == trigger.uid:
            return False
        if pod.pod.metadata.deletion_timestamp is not None:
            return False  # already going
        if not preemption_ext.is_pod_preemptible(pod.labels) or not quota_ext.is_preemptible(pod.labels):
            return False
        if not all(accept(trigger, pod) for accept in self.victim_filters):
            return False
        return pod.priority < trigger.priority or self._reclaimable(trigger, pod)

    def _reclaimable(self, trigger: PodInfo, pod: PodInfo) -> bool:
        extensions: list[PreemptionExtension] = self.handle.preemption_extensions
        return any(ext.reclaimable(trigger, pod) for ext in extensions)

    def _budget(self, trigger: PodInfo, pod: PodInfo) -> tuple[str, Mapping[str, int]] | None:
        """A victim that is not of lower priority is only reclaimed: it counts against a budget."""
        if pod.priority < trigger.priority:
            return None
        extensions: list[PreemptionExtension] = self.handle.preemption_extensions
        for ext in extensions:
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

    def _problem(
        self,
        trigger: PodInfo,
        job: str,
        members: Sequence[PodInfo],
        candidates: Sequence[PodInfo],
        snapshot: Snapshot,
        topology: ClusterNetworkTopology | None,
        spec: NetworkTopologySpec | None,
        release: QuotaRelease | None = None,
    ) -> PreemptionProblem | str:
        feasible_rows = self.handle.feasible_rows
        if feasible_rows is None:
            return "the profile cannot evaluate members (no framework)."
        restore = snapshot.simulate_removal(candidates)
        try:
            placement = build_problem(
                job,
                members,
                snapshot,
                lambda member: feasible_rows(member, snapshot),
                topology=topology,
                spec=spec,
                options=self.options,
            )
        except TopologyError as exc:
            return f"gang {job}: {exc}"
        finally:
            restore()
        released: dict[str, list[int]] = {}
        victims: list[VictimSpec] = []
        nodes = {n.name for n in placement.nodes}
        pdbs = self._pdbs_of(candidates)
        budgets: dict[str, ResourceVector] = {}
        extra_nodes: dict[str, solver.NodeSpec] = {}
        for pod in candidates:
            node = snapshot.node_of(pod.uid)
            if node is None:
                continue
            if node not in nodes:
                # A node no member can use: its victims only count towards a quota release.
                if release is None or placement.layers:
                    continue
                if node not in extra_nodes:
                    free = snapshot.table.free(
                        np.array([snapshot.table.row[node]], dtype=np.int64),
                        np.array([snapshot.table.column_of(r) for r in placement.resources], dtype=np.int64),
                    )[0]
                    extra_nodes[node] = solver.NodeSpec(node, ResourceVector(tuple(int(x) for x in free)))
            request = ResourceVector(tuple(pod.requests.get(r, 0) for r in placement.resources))
            amounts = released.setdefault(node, [0] * len(placement.resources))
            for i, amount in enumerate(request.values):
                amounts[i] += amount
            budget = self._budget(trigger, pod)
            if budget is not None:
                budgets[budget[0]] = ResourceVector(
                    tuple(budget[1].get(r, 0) if r in budget[1] else 2**62 for r in placement.resources)
                )
            victims.append(
                VictimSpec(
                    uid=pod.uid,
                    name=pod.key,
                    node=node,
                    request=request,
                    priority=pod.priority,
                    job=self.handle.job_of(pod),
                    pdbs=pdbs.get(pod.uid, ()),
                    budget=budget[0] if budget is not None else None,
                    release=release.key if release is not None and release.holds(pod) else None,
                )
            )
        # build_problem saw the nodes with every candidate gone: put the victims back.
        nodes_now = tuple(
            solver.NodeSpec(n.name, n.free - ResourceVector(tuple(released[n.name])), n.path)
            if n.name in released
            else n
            for n in placement.nodes
        )
        placement = solver.PlacementProblem(
            gang=placement.gang,
            resources=placement.resources,
            pod_groups=placement.pod_groups,
            nodes=nodes_now + tuple(extra_nodes.values()),
            feasible_nodes=placement.feasible_nodes,
            layers=placement.layers,
            options=placement.options,
        )
        jobs = {v.job for v in victims}
        sizes = Counter(j for p in snapshot.assigned_pods() if (j := self.handle.job_of(p)) in jobs)
        allowed = {name: self._pdbs[name].status.disruptions_allowed for v in victims for name in v.pdbs}
        releases = {}
        if release is not None:
            releases[release.key] = ResourceVector(
                tuple(release.amounts.get(r, 0) for r in placement.resources)
            )
        return PreemptionProblem(placement, tuple(victims), dict(sizes), allowed, budgets, releases)

    def _pdbs_of(self, pods: Sequence[PodInfo]) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for pod in pods:
            names = tuple(
                name
                for name, pdb in sorted(self._pdbs.items())
                if (pdb.metadata.namespace or "default") == pod.namespace
                and pdb.spec.selector is not None
                and pdb.spec.selector.matches(pod.labels)
            )
            if names:
                out[pod.uid] = names
        return out

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
        self.handle.observe_preemption(len(selection.victims))
        victims = [p for uid in selection.victims if (p := snapshot.pod(uid)) is not None]
        placed = dict(selection.assignment)
        self._records[job] = _Record(frozenset(selection.victims), placed)
        for member in members:
            node = placed.get(member.uid)
            if node is None:
                continue
            self.handle.nominate(member, node)
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

    async def _set_nominated(self, member: PodInfo, node: str) -> None:
        try:
            await self.handle.backend.patch_pod_status(member.pod, {"status": {"nominatedNodeName": node}})
        except Exception as exc:
            log.info("could not write the nominated node of %s: %s", member.key, exc)

    async def _evict(self, victim: PodInfo, preemptor: PodInfo, node: str) -> None:
        backend = self.handle.backend
        reason = f"preempted by {preemptor.key} on node {node}"
        try:
            if self.soft_eviction:
                spec = preemption_ext.SoftEvictionSpec.model_validate(
                    {
                        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "initiator": self.handle.scheduler_name,
                        "reason": reason,
                        "deleteOptions": {},
                    }
                )
                await backend.patch_pod(
                    victim.pod,
                    {
                        "metadata": {
                            "labels": {preemption_ext.ANNOTATION_SOFT_EVICTION: SOFT_EVICTION_LABEL_VALUE},
                            "annotations": {
                                preemption_ext.ANNOTATION_SOFT_EVICTION: json.dumps(
                                    spec.to_wire(), separators=(",", ":")
                                )
                            },
                        }
                    },
                )
            else:
                await backend.patch_pod_status(victim.pod, {"status": {"conditions": [_disruption_target()]}})
                try:
                    await backend.evict(victim.pod)
                except NotFound:
                    return
                except BackendError as exc:
                    if exc.status != 429:
                        raise
                    # A PodDisruptionBudget refuses; the solver only chose this victim because
                    # every other choice cost more, so delete it as kube-scheduler's preemption does.
                    await backend.delete_pod(victim.pod)
        except NotFound:
            return
        except Exception as exc:
            log.warning("could not evict %s (%s): %s", victim.key, reason, exc)
            return
        await backend.record_event(
            EventRecord(
                regarding=ObjectRef(kind="Pod", namespace=victim.namespace, name=victim.name, uid=victim.uid),
                type="Normal",
                reason="Preempted",
                action="Preempting",
                message=f"Preempted by pod {preemptor.key} ({preemptor.uid}) on node {node}",
            )
        )

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._background.spawn(coro)


def _disruption_target() -> dict[str, str]:
    return {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": "koord-scheduler: preempting to accommodate a higher priority job",
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
