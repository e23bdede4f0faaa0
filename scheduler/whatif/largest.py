"""The largest job that fits: the most members (in rank order), or the largest per-pod GPU amount,
each found by bisection where every answer given was solved (a count reported as fitting was
placed by the solver; one past it was not). Stops at the what-if's deadline with what it has."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from scheduler.solver import PlacementProblem
from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.gpu_bound import gpu_bound
from scheduler.whatif.mutate import gpu_request, with_gpu
from scheduler.whatif.preemption import choose
from scheduler.whatif.probe import Probe, probe
from scheduler.whatif.workload import Job

__all__ = ["Found", "largest_gpu", "largest_members", "largest_members_with_preemption", "member_bound"]


@dataclass(frozen=True)
class Found:
    value: int
    """The largest value that fits (0: none of those tried)."""
    job: Job | None
    """The job at that value, and how it fits (None when nothing fits)."""
    probe: Probe | None
    complete: bool
    """False: the deadline cut the search short (``value`` fits, something larger might too)."""


async def _bisect(
    ctx: WhatIfContext,
    values: Sequence[int],
    check: Callable[[int], Awaitable[tuple[bool, Probe | None, Job]]],
    *,
    largest_first: bool = False,
) -> Found:
    """The largest of ``values`` (ascending) that ``check`` accepts, assuming acceptance is
    monotone (a smaller job fits wherever a larger one does). ``largest_first``: the largest
    value is likely to fit (a counting bound cut the values), so it is tried first."""
    lo, hi = 0, len(values) - 1
    best: Found = Found(0, None, None, True)
    if largest_first and values and ctx.time_left() > 0:
        ok, found, job = await check(values[-1])
        if ok:
            return Found(values[-1], job, found, True)
        hi -= 1
    while lo <= hi:
        if ctx.time_left() <= 0:
            return Found(best.value, best.job, best.probe, False)
        mid = (lo + hi + 1) // 2
        ok, found, job = await check(values[mid])
        if ok:
            best = Found(values[mid], job, found, True)
            lo = mid + 1
        else:
            hi = mid - 1
    return best


async def largest_members(ctx: WhatIfContext, job: Job, problem: PlacementProblem | None = None) -> Found:
    """The most of the job's members (fewer than all) that fit now. ``problem``: the whole job's
    placement problem (its fits-now probe): no more members than `member_bound` are tried."""
    members = job.members
    top = len(members) - 1 if problem is None else min(len(members) - 1, member_bound(problem))

    async def check(count: int) -> tuple[bool, Probe | None, Job]:
        smaller = job.with_members(members[:count])
        found = await probe(ctx, smaller, solve_over_quota=False)
        return found.fits, found, smaller

    return await _bisect(ctx, range(1, top + 1), check, largest_first=problem is not None)


def member_bound(problem: PlacementProblem) -> int:
    """The most members of the job that can fit, by counting each class's room in each MustGather
    domain (the nodes that pass its Filters, their free room and the plugins' rooms, as in
    ``problem``; topology spread, apart rules and packing relaxed). A prefix of the members has
    the same classes and nodes (Filter judges each member alone), so no count above it fits."""
    best = 0
    for nodes in problem.must_gather_domains.values():
        total = 0
        for group in problem.pod_groups:
            room = 0
            for node in nodes:
                if not problem.feasible(group, node):
                    continue
                fits = group.count
                for need, have in zip(group.request.values, node.free.values, strict=True):
                    if need > 0:
                        fits = min(fits, max(have, 0) // need)
                room += fits
                if room >= group.count:
                    break
            total += min(room, group.count)
        best = max(best, total)
    return best


async def largest_members_with_preemption(ctx: WhatIfContext, job: Job) -> Found:
    """The most members (fewer than all, at least minMember) that fit once preemption evicts."""
    members = job.members

    async def check(count: int) -> tuple[bool, Probe | None, Job]:
        smaller = job.with_members(members[:count])
        found = await probe(ctx, smaller, solve_over_quota=False)
        if found.fits:
            return True, found, smaller
        selection, _ = await choose(ctx, smaller, found.quota_fits)
        return selection is not None, None, smaller

    return await _bisect(ctx, range(job.min_member, len(members)), check)


async def largest_gpu(ctx: WhatIfContext, job: Job, *, preempting: bool = False) -> tuple[str, Found] | None:
    """(the GPU resource, the largest per-pod amount below the asked one with which the whole job
    fits now, or with ``preempting`` once job-level preemption evicts); None: the job asks for no
    GPU. Whole cards are tried, and halves and quarters of a card for the resources that share one."""
    asked = gpu_request(job)
    if asked is None:
        return None
    resource, amount, card = asked
    values = sorted({v for v in _gpu_values(amount, card) if 0 < v < amount})
    if not preempting:  # evictions free room that counting the free room now does not see
        bound = gpu_bound(ctx, job, resource, values)
        values = [v for v in values if v <= bound]

    async def check(per_pod: int) -> tuple[bool, Probe | None, Job]:
        smaller = with_gpu(job, resource, per_pod)
        found = await probe(ctx, smaller, solve_over_quota=False)
        if found.fits or not preempting:
            return found.fits, found, smaller
        selection, _ = await choose(ctx, smaller, found.quota_fits)
        return selection is not None, None, smaller

    return resource, await _bisect(ctx, values, check, largest_first=not preempting)


def _gpu_values(amount: int, card: int) -> list[int]:
    whole = list(range(card, amount, card))
    shares = [card // 2, card // 4] if card > 1 else []
    return whole + shares
