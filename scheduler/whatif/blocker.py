"""The dominant blocker: what refuses the job first, in the order the cycle meets it (the quota at
PreFilter, then a member class that no node passes Filter for, then the placement solver's rule)."""

from __future__ import annotations

from scheduler.solver import Infeasible
from scheduler.whatif.answer import Blocker
from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.probe import Probe, rejection
from scheduler.whatif.workload import Job

__all__ = ["blocker_of"]

_TOPOLOGY_REASONS = frozenset({"MUST_GATHER", "POD_COUNT_MULTIPLE", "TOPOLOGY_SPREAD"})


def blocker_of(ctx: WhatIfContext, job: Job, now: Probe) -> Blocker | None:
    if now.fits:
        return None
    if now.quota_fits is False:
        return Blocker(
            kind="quota", message=f"quota {now.quota} has no room for the whole job ({len(job.members)} pods)"
        )
    if now.error is not None:
        kind = "topology" if "topology" in now.error.lower() else "unknown"
        return Blocker(kind=kind, message=now.error)
    if now.problem is not None:
        found = rejection(ctx, job, now.problem)
        if found is not None:
            return Blocker(kind="filter", message=f"{found.member}: {found.message}", reasons=found.reasons)
    if isinstance(now.result, Infeasible):
        kind = "topology" if now.result.reason in _TOPOLOGY_REASONS else "capacity"
        return Blocker(kind=kind, message=now.result.message)
    return Blocker(kind="unknown", message=now.message() or "the job does not fit")
