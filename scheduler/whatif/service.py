"""The what-if as the scheduler serves it: resolve the request to a job and a profile, run one
what-if at a time (each uses the solver's worker threads), and answer a model or a
``RequestError`` (the HTTP layer turns it into a 4xx naming the field)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.runtime import Framework
from scheduler.whatif.answer import WhatIfAnswer
from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.engine import what_if
from scheduler.whatif.priorities import PriorityClasses
from scheduler.whatif.request import RequestError, WhatIfRequest
from scheduler.whatif.workload import Job, job_of_objects

__all__ = ["WhatIfService"]


@dataclass
class WhatIfService:
    cache: Cache
    frameworks: Mapping[str, Framework]
    pending: Callable[[], Iterable[PodInfo]]
    """The pods waiting to be scheduled (the queue's), for ``pod``/``gang`` requests."""
    priorities: PriorityClasses = field(default_factory=PriorityClasses)
    """Fed by the app's PriorityClass watch."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def answer(self, request: WhatIfRequest) -> WhatIfAnswer:
        if not self.frameworks:
            raise RequestError("schedulerName", "the scheduler has no profile", status=503)
        try:
            await asyncio.wait_for(self._lock.acquire(), timeout=request.time_limit_seconds)
        except TimeoutError:
            raise RequestError("body", "another what-if is running; try again", status=429) from None
        try:
            framework, job = self._resolve(request)
            ctx = WhatIfContext.of(framework, self.cache, request.time_limit_seconds)
            return await what_if(ctx, job, profile=framework.scheduler_name, suggest=request.suggest)
        finally:
            self._lock.release()

    def _resolve(self, request: WhatIfRequest) -> tuple[Framework, Job]:
        first = next(iter(self.frameworks))
        if request.scheduler_name is not None and request.scheduler_name not in self.frameworks:
            raise RequestError("schedulerName", f"no profile named {request.scheduler_name}")
        job = (
            job_of_objects(request, first, self.priorities) if request.objects else self._pending_job(request)
        )
        name = request.scheduler_name or job.members[0].scheduler_name or first
        framework = self.frameworks.get(name)
        if framework is None:
            raise RequestError(
                "objects", f"the pods name schedulerName {name}, which is no profile of this scheduler"
            )
        return framework, job

    def _pending_job(self, request: WhatIfRequest) -> Job:
        if request.gang is not None:
            gang_id = request.gang if "/" in request.gang else f"{request.namespace}/{request.gang}"
            for framework in self.frameworks.values():
                asked = WhatIfContext.of(framework, self.cache, 0.0).planner
                found = asked.pending_gang(gang_id) if asked is not None else None
                if found is not None:
                    if not found.members:
                        raise RequestError("gang", f"gang {gang_id} has no pending member", status=404)
                    return Job(found.job, found.members, found.min_member, found.spec, gang=True)
            raise RequestError("gang", f"no gang {gang_id} is known to the scheduler", status=404)
        for framework in self.frameworks.values():
            planner = WhatIfContext.of(framework, self.cache, 0.0).planner
            of_gang = (
                planner.gang_id_of(request.namespace, request.pod or "") if planner is not None else None
            )
            found = planner.pending_gang(of_gang) if planner is not None and of_gang is not None else None
            if found is not None and found.members:
                return Job(found.job, found.members, found.min_member, found.spec, gang=True)
        pod = next(
            (p for p in self.pending() if p.namespace == request.namespace and p.name == request.pod), None
        )
        if pod is None:
            raise RequestError("pod", f"pod {request.namespace}/{request.pod} is not pending", status=404)
        return Job(pod.key, (pod,), 1, None, gang=False)
