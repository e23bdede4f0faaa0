"""What one what-if asks with: the profile's Framework over the scheduler's cache, the plugins that
plan whole jobs and charge quotas (found by their dry-run protocols), the solver options capped
by the what-if's own budget, and that budget's deadline."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.dry_run import JobDryRun, PlacementSetting, PodPreemptionDryRun, QuotaDryRun
from scheduler.framework.profile import ExtensionPoint
from scheduler.framework.runtime import Framework
from scheduler.solver import SolveOptions

__all__ = ["WhatIfContext"]


@dataclass
class WhatIfContext:
    framework: Framework
    cache: Cache
    planner: JobDryRun | None
    quota: QuotaDryRun | None
    setting: PlacementSetting
    deadline: float
    """``time.monotonic()`` after which the what-if computes nothing more (it says what it skipped)."""
    pod_preemption: PodPreemptionDryRun | None = None
    """The profile's pod-level preemption (DefaultPreemption), for a job of one pod of no gang."""

    @classmethod
    def of(cls, framework: Framework, cache: Cache, budget_seconds: float) -> WhatIfContext:
        planner = next((p for p in framework.plugins.values() if isinstance(p, JobDryRun)), None)
        quota = next((p for p in framework.plugins.values() if isinstance(p, QuotaDryRun)), None)
        pod_preemption = next(
            (p for p in framework.runs_at(ExtensionPoint.POST_FILTER) if isinstance(p, PodPreemptionDryRun)),
            None,
        )
        setting = (
            planner.placement_setting()
            if planner is not None
            else PlacementSetting(SolveOptions(), None, aware_network_topology=False, preemption=False)
        )
        # One solve never takes more than the what-if's whole budget, nor more than the cycle's.
        limit = min(setting.options.time_limit_seconds, budget_seconds)
        options = dataclasses.replace(setting.options, time_limit_seconds=limit)
        return cls(
            framework,
            cache,
            planner,
            quota,
            dataclasses.replace(setting, options=options),
            time.monotonic() + budget_seconds,
            pod_preemption,
        )

    @property
    def options(self) -> SolveOptions:
        return self.setting.options

    def snapshot(self) -> Snapshot:
        return Snapshot(self.cache)

    def admitting(self, uids: Collection[str]) -> AbstractContextManager[None]:
        """The quota plugin admits these pods in planning cycles: the what-if checks the quota on
        its own (``quota.fits_after_removal``), for the whole job at once, as PreFilter does for a
        gang whose members the scheduler has seen."""
        return self.quota.admitting(uids) if self.quota is not None else contextlib.nullcontext()

    def time_left(self) -> float:
        return self.deadline - time.monotonic()
