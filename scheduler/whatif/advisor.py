"""The smallest change for the gangs left pending, found by the scheduler itself off the scheduling
loop: every ``interval`` seconds, each gang group whose members the last cycle found unschedulable
is asked a what-if (one at a time, the what-if's own lock), at most once per interval and again
only when something free in the cluster changed. The answer is kept for ``koordctl explain`` and
written as a FailedScheduling event on the group's PodGroups, only when it says something new (or
after ``EVENT_REPEAT_SECONDS``), so a pending gang neither floods the API server nor slows a cycle.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from apis.client.backend import PODGROUPS, ClusterBackend, EventRecord, ObjectRef
from apis.extension import gang as gang_ext
from scheduler.background import BackgroundTasks
from scheduler.cache.pod_info import PodInfo
from scheduler.explain import ExplanationStore
from scheduler.reporting import EVENT_REPEAT_SECONDS
from scheduler.whatif.answer import WhatIfAnswer
from scheduler.whatif.request import RequestError, WhatIfRequest
from scheduler.whatif.service import WhatIfService

__all__ = ["Advice", "Advisor"]

log = logging.getLogger(__name__)

ADVICE_TIME_LIMIT_SECONDS = 1.0


@dataclass(frozen=True)
class Advice:
    job: str
    blocker: str
    smallest_change: str | None
    version: int
    """The cache version it was computed at."""
    at: float

    def message(self) -> str:
        change = self.smallest_change or "none found (no single relaxation makes it fit)"
        return f"what-if for {self.job}: {self.blocker}; smallest change: {change}"


@dataclass
class Advisor:
    service: WhatIfService
    explanations: ExplanationStore
    backend: ClusterBackend
    pending: Callable[[], Iterable[PodInfo]]
    interval: float
    clock: Callable[[], float]
    _by_job: dict[str, Advice] = field(default_factory=dict)
    _job_of_pod: dict[str, str] = field(default_factory=dict)
    _written: dict[str, tuple[str, float]] = field(default_factory=dict)
    _background: BackgroundTasks = field(default_factory=BackgroundTasks)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.tick()
            except Exception:
                log.exception("the what-if advisor's round failed")

    def advice_for(self, namespace: str, name: str) -> Advice | None:
        job = self._job_of_pod.get(f"{namespace}/{name}")
        return self._by_job.get(job) if job is not None else None

    async def tick(self) -> None:
        stuck: dict[str, PodInfo] = {}
        for pod in self.pending():
            explanation = self.explanations.get(pod.namespace, pod.name)
            gang = _gang_name(pod)
            if gang is None or explanation is None or explanation.result != "unschedulable":
                continue
            stuck.setdefault(f"{pod.namespace}/{gang}", pod)
        for gang_id, pod in sorted(stuck.items()):
            last = self._by_job.get(gang_id)
            now = self.clock()
            if last is not None and (
                last.version == self.service.cache.version or now - last.at < self.interval
            ):
                continue
            try:
                answer = await self.service.answer(
                    WhatIfRequest(gang=gang_id, time_limit_seconds=ADVICE_TIME_LIMIT_SECONDS)
                )
            except RequestError as exc:  # the gang went (or binds) meanwhile
                log.debug("no advice for %s: %s", gang_id, exc)
                continue
            self._keep(gang_id, answer, pod)

    def _keep(self, gang_id: str, answer: WhatIfAnswer, pod: PodInfo) -> None:
        if answer.fits_now.fits:
            self._by_job.pop(gang_id, None)
            return
        blocker = f"{answer.blocker.kind}: {answer.blocker.message}" if answer.blocker else "does not fit"
        change = answer.smallest_change.description if answer.smallest_change else None
        advice = Advice(gang_id, blocker, change, self.service.cache.version, self.clock())
        self._by_job[gang_id] = advice
        namespace = gang_id.split("/", 1)[0]
        for key in self._members(gang_id):
            self._job_of_pod[key] = gang_id
        if pod.labels.get(gang_ext.LABEL_POD_GROUP):
            self._write(gang_id, namespace, pod.labels[gang_ext.LABEL_POD_GROUP], advice)

    def _members(self, gang_id: str) -> list[str]:
        return [p.key for p in self.pending() if f"{p.namespace}/{_gang_name(p)}" == gang_id]

    def _write(self, gang_id: str, namespace: str, pod_group: str, advice: Advice) -> None:
        message = advice.message()
        last = self._written.get(gang_id)
        now = self.clock()
        if last is not None and last[0] == message and now - last[1] < EVENT_REPEAT_SECONDS:
            return
        self._written[gang_id] = (message, now)
        event = EventRecord(
            regarding=ObjectRef(
                api_version=PODGROUPS.api_version, kind="PodGroup", namespace=namespace, name=pod_group
            ),
            type="Warning",
            reason="FailedScheduling",
            message=message,
        )
        self._background.spawn(self.backend.record_event(event))


def _gang_name(pod: PodInfo) -> str | None:
    return (
        pod.labels.get(gang_ext.LABEL_POD_GROUP)
        or pod.labels.get(gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME)
        or pod.annotations.get(gang_ext.ANNOTATION_GANG_NAME)
    )
