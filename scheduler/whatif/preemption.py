"""Would the job fit after preemption, and whom would it evict? Coscheduling's own victim choice
(``JobPreemption.choose``) on the scheduler's cache, with nothing evicted or nominated; for a job of
one pod of no gang, when that finds nothing (or job-level preemption is off), the profile's
pod-level preemption (DefaultPreemption's choice), as the cycle's PostFilter runs them in turn.

As the cycle's PostFilter: a job its quota refuses may only evict lower-priority pods of that quota
(the quota plugin's ``quota_release``); a quota limit that no eviction frees (its non-preemptible
min, a parent) means job-level preemption cannot help."""

from __future__ import annotations

import time
from collections.abc import Sequence

from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import PreemptionExtension, QuotaRelease
from scheduler.framework.interfaces import Diagnosis
from scheduler.solver import VictimSelection
from scheduler.whatif.answer import AfterPreemption, MemberPlacement, Victim
from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.probe import placements_of
from scheduler.whatif.workload import Job

__all__ = ["after_preemption", "choose"]


async def choose(ctx: WhatIfContext, job: Job, quota_fits: bool | None) -> tuple[VictimSelection | None, str]:
    """The victims' selection (None: none let the job fit) and, when None, why."""
    selection, why = await _job_level(ctx, job, quota_fits)
    if selection is not None or not pod_level_applies(ctx, job):
        return selection, why
    return _pod_level(ctx, job.members[0])


def pod_level_applies(ctx: WhatIfContext, job: Job) -> bool:
    """The profile's pod-level preemption would act for this job: one pod of no gang."""
    dry = ctx.pod_preemption
    return dry is not None and len(job.members) == 1 and dry.preempts_for(job.members[0])


def _pod_level(ctx: WhatIfContext, pod: PodInfo) -> tuple[VictimSelection | None, str]:
    """DefaultPreemption's choice after the pod's PreFilter and Filter, as the cycle runs them."""
    dry = ctx.pod_preemption
    assert dry is not None
    fwk = ctx.framework
    started = time.perf_counter()
    snapshot = ctx.snapshot()
    restore = snapshot.lift_nominations(lambda n: n.pod.uid == pod.uid or n.pod.priority < pod.priority)
    try:
        state = CycleState(planning=True, record_plugin_metrics=False)
        diagnosis = Diagnosis(node_count=snapshot.node_count())
        status, allowed = fwk.run_pre_filter(state, pod, snapshot)
        if status.ok:
            rows = snapshot.candidate_rows()
            if allowed is not None:
                keep = snapshot.rows_named(rows, allowed)
                diagnosis.unresolvable_rows.update(rows[~keep].tolist())
                rows = rows[keep]
            feasible, _ = fwk.run_filter(state, pod, snapshot, rows, diagnosis)
            if feasible.size:
                return None, "it fits without evicting anyone"
        elif status.rejected:
            diagnosis.pre_filter_message = status.message()
            diagnosis.rejecting_plugins.add(status.plugin)
        else:
            return None, status.message()
        choice = dry.choose_pod_victims(pod, snapshot, diagnosis)
    finally:
        snapshot.close()
        restore()
    if isinstance(choice, str):
        return None, f"{dry.name}: {choice}"
    return VictimSelection(
        victims=tuple(v.uid for v in choice.victims),
        assignment={pod.uid: choice.node},
        objective=(),
        status="GREEDY",
        solve_seconds=time.perf_counter() - started,
    ), ""


async def _job_level(
    ctx: WhatIfContext, job: Job, quota_fits: bool | None
) -> tuple[VictimSelection | None, str]:
    planner = ctx.planner
    if planner is None or not ctx.setting.preemption:
        return None, "job-level preemption is not enabled (Coscheduling enablePreemption)"
    members = list(job.members)
    trigger = members[0]
    release: QuotaRelease | None = None
    admit: PreemptionExtension | None = None
    if quota_fits is False and ctx.quota is not None:
        release = ctx.quota.quota_release(trigger, members)
        admit = ctx.quota if isinstance(ctx.quota, PreemptionExtension) else None
        if release is None or admit is None:
            return None, (
                "the quota's limit that refuses the job is one no eviction frees "
                "(its non-preemptible min or a parent quota)"
            )
    snapshot = ctx.snapshot()
    try:
        choice = await planner.choose_victims(
            trigger,
            job.id,
            members,
            snapshot,
            topology=ctx.setting.topology if job.spec is not None else None,
            spec=job.spec,
            release=release,
            admit=admit,
        )
    finally:
        snapshot.close()
    if choice.selection is None:
        return None, choice.message
    return choice.selection, ""


async def after_preemption(ctx: WhatIfContext, job: Job, quota_fits: bool | None) -> AfterPreemption:
    enabled = (ctx.planner is not None and ctx.setting.preemption) or pod_level_applies(ctx, job)
    selection, why = await choose(ctx, job, quota_fits)
    if selection is None:
        return AfterPreemption(enabled=enabled, fits=False, message=why)
    victims = _victims(ctx, selection.victims)
    return AfterPreemption(
        enabled=enabled,
        fits=True,
        victims=victims,
        jobs=sorted({v.job for v in victims}),
        placements=_placements(selection, job.members),
        message=f"evicting {len(victims)} pod(s) of {len({v.job for v in victims})} job(s)"
        if victims
        else "fits without evicting anyone",
    )


def _victims(ctx: WhatIfContext, uids: Sequence[str]) -> list[Victim]:
    out = []
    for uid in uids:
        pod = ctx.cache.pod(uid)
        if pod is None:
            continue
        out.append(
            Victim(
                pod=pod.key,
                node=ctx.cache.node_of(uid) or "",
                priority=pod.priority,
                job=_job_name(ctx, pod),
                quota=ctx.quota.quota_of(pod) if ctx.quota is not None else None,
            )
        )
    return sorted(out, key=lambda v: (v.node, v.pod))


def _job_name(ctx: WhatIfContext, pod: PodInfo) -> str:
    job = ctx.framework.job_of(pod)
    return pod.key if job == pod.uid else job


def _placements(selection: VictimSelection, members: Sequence[PodInfo]) -> list[MemberPlacement]:
    return placements_of(None, dict(selection.assignment), members)
