"""The smallest change: for each kind of relaxation, the least one that makes the whole job fit,
found by solving it through the same probe as the job (``probe``: Filter, quota, solver); the
kinds are tried in the order the dominant blocker makes most relevant, and each change offered
comes with the placement that was found for it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from apis.extension import quota as quota_ext
from apis.extension.networktopology import (
    GATHER_STRATEGY_MUST,
    GATHER_STRATEGY_PREFER,
    NetworkTopologyGatherRule,
    NetworkTopologySpec,
)
from apis.meta import Taint
from apis.tolerations import NO_EXECUTE, NO_SCHEDULE, tolerations_tolerate
from scheduler.plugins.coscheduling.placement import TopologyError, layer_chain
from scheduler.solver import Plan
from scheduler.whatif.answer import Blocker, Change, ChangeKind, MemberPlacement
from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.largest import Found
from scheduler.whatif.mutate import with_quota, with_toleration
from scheduler.whatif.probe import Probe, placements_of, probe
from scheduler.whatif.workload import Job

__all__ = ["MAX_QUOTAS_TRIED", "MAX_TAINTS_TRIED", "changes"]

MAX_QUOTAS_TRIED = 16
MAX_TAINTS_TRIED = 5

_ORDER: dict[str, tuple[ChangeKind, ...]] = {
    "quota": ("quota", "members", "gpu", "topology", "toleration"),
    "filter": ("toleration", "gpu", "members", "quota", "topology"),
    "topology": ("topology", "members", "gpu", "quota", "toleration"),
    "capacity": ("members", "gpu", "topology", "quota", "toleration"),
}


async def changes(
    ctx: WhatIfContext,
    job: Job,
    now: Probe,
    blocker: Blocker | None,
    members: Found | None,
    gpu: tuple[str, Found] | None,
) -> tuple[list[Change], list[str]]:
    """The changes that make the job fit, the smallest (most relevant to the blocker) first, and
    notes on what was not tried (the deadline)."""
    order = _ORDER.get(blocker.kind if blocker is not None else "capacity", _ORDER["capacity"])
    out: list[Change] = []
    notes: list[str] = []
    for kind in order:
        if ctx.time_left() <= 0:
            notes.append(f"not tried for lack of time: {kind}")
            continue
        change: Change | None = None
        if kind == "members":
            change = _fewer_members(job, members)
        elif kind == "gpu":
            change = _less_gpu(gpu)
        elif kind == "topology":
            change = await _looser_topology(ctx, job)
        elif kind == "quota":
            change = await _other_quota(ctx, job, now)
        else:
            change = await _toleration(ctx, job)
        if change is not None:
            out.append(change)
    return out, notes


def _placements(found: Probe | None, job: Job | None) -> list[MemberPlacement]:
    if found is None or job is None or not isinstance(found.result, Plan):
        return []
    return placements_of(found.problem, dict(found.result.assignment), job.members)


def _fewer_members(job: Job, members: Found | None) -> Change | None:
    floor = job.min_member if job.gang else 1
    if members is None or members.job is None or members.value < floor:
        return None
    what = f"minMember {job.min_member}" if job.gang else "each pod runs on its own"
    return Change(
        kind="members",
        description=f"run {members.value} of the {len(job.members)} members ({what})",
        members=members.value,
        placements=_placements(members.probe, members.job),
    )


def _less_gpu(gpu: tuple[str, Found] | None) -> Change | None:
    if gpu is None:
        return None
    resource, found = gpu
    if found.job is None:
        return None
    return Change(
        kind="gpu",
        description=f"ask for {found.value} {resource} per pod",
        resource=resource,
        per_pod=found.value,
        placements=_placements(found.probe, found.job),
    )


def _looser_specs(
    spec: NetworkTopologySpec, chain: Sequence[str]
) -> Iterator[tuple[NetworkTopologySpec | None, str]]:
    """Each MustGather rule, from the lowest layer up: MustGather one layer higher, then higher
    still, then PreferGather at its own layer, then no rule at all."""
    rules = list(spec.gather_strategy or ())
    index = {name: i for i, name in enumerate(chain)}
    musts = sorted(
        (i for i, r in enumerate(rules) if r.strategy == GATHER_STRATEGY_MUST),
        key=lambda i: -index.get(rules[i].layer, -1),
    )

    def replaced(at: int, rule: NetworkTopologyGatherRule | None) -> NetworkTopologySpec | None:
        kept = [r for i, r in enumerate(rules) if i != at] + ([rule] if rule is not None else [])
        return NetworkTopologySpec(gather_strategy=kept) if kept else None

    for at in musts:
        rule = rules[at]
        position = index.get(rule.layer)
        if position is not None:
            for higher in reversed(chain[:position]):
                if any(r.layer == higher for r in rules):
                    continue
                yield (
                    replaced(at, rule.model_copy(update={"layer": higher})),
                    f"gather at {higher} instead of {rule.layer} (MustGather)",
                )
        yield (
            replaced(at, rule.model_copy(update={"strategy": GATHER_STRATEGY_PREFER})),
            f"PreferGather instead of MustGather at {rule.layer}",
        )
        yield replaced(at, None), f"drop the MustGather rule at {rule.layer}"


async def _looser_topology(ctx: WhatIfContext, job: Job) -> Change | None:
    topology = ctx.setting.topology
    if job.spec is None or topology is None:
        return None
    try:
        chain = [name for name, _ in layer_chain(topology)]
    except TopologyError:
        return None
    for spec, description in _looser_specs(job.spec, chain):
        if ctx.time_left() <= 0:
            return None
        relaxed = job.with_spec(spec)
        found = await probe(ctx, relaxed, solve_over_quota=False)
        if found.fits:
            return Change(
                kind="topology",
                description=description,
                network_topology_spec=spec.model_dump(by_alias=True, exclude_none=True) if spec else {},
                placements=_placements(found, relaxed),
            )
    return None


def _quota_candidates(ctx: WhatIfContext, job: Job, current: str | None) -> list[str]:
    if ctx.quota is None:
        return []
    figures = ctx.quota.quota_figures()
    parents = {f.parent for f in figures.values()}
    asked: Counter[str] = Counter()
    for member in job.members:
        asked.update(member.requests)
    skip = {current, quota_ext.ROOT_QUOTA_NAME, quota_ext.SYSTEM_QUOTA_NAME}

    def room(name: str) -> int:
        f = figures[name]
        limits = f.runtime if f.runtime else f.max
        spare = [limits.get(r, 0) - f.used.get(r, 0) - asked[r] for r in f.max if asked[r]]
        return min(spare, default=0)

    names = [n for n in figures if n not in skip and n not in parents]
    namespace = job.members[0].namespace if job.members else None
    # The job's own namespace's quotas first (those its team owns), then other teams', the
    # default quota (pods that name none) last; the roomiest first within each.
    quota = ctx.quota
    return sorted(
        names,
        key=lambda n: (n == quota_ext.DEFAULT_QUOTA_NAME, quota.quota_namespace(n) != namespace, -room(n), n),
    )[:MAX_QUOTAS_TRIED]


async def _other_quota(ctx: WhatIfContext, job: Job, now: Probe) -> Change | None:
    if now.quota_fits is not False:
        return None
    for name in _quota_candidates(ctx, job, now.quota):
        if ctx.time_left() <= 0:
            return None
        moved = with_quota(job, name)
        found = await probe(ctx, moved, solve_over_quota=False)
        if found.fits and found.quota == name:
            return Change(
                kind="quota",
                description=f"charge quota {name} (label {quota_ext.LABEL_QUOTA_NAME}={name})",
                quota=name,
                placements=_placements(found, moved),
            )
    return None


def _untolerated(ctx: WhatIfContext, job: Job) -> list[Taint]:
    tolerations = job.members[0].pod.spec.tolerations or []
    counts: Counter[tuple[str, str, str]] = Counter()
    snapshot = ctx.snapshot()
    for row in snapshot.candidate_rows().tolist():
        for taint in snapshot.node_at(row).taints:
            if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerations_tolerate(tolerations, taint):
                counts[taint.key, taint.value or "", taint.effect] += 1
    return [
        Taint(key=key, value=value or None, effect=effect)
        for (key, value, effect), _ in counts.most_common(MAX_TAINTS_TRIED)
    ]


async def _toleration(ctx: WhatIfContext, job: Job) -> Change | None:
    for taint in _untolerated(ctx, job):
        if ctx.time_left() <= 0:
            return None
        tolerant = with_toleration(job, taint)
        found = await probe(ctx, tolerant, solve_over_quota=False)
        if found.fits:
            toleration = {
                "key": taint.key,
                "operator": "Equal",
                "value": taint.value or "",
                "effect": taint.effect,
            }
            return Change(
                kind="toleration",
                description=f"tolerate taint {taint.key}={taint.value or ''}:{taint.effect}",
                toleration=toleration,
                placements=_placements(found, tolerant),
            )
    return None
