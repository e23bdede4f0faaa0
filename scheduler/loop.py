"""The scheduling cycle: one pod per pop, from snapshot to assume, then hand-off to the binder.

Per pod (``schedule_one``), as kube-scheduler's ``schedule_one.go``:

1. pick the profile by schedulerName; take the snapshot (a view: no await until step 6) and lift
   the nominations that must not block this pod (its own, its job's, lower priorities);
2. PreFilter (may narrow the nodes or reject the pod outright); a node a plugin prefers
   (SchedulingHint) that passes Filter is taken at once, as kube-scheduler tries a nominated node;
3. Filter over every node at once (vectorized);
   (PENDING: a plugin works on the pod off the cycle and activates it later; it waits quietly);
4. no feasible node, or an Unschedulable PreFilter (a gang that does not fit as a whole):
   PostFilter (job-level preemption) may nominate a node; record FailedScheduling with the
   per-reason node counts and requeue the pod as unschedulable;
5. sample at most numFeasibleNodesToFind of the feasible nodes (rotating start), PreScore, Score,
   and take the highest total (ties broken at random);
6. assume the pod on the node in the cache, Reserve, Permit;
7. hand the pod to the binder (WaitOnPermit, PreBind, Bind run concurrently with later cycles).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import InitVar, dataclass, field
from typing import Literal

import numpy as np

from apis.client.backend import ClusterBackend
from scheduler.binder import Binder
from scheduler.cache.cache import Cache
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.debug import DebugFlags, log_top_scores
from scheduler.explain import Explanation, ExplanationStore
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.equivalence import ClassView, EquivalenceClasses, class_key
from scheduler.framework.extensions import SCORE_ALWAYS
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.metrics import SchedulerMetrics
from scheduler.queue.scheduling_queue import QueuedPodInfo, SchedulingQueue
from scheduler.reporting import Reporter

__all__ = ["SchedulingLoop", "num_feasible_nodes_to_find"]

log = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(node_count: int, percentage: int | None) -> int:
    """kube-scheduler's percentageOfNodesToScore: all of small clusters, an adaptive share of big ones."""
    if node_count < MIN_FEASIBLE_NODES_TO_FIND:
        return node_count
    adaptive = percentage if percentage else 50 - node_count // 125
    adaptive = max(adaptive, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if adaptive >= 100:
        return node_count
    return max(node_count * adaptive // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass
class SchedulingLoop:
    backend: ClusterBackend
    cache: Cache
    queue: SchedulingQueue
    frameworks: dict[str, Framework]
    binder: Binder
    metrics: SchedulerMetrics
    explanations: ExplanationStore
    percentage_of_nodes_to_score: int | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    classes: EquivalenceClasses | None = field(default_factory=EquivalenceClasses)
    """Pods of one template share their row-local Filter and Score work; None: every pod alone."""
    debug_flags: DebugFlags = field(default_factory=DebugFlags)
    """Read each cycle: ``top_n_scores`` > 0 logs the best-scored nodes of every scored pod."""
    reporter: InitVar[Reporter | None] = None
    """Writes FailedScheduling events and conditions; one of its own when not given."""
    _next_start: int = 0
    _reporter: Reporter = field(init=False)

    def __post_init__(self, reporter: Reporter | None) -> None:
        self._reporter = reporter if reporter is not None else Reporter(self.backend, self.explanations)

    async def run(self) -> None:
        while True:
            qp = await self.queue.pop()
            try:
                await self.schedule_one(qp)
            except Exception:
                log.exception("scheduling cycle for %s failed", qp.pod.key)
                self.queue.add_backoff(qp)
            # Let bindings, watches and the HTTP server run between cycles: popping does not wait
            # while pods are pending, so without this a backlog starves them (/readyz times out,
            # no binding starts until the whole backlog has had its cycle).
            await asyncio.sleep(0)

    async def schedule_one(self, qp: QueuedPodInfo) -> None:
        pod = qp.pod
        fwk = self.frameworks.get(pod.scheduler_name)
        if fwk is None:  # its profile vanished (config reload); nothing of ours
            self.queue.done(pod.uid)
            return
        started = time.perf_counter()
        snapshot = Snapshot(self.cache)
        # As kube-scheduler's nominator: the pod's own nomination and those of lower priority do
        # not block it. The nominations of the rest of its job (a gang) are lifted by the plugins
        # that plan the job as a whole (group placement, job preemption) while they plan.
        restore = snapshot.lift_nominations(lambda n: n.pod.uid == pod.uid or n.pod.priority < pod.priority)
        try:
            await self._schedule(fwk, qp, snapshot, started)
        finally:
            snapshot.close()
            restore()

    async def _schedule(self, fwk: Framework, qp: QueuedPodInfo, snapshot: Snapshot, started: float) -> None:
        pod = qp.pod
        state = fwk.cycle_state()
        diagnosis = Diagnosis(node_count=snapshot.node_count())

        classes = self.classes
        keyed = class_key(pod) if classes is not None else None
        if classes is not None and keyed is not None:
            known_skips = classes.known_skips(fwk, pod, keyed[0])
            status, allowed = fwk.run_pre_filter(state, pod, snapshot, known_skips=known_skips)
            classes.learn_skips(fwk, state, pod, *keyed)
        else:
            status, allowed = fwk.run_pre_filter(state, pod, snapshot)
        if status.code == Code.PENDING:
            # A plugin is working on the pod off the cycle (a gang's placement being solved) and
            # activates it when done: wait quietly, nothing is wrong with the pod.
            self.queue.add_unschedulable(qp, {status.plugin} - {""})
            self.explanations.put(
                Explanation(pod.namespace, pod.name, "waiting", status.message(), attempts=qp.attempts)
            )
            return
        if not status.ok:
            nominated = None
            if status.rejected:
                diagnosis.pre_filter_message = status.message()
                diagnosis.rejecting_plugins.add(status.plugin)
            if status.code == Code.UNSCHEDULABLE:
                result = await fwk.run_post_filter(state, pod, snapshot, diagnosis)
                nominated = result.nominated_node
                if result.status.code == Code.ERROR:
                    status = result.status
            await self._fail(fwk, qp, status, diagnosis, started, nominated=nominated, notes=state.notes)
            return
        preferred = fwk.run_prefer_nodes(state, pod, snapshot, allowed)
        if preferred is not None:  # a preferred node fits: it is the one, unscored
            allowed = frozenset({preferred})
        rows = snapshot.candidate_rows()
        if allowed is not None:
            keep = snapshot.rows_named(rows, allowed)
            if (~keep).any():
                reason = "node(s) didn't satisfy plugin(s) PreFilter result"
                diagnosis.reason_counts[reason] = int(np.count_nonzero(~keep))
                diagnosis.unresolvable_rows.update(rows[~keep].tolist())
            rows = rows[keep]

        view = (
            classes.view(fwk, state, pod, snapshot, rows, keyed)
            if classes is not None and preferred is None
            else None
        )
        if view is not None:
            feasible, status = fwk.run_filter(
                state, pod, snapshot, view.passed, Diagnosis(), skip=view.local_filters
            )
            if not status.ok:
                view = None  # run pod by pod: the error is the plain cycle's
            elif feasible.size == 0:
                # The diagnosis counts every plugin's rejections in plugin order; the row-local
                # ones are read from the class's records, not asked again.
                records = view.records
                feasible, status = fwk.run_filter(state, pod, snapshot, rows, diagnosis, recorded=records)
        if view is None:
            feasible, status = fwk.run_filter(state, pod, snapshot, rows, diagnosis)
        if not status.ok:
            await self._fail(fwk, qp, status, diagnosis, started, notes=state.notes)
            return
        if feasible.size == 0:
            result = await fwk.run_post_filter(state, pod, snapshot, diagnosis)
            failure = (
                result.status
                if result.status.code == Code.ERROR
                else Status.unschedulable(diagnosis.message())
            )
            await self._fail(
                fwk, qp, failure, diagnosis, started, nominated=result.nominated_node, notes=state.notes
            )
            return

        row = self._select(fwk, state, pod, snapshot, feasible, view)
        if row is None:
            await self._fail(fwk, qp, Status.error("scoring failed"), diagnosis, started)
            return
        node = snapshot.table.names[row]

        self.cache.assume(pod, node)
        status = fwk.run_reserve(state, pod, node)
        if status.ok:
            status = fwk.run_permit(state, pod, node)
        if not status.ok and status.code != Code.WAIT:
            fwk.run_unreserve(state, pod, node)
            self.cache.forget(pod.uid)
            diagnosis.rejecting_plugins.add(status.plugin)
            await self._fail(fwk, qp, status, diagnosis, started, notes=state.notes)
            return

        self._reporter.scheduled(pod.uid)
        self.metrics.attempt("scheduled", fwk.scheduler_name, time.perf_counter() - started)
        self.explanations.put(
            Explanation(
                pod.namespace,
                pod.name,
                "waiting" if status.code == Code.WAIT else "scheduled",
                f"assumed on {node}",
                node=node,
                attempts=qp.attempts,
                notes=list(state.notes),
            )
        )
        self.binder.submit(fwk, state, qp, node)

    def _select(
        self,
        fwk: Framework,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        feasible: IntArray,
        view: ClassView | None = None,
    ) -> int | None:
        count = num_feasible_nodes_to_find(feasible.size, self.percentage_of_nodes_to_score or None)
        if count < feasible.size:
            start = self._next_start % feasible.size
            end = start + count  # the ``count`` rows from ``start`` on, wrapping around
            rows = (
                feasible[start:end]
                if end <= feasible.size
                else np.concatenate((feasible[start:], feasible[: end - feasible.size]))
            )
            self._next_start = (start + count) % max(1, feasible.size)
        else:
            rows = feasible
        always = state.get(SCORE_ALWAYS)
        if always and rows.size < feasible.size:
            wanted = np.fromiter(always, dtype=np.int64, count=len(always))
            missing = np.setdiff1d(np.intersect1d(feasible, wanted), rows)
            if missing.size:
                rows = np.concatenate((rows, missing))
        if rows.size == 1:
            return int(rows[0])
        skip: frozenset[str] = frozenset()
        raw = None
        if view is not None:
            raw = view.raw_scores(rows)
            if raw is None:
                return None
            skip = view.local_scores
        if not fwk.run_pre_score(state, pod, snapshot, rows, skip=skip).ok:
            return None
        total, per_plugin, status = fwk.run_score(state, pod, snapshot, rows, raw=raw)
        if not status.ok:
            return None
        top_n = self.debug_flags.top_n_scores
        if top_n > 0:
            log_top_scores(top_n, pod.key, snapshot.table.names, rows, total, per_plugin, fwk.score_weights)
        best = np.flatnonzero(total == total.max())
        return int(rows[best[self.rng.randrange(best.size)]])

    async def _fail(
        self,
        fwk: Framework,
        qp: QueuedPodInfo,
        status: Status,
        diagnosis: Diagnosis,
        started: float,
        *,
        nominated: str | None = None,
        notes: list[str] | None = None,
    ) -> None:
        pod = qp.pod
        result: Literal["error", "unschedulable"] = "error" if status.code == Code.ERROR else "unschedulable"
        message = diagnosis.message() if status.rejected and diagnosis.reason_counts else status.message()
        if status.rejected and diagnosis.pre_filter_message:
            message = diagnosis.message()
        if result == "error":
            message = f"error in plugin {status.plugin}: {status.message()}" if status.plugin else message
            self.queue.add_backoff(qp)
        else:
            self.queue.add_unschedulable(qp, diagnosis.rejecting_plugins | ({status.plugin} - {""}))
        self.metrics.attempt(result, fwk.scheduler_name, time.perf_counter() - started)
        self.explanations.put(
            Explanation(
                pod.namespace,
                pod.name,
                result,
                message,
                attempts=qp.attempts,
                reasons=dict(sorted(diagnosis.reason_counts.items())),
                rejecting_plugins=sorted(p for p in diagnosis.rejecting_plugins if p),
                nominated_node=nominated,
                notes=list(notes or ()),
            )
        )
        self._reporter.pod_failed(pod, message, nominated)

    def forget_pod(self, uid: str) -> None:
        self._reporter.forget(uid)
