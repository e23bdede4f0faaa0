"""Would the job fit after job-level preemption, and whom would it evict? Coscheduling's own victim
choice (``JobPreemption.choose``) on the scheduler's cache, with nothing evicted or nominated.

As the cycle's PostFilter: a job its quota refuses may only evict lower-priority pods of that quota
(the quota plugin's ``quota_release``); a quota limit that no eviction frees (its non-preemptible
min, a parent) means preemption cannot help."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.cache.pod_info import PodInfo
from scheduler.framework.extensions import PreemptionExtension, QuotaRelease
from scheduler.solver import VictimSelection
from scheduler.whatif.answer import AfterPreemption, MemberPlacement, Victim
from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.probe import placements_of
from scheduler.whatif.workload import Job

__all__ = ["after_preemption", "choose"]


async def choose(ctx: WhatIfContext, job: Job, quota_fits: bool | None) -> tuple[VictimSelection | None, str]:
    """The victims' selection (None: none let the job fit) and, when None, why."""
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
    enabled = ctx.planner is not None and ctx.setting.preemption
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
