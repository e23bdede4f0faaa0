"""Does a job fit now? The placement problem the cycle's gang planner builds (same PreFilter and
Filter per member class, same free room, topology paths, spread and GPU rooms), solved by the
same solver, plus the quota check for the whole job at once; and why not, per member class.

The problem is built on the event loop without awaiting (as a cycle builds it: the snapshot is the
cache itself), with the nominations that would not block the job lifted for that moment only;
the solve runs in a worker thread on the frozen problem. Nothing is nominated or kept."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from apis.gcpause import gc_paused
from scheduler import solver
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Diagnosis
from scheduler.plugins.coscheduling.placement import TopologyError, build_problem
from scheduler.solver import Infeasible, PlacementProblem, Plan
from scheduler.whatif.answer import MemberPlacement
from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.workload import Job

__all__ = ["Probe", "Rejection", "placements_of", "probe", "rejection"]


@dataclass(frozen=True)
class Probe:
    quota: str | None
    quota_fits: bool | None
    problem: PlacementProblem | None = None
    result: Plan | Infeasible | None = None
    """None: not solved (the problem could not be posed, or the quota refused and no solve was asked)."""
    error: str | None = None
    """Why the problem could not be posed (a broken topology, no ClusterNetworkTopology)."""

    @property
    def placed(self) -> bool:
        return isinstance(self.result, Plan)

    @property
    def fits(self) -> bool:
        return self.placed and self.quota_fits is not False

    def message(self) -> str:
        if self.fits:
            return ""
        parts = []
        if self.quota_fits is False:
            parts.append(f"quota {self.quota} has no room for the whole job")
        if self.error:
            parts.append(self.error)
        elif isinstance(self.result, Infeasible):
            parts.append(self.result.message)
        return "; ".join(parts)


def build(ctx: WhatIfContext, job: Job) -> PlacementProblem | str:
    return _problem(ctx, job, filtered=True)


def free_room(ctx: WhatIfContext, job: Job) -> PlacementProblem | str:
    """The job's placement problem over every node, with no Filter, plugin room or spread asked:
    each node's free room as ``build`` sees it, and its topology path, to count what can fit at
    most (``largest.gpu_bound``)."""
    return _problem(ctx, job, filtered=False)


def _problem(ctx: WhatIfContext, job: Job, *, filtered: bool) -> PlacementProblem | str:
    """``filtered``: the members' Filters, scores, plugin rooms and spread, as the cycle's
    planner asks them; otherwise every candidate node with its free room alone."""
    fwk = ctx.framework
    members = list(job.members)
    missing = _missing_topology(ctx, job)
    if missing is not None:
        return missing
    try:
        with _planning(ctx, job) as snapshot:
            return build_problem(
                job.id,
                members,
                snapshot,
                (lambda member: fwk.feasible_rows(member, snapshot))
                if filtered
                else (lambda _: snapshot.candidate_rows()),
                topology=ctx.setting.topology if job.spec is not None else None,
                spec=job.spec,
                options=ctx.options,
                score_rows=(lambda member, rows: fwk.score_rows(member, snapshot, rows))
                if filtered
                else None,
                spread=fwk.gang_spread(members, snapshot) if filtered else (),
                member_rooms=(lambda member, nodes, limit: fwk.member_room(member, snapshot, nodes, limit))
                if filtered
                else None,
            )
    except TopologyError as exc:
        return f"gang {job.id}: {exc}"


def _missing_topology(ctx: WhatIfContext, job: Job) -> str | None:
    if job.spec is not None and ctx.setting.topology is None:
        return (
            f"gang {job.id} asks for network topology, but there is no ClusterNetworkTopology named default"
        )
    return None


@contextlib.contextmanager
def _planning(ctx: WhatIfContext, job: Job) -> Iterator[Snapshot]:
    """The cache as the job's planning cycle sees it: the nominations that would not block the
    job lifted, the room reserved for its members restored, its quota admitting it."""
    members = list(job.members)
    snapshot = ctx.snapshot()
    uids = {m.uid for m in members}
    top = max(m.priority for m in members)
    restore = snapshot.lift_nominations(lambda n: n.pod.uid in uids or n.pod.priority < top)
    try:
        ctx.framework.restore_reserved(members, snapshot)
        with ctx.admitting(uids), gc_paused():
            yield snapshot
    finally:
        snapshot.close()
        restore()


def quota_check(ctx: WhatIfContext, members: Sequence[PodInfo]) -> tuple[str | None, bool | None]:
    """(the quota the job charges, whether the whole job fits it now); (None, None): no quota."""
    quota = ctx.quota
    if quota is None:
        return None, None
    name = quota.quota_of(members[0])
    if name is None:
        return None, None
    return name, quota.fits_after_removal(members, [])


async def probe(ctx: WhatIfContext, job: Job, *, solve_over_quota: bool = True) -> Probe:
    quota, quota_fits = quota_check(ctx, job.members)
    problem = build(ctx, job)
    if isinstance(problem, str):
        return Probe(quota, quota_fits, error=problem)
    if quota_fits is False and not solve_over_quota:
        return Probe(quota, quota_fits, problem)
    result = await asyncio.to_thread(solver.solve, problem)
    return Probe(quota, quota_fits, problem, result)


def placements_of(
    problem: PlacementProblem | None, assignment: dict[str, str] | None, members: Sequence[PodInfo]
) -> list[MemberPlacement]:
    if not assignment:
        return []
    paths = {n.name: n.path for n in problem.nodes} if problem is not None else {}
    layers = [layer.name for layer in problem.layers] if problem is not None else []
    out = []
    for member in members:
        node = assignment.get(member.uid)
        if node is None:
            continue
        path = paths.get(node, ())
        out.append(MemberPlacement(pod=member.key, node=node, domain=dict(zip(layers, path, strict=False))))
    return out


@dataclass(frozen=True)
class Rejection:
    """Why one member class fits on no node: a PreFilter's message, or Filter's reasons per node."""

    member: str
    message: str
    reasons: dict[str, int]


def rejection(ctx: WhatIfContext, job: Job, problem: PlacementProblem) -> Rejection | None:
    """The first member class no node passes Filter for, with the reasons (as FailedScheduling)."""
    by_uid = {m.uid: m for m in job.members}
    empty = [g for g in problem.pod_groups if not problem.feasible_nodes.get(g.name)]
    if not empty:
        return None
    member = by_uid[empty[0].member_ids[0]]
    fwk = ctx.framework
    snapshot = ctx.snapshot()
    restore = snapshot.lift_nominations(lambda n: n.pod.uid in by_uid or n.pod.priority < member.priority)
    try:
        fwk.restore_reserved(list(job.members), snapshot)
        with ctx.admitting(set(by_uid)):
            state = CycleState(planning=True, record_plugin_metrics=False)
            diagnosis = Diagnosis(node_count=snapshot.node_count())
            status, allowed = fwk.run_pre_filter(state, member, snapshot)
            if not status.ok:
                return Rejection(member.key, status.message(), {})
            rows = snapshot.candidate_rows()
            if allowed is not None:
                keep = snapshot.rows_named(rows, allowed)
                if (~keep).any():
                    diagnosis.reason_counts["node(s) didn't satisfy plugin(s) PreFilter result"] = int(
                        np.count_nonzero(~keep)
                    )
                rows = rows[keep]
            fwk.run_filter(state, member, snapshot, rows, diagnosis)
            return Rejection(member.key, diagnosis.message(), dict(sorted(diagnosis.reason_counts.items())))
    finally:
        snapshot.close()
        restore()
