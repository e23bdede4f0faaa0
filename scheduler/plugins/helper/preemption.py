"""kube-scheduler's pod-level preemption (``framework/preemption/preemption.go``, its Evaluator), shared by
DefaultPreemption and ElasticQuota's PostFilter: Koordinator's quota preemption
(``elasticquota/preempt.go``) runs the same Evaluator and only changes who may be a victim and what
"the preemptor fits" means, which are the ``VictimRules`` here.

Per pod (``Evaluator.preempt``):

1. Eligibility: ``preemptionPolicy: Never`` never preempts; a pod whose nominated node still holds a
   terminating pod it could have preempted waits for that pod to go (unless its nominated node is
   now unresolvable for it).
2. Candidate nodes: every node Filter did not reject as unresolvable (every node when a PreFilter
   rejected the pod as Unschedulable), walked from an offset until enough candidates are found
   (``VictimRules.candidates_to_find``; at least one that violates no PodDisruptionBudget).
3. Victims on a node (SelectVictimsOnNode): remove every pod the preemptor may preempt there; if
   the preemptor still does not fit, the node is out. Otherwise the potential victims come back one
   by one from the most important (higher priority, then earlier start), those whose eviction would
   violate a PodDisruptionBudget first; a pod stays if the preemptor still fits with it back, else
   it is a victim.
4. The node (pickOneNodeForPreemption): fewest PDB violations, then the lowest highest-victim
   priority, the smallest sum of victim priorities, the fewest victims, the latest start among the
   highest-priority victims, then (where kube-scheduler takes whichever came first) the node name.
5. Execution: the preemptor is nominated to the node (its requests are held there in the cache,
   and the scheduling loop writes ``status.nominatedNodeName``); a victim waiting at Permit is
   rejected, any other gets the ``DisruptionTarget`` condition and is evicted through the eviction
   service (a PodDisruptionBudget refusal becomes a delete, as kube-scheduler deletes), with a
   ``Preempted`` event naming the preemptor.

A pod's start time is its creation time (the model keeps no ``status.startTime``; kube-scheduler
falls back to the creation time too).
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from apis.client.backend import PDBS, WatchEvent
from apis.client.eviction import EvictionRequest
from apis.core import PodDisruptionBudget
from apis.extension.reservation import is_reserve_pod
from scheduler.background import BackgroundTasks
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis, PostFilterResult
from scheduler.framework.status import Status

__all__ = [
    "PREEMPTION_BY_SCHEDULER",
    "Candidate",
    "Evaluator",
    "PdbIndex",
    "VictimRules",
    "num_candidates",
    "pick_one_node",
]

log = logging.getLogger(__name__)

PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
"""kube-scheduler's reasons for a node that is no candidate, counted in the message."""
_PRIORITY_OFFSET = 2**31
"""kube-scheduler adds MaxInt32 + 1 to each victim priority before summing them (so negative
priorities do not make more victims look cheaper)."""


def num_candidates(nodes: int, percentage: int, absolute: int) -> int:
    """kube-scheduler's ``calculateNumCandidates``: a share of the nodes, at least ``absolute``."""
    n = nodes * percentage // 100
    return min(max(n, absolute), nodes)


class VictimRules(Protocol):
    """What one kind of preemption decides for itself (kube-scheduler's ``Interface`` of the Evaluator)."""

    def can_preempt(self, preemptor: PodInfo, victim: PodInfo) -> bool:
        """``victim`` (running, not terminating, of lower priority) may be evicted for ``preemptor``."""
        ...

    def fits(self, preemptor: PodInfo, snapshot: Snapshot, node: str, victims: Sequence[PodInfo]) -> bool:
        """``preemptor`` fits on ``node`` of ``snapshot``, from which ``victims`` are removed."""
        ...

    def candidates_to_find(self, nodes: int) -> int:
        """How many candidate nodes are enough, out of ``nodes`` potential ones."""
        ...


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: tuple[PodInfo, ...]
    pdb_violations: int


class PdbIndex:
    """Every PodDisruptionBudget, from the watch."""

    def __init__(self, handle: Handle) -> None:
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        handle.subscribe(PDBS, self._on_event)

    def _on_event(self, event: WatchEvent[PodDisruptionBudget]) -> None:
        def key(pdb: PodDisruptionBudget) -> str:
            return f"{pdb.metadata.namespace or 'default'}/{pdb.metadata.name}"

        def replace(pdbs: Sequence[PodDisruptionBudget]) -> None:
            self.pdbs = {key(p): p for p in pdbs}

        def upsert(pdb: PodDisruptionBudget) -> None:
            self.pdbs[key(pdb)] = pdb

        event.dispatch(replace, upsert, lambda pdb: self.pdbs.pop(key(pdb), None))

    def split_violating(self, pods: Sequence[PodInfo]) -> tuple[list[PodInfo], list[PodInfo]]:
        """kube-scheduler's ``filterPodsWithPDBViolation``: counting down each matching budget's
        ``disruptionsAllowed`` in ``pods``' order, the pods that take one below zero, and the rest
        (both in ``pods``' order)."""
        allowed = {name: pdb.status.disruptions_allowed for name, pdb in self.pdbs.items()}
        violating: list[PodInfo] = []
        other: list[PodInfo] = []
        for pod in pods:
            violated = False
            if pod.labels:
                for name, pdb in sorted(self.pdbs.items()):
                    selector = pdb.spec.selector
                    if (pdb.metadata.namespace or "default") != pod.namespace or selector is None:
                        continue
                    if not (selector.match_labels or selector.match_expressions):
                        continue  # an empty selector matches nothing (policy/v1)
                    if not selector.matches(pod.labels):
                        continue
                    allowed[name] -= 1
                    violated = violated or allowed[name] < 0
            (violating if violated else other).append(pod)
        return violating, other


