"""One what-if, start to end: fits now; if not, after preemption, the dominant blocker, the largest
job that fits, and the smallest change; each part within the request's deadline (what it had no
time for is named in ``notes``)."""

from __future__ import annotations

import time

from scheduler.solver import Plan
from scheduler.whatif.answer import AfterPreemption, FitsNow, Largest, WhatIfAnswer
from scheduler.whatif.blocker import blocker_of
from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.largest import Found, largest_gpu, largest_members, largest_members_with_preemption
from scheduler.whatif.preemption import after_preemption
from scheduler.whatif.probe import placements_of, probe
from scheduler.whatif.relax import changes
from scheduler.whatif.workload import Job

__all__ = ["what_if"]


async def what_if(ctx: WhatIfContext, job: Job, *, profile: str, suggest: bool = True) -> WhatIfAnswer:
    started = time.perf_counter()
    version = ctx.cache.version
    count = len(job.members)
    now = await probe(ctx, job)
    fits_now = FitsNow(
        fits=now.fits,
        placements=placements_of(now.problem, dict(now.result.assignment), job.members)
        if now.fits and isinstance(now.result, Plan)
        else [],
        quota=now.quota,
        quota_fits=now.quota_fits,
        message=now.message(),
    )
    if now.fits:
        return WhatIfAnswer(
            job=job.id,
            profile=profile,
            members=count,
            min_member=job.min_member,
            fits_now=fits_now,
            largest=Largest(members_now=count, gpu_per_pod_now=None),
            seconds=time.perf_counter() - started,
            cache_changed=ctx.cache.version != version,
        )
    notes: list[str] = []
    after = await after_preemption(ctx, job, now.quota_fits)
    blocker = blocker_of(ctx, job, now)
    members = await largest_members(ctx, job, now.problem) if count > 1 else None
    with_preemption: Found | None = None
    if after.enabled and not after.fits and count > job.min_member and ctx.time_left() > 0:
        with_preemption = await largest_members_with_preemption(ctx, job)
    gpu = await largest_gpu(ctx, job) if ctx.time_left() > 0 else None
    gpu_preempting: tuple[str, Found] | None = None
    if after.enabled and not after.fits and gpu is not None and ctx.time_left() > 0:
        gpu_preempting = await largest_gpu(ctx, job, preempting=True)
    searches = (
        ("members", members),
        ("members with preemption", with_preemption),
        ("GPUs per pod", gpu[1] if gpu is not None else None),
        ("GPUs per pod with preemption", gpu_preempting[1] if gpu_preempting is not None else None),
    )
    for name, found in searches:
        if found is not None and not found.complete:
            notes.append(f"the search for the largest {name} stopped at the time limit")
    suggestions, skipped = await changes(ctx, job, now, blocker, members, gpu) if suggest else ([], [])
    notes.extend(skipped)
    return WhatIfAnswer(
        job=job.id,
        profile=profile,
        members=count,
        min_member=job.min_member,
        fits_now=fits_now,
        after_preemption=after,
        largest=_largest(count, members, after, with_preemption, gpu, gpu_preempting),
        blocker=blocker,
        smallest_change=suggestions[0] if suggestions else None,
        alternatives=suggestions[1:],
        notes=notes,
        seconds=time.perf_counter() - started,
        cache_changed=ctx.cache.version != version,
    )


def _largest(
    count: int,
    members: Found | None,
    after: AfterPreemption,
    with_preemption: Found | None,
    gpu: tuple[str, Found] | None,
    gpu_preempting: tuple[str, Found] | None,
) -> Largest:
    if after.fits:
        preempting: int | None = count
    elif with_preemption is not None:
        preempting = with_preemption.value
    else:
        preempting = None
    return Largest(
        members_now=members.value if members is not None else 0,
        members_with_preemption=preempting,
        gpu_resource=gpu[0] if gpu is not None else None,
        gpu_per_pod_now=gpu[1].value if gpu is not None else None,
        gpu_per_pod_with_preemption=_gpu_preempting(after, gpu_preempting),
    )


def _gpu_preempting(after: AfterPreemption, found: tuple[str, Found] | None) -> int | None:
    if after.fits:
        return None  # the whole job, as asked, fits once preemption evicts
    return found[1].value if found is not None else None