def _more_important(pod: PodInfo) -> tuple[int, float, str]:
    """Sort key, most important first: higher priority, then earlier start (kube's MoreImportantPod)."""
    return (-pod.priority, pod.created, pod.key)


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate | None:
    """kube-scheduler's ``pickOneNodeForPreemption``, in its order of criteria (module docstring)."""

    def cost(c: Candidate) -> tuple[int, int, int, int, float, str]:
        highest = max(v.priority for v in c.victims)
        earliest_of_highest = min(v.created for v in c.victims if v.priority == highest)
        return (
            c.pdb_violations,
            highest,
            sum(v.priority + _PRIORITY_OFFSET for v in c.victims),
            len(c.victims),
            -earliest_of_highest,
            c.node,
        )

    return min(candidates, key=cost, default=None)


@dataclass
class Evaluator:
    """Preemption for one pod at a time; ``name`` is the plugin that runs it (in logs)."""

    name: str
    handle: Handle
    rules: VictimRules
    pdbs: PdbIndex
    rng: random.Random = field(default_factory=random.Random)
    _background: BackgroundTasks = field(default_factory=BackgroundTasks)

    async def preempt(self, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis) -> PostFilterResult:
        """Evict the victims of the best candidate node and nominate ``pod`` there, or say why not
        (the reason goes into ``diagnosis.post_filter_message``)."""
        why = self._not_eligible(pod, snapshot, diagnosis)
        if why is not None:
            diagnosis.post_filter_message = why
            return PostFilterResult(Status.unschedulable())
        best = self._best(pod, snapshot, diagnosis)
        if isinstance(best, str):
            self.handle.solver_metrics.preemption(0)
            self._clear_nomination(pod, snapshot)
            diagnosis.post_filter_message = best
            return PostFilterResult(Status.unschedulable())
        self._execute(pod, best)
        diagnosis.post_filter_message = (
            f"evicting {len(best.victims)} pod(s) on node {best.node} "
            f"({', '.join(v.key for v in best.victims)}); {pod.key} is nominated there."
        )
        return PostFilterResult(Status.success(), best.node)

    def choose(self, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis) -> Candidate | str:
        """What ``preempt`` would do, done to nothing (no eviction, nomination or metric): the node
        and its victims, or why there is none."""
        why = self._not_eligible(pod, snapshot, diagnosis)
        return why if why is not None else self._best(pod, snapshot, diagnosis)

    def _best(self, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis) -> Candidate | str:
        all_rows = snapshot.candidate_rows()
        reasons: Counter[str] = Counter()
        if not snapshot.has_pod_below(pod.priority):
            # Every node's dry run would find no victim (a victim is of lower priority): count
            # them so without walking every node's pods (a cluster of one priority, full).
            unresolvable = np.fromiter(diagnosis.unresolvable_rows, dtype=np.int64)
            helpful = all_rows.size - int(np.count_nonzero(np.isin(all_rows, unresolvable)))
            if helpful < all_rows.size:
                reasons[NOT_HELPFUL] = all_rows.size - helpful
            if helpful:
                reasons[NO_VICTIMS] = helpful
            candidates: list[Candidate] = []
        else:
            rows = [int(r) for r in all_rows if int(r) not in diagnosis.unresolvable_rows]
            if len(rows) < all_rows.size:
                reasons[NOT_HELPFUL] = all_rows.size - len(rows)
            candidates = self._candidates(pod, snapshot, [snapshot.table.names[r] for r in rows], reasons)
        best = pick_one_node(candidates)
        if best is None:
            detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
            return f"0/{all_rows.size} nodes are available: {detail}."
        return best

    def _not_eligible(self, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis) -> str | None:
        """Why ``pod`` may not preempt now (kube-scheduler's ``PodEligibleToPreemptOthers``)."""
        if pod.pod.spec.preemption_policy == "Never":
            return "not eligible due to preemptionPolicy=Never."
        node = snapshot.nominated_node(pod.uid) or pod.pod.status.nominated_node_name
        if not node or snapshot.node(node) is None:
            return None
        row = snapshot.table.row.get(node)
        if row is not None and row in diagnosis.unresolvable_rows:
            return None
        for other in snapshot.pods_on(node):
            if other.pod.metadata.deletion_timestamp is not None and self._victim_rule(pod, other):
                return "not eligible due to a terminating pod on the nominated node."
        return None

    def _victim_rule(self, pod: PodInfo, other: PodInfo) -> bool:
        if other.priority >= pod.priority or other.uid == pod.uid:
            return False  # kube-scheduler's SelectVictimsOnNode: only a pod of lower priority
        if is_reserve_pod(other.annotations):
            return False  # a placed reservation is never preempted (as in Koordinator)
        return self.rules.can_preempt(pod, other)

    def _potential_victims(self, pod: PodInfo, snapshot: Snapshot, node: str) -> list[PodInfo]:
        out = []
        for other in snapshot.pods_on(node):
            if other.priority >= pod.priority:
                continue  # no victim (``_victim_rule``'s first test, the cheapest, made first)
            if other.pod.metadata.deletion_timestamp is not None or other.is_terminal():
                continue  # already going
            if snapshot.is_assumed(other.uid) and self.handle.waiting_pods.get(other.uid) is None:
                continue  # being bound: past the point where it could be rejected
            if self._victim_rule(pod, other):
                out.append(other)
        return out

    def _candidates(
        self, pod: PodInfo, snapshot: Snapshot, nodes: Sequence[str], reasons: Counter[str]
    ) -> list[Candidate]:
        """Dry runs from an offset until enough candidates; ``reasons`` counts the nodes that are none."""
        if not nodes:
            return []
        wanted = self.rules.candidates_to_find(len(nodes))
        offset = self.rng.randrange(len(nodes))
        found: list[Candidate] = []
        for i in range(len(nodes)):
            candidate = self._select_victims(pod, snapshot, nodes[(offset + i) % len(nodes)])
            if isinstance(candidate, str):
                reasons[candidate] += 1
                continue
            found.append(candidate)
            if any(c.pdb_violations == 0 for c in found) and len(found) >= wanted:
                break
        return found

    def _select_victims(self, pod: PodInfo, snapshot: Snapshot, node: str) -> Candidate | str:
        """kube-scheduler's ``SelectVictimsOnNode`` (module docstring, step 3); or why the node is
        no candidate."""
        potential = sorted(self._potential_victims(pod, snapshot, node), key=_more_important)
        if not potential:
            return NO_VICTIMS
        restore = snapshot.simulate_removal(potential)
        spared: list[Callable[[], None]] = []
        try:
            if not self.rules.fits(pod, snapshot, node, potential):
                return NOT_HELPFUL
            violating, other = self.pdbs.split_violating(potential)
            gone = {p.uid for p in potential}
            victims: list[PodInfo] = []
            violations = 0
            for group, counts in ((violating, True), (other, False)):
                for candidate in group:
                    undo = snapshot.simulate_return([candidate])
                    gone.discard(candidate.uid)
                    if self.rules.fits(pod, snapshot, node, [p for p in potential if p.uid in gone]):
                        spared.append(undo)
                        continue
                    undo()
                    gone.add(candidate.uid)
                    victims.append(candidate)
                    violations += counts
            return Candidate(node, tuple(victims), violations) if victims else NOT_HELPFUL
        finally:
            for undo in reversed(spared):
                undo()
            restore()

    # ---- execution -------------------------------------------------------------------------

    def _clear_nomination(self, pod: PodInfo, snapshot: Snapshot) -> None:
        """No node helps: a nomination left from an earlier preemption holds room for nothing
        (kube-scheduler clears the preemptor's nominated node then). Kept while lower-priority pods
        on that node are still terminating: another PostFilter's preemption may be under way there."""
        node = snapshot.nominated_node(pod.uid) or pod.pod.status.nominated_node_name
        if node and any(
            p.pod.metadata.deletion_timestamp is not None and p.priority < pod.priority
            for p in snapshot.pods_on(node)
        ):
            return
        if snapshot.nominated_node(pod.uid) is not None:
            self.handle.nominator.clear_nomination(pod.uid)
        if pod.pod.status.nominated_node_name:
            self._spawn(self._unset_nominated(pod))

    async def _unset_nominated(self, pod: PodInfo) -> None:
        try:
            await self.handle.backend.patch_pod_status(pod.pod, {"status": {"nominatedNodeName": None}})
        except Exception as exc:
            log.info("could not clear the nominated node of %s: %s", pod.key, exc)

    def _execute(self, pod: PodInfo, candidate: Candidate) -> None:
        self.handle.nominator.nominate(pod, candidate.node)
        self.handle.solver_metrics.preemption(len(candidate.victims))
        for victim in candidate.victims:
            waiting = self.handle.waiting_pods.get(victim.uid)
            if waiting is not None:
                waiting.reject(self.name, f"preempted by {pod.key}")
                continue
            self._spawn(
                self.handle.eviction.evict(
                    EvictionRequest(
                        pod=victim,
                        reason="Preempted",
                        action="Preempting",
                        message=f"Preempted by pod {pod.key} ({pod.uid}) on node {candidate.node}",
                        node=candidate.node,
                        disruption_reason=PREEMPTION_BY_SCHEDULER,
                        delete_if_refused=True,
                    )
                )
            )
        log.info(
            "%s: preempting %s on %s for %s",
            self.name,
            [v.key for v in candidate.victims],
            candidate.node,
            pod.key,
        )

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._background.spawn(coro)
