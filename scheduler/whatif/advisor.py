"""The smallest change for the gangs left pending, found by the scheduler itself off the scheduling
loop: every ``interval`` seconds, each gang group whose members the last cycle found unschedulable
is asked a what-if (one at a time, the what-if's own lock), at most once per interval and again
only when something free in the cluster changed. The answer is kept for ``koordctl explain`` and
written as a FailedScheduling event on the group's PodGroups, only when it says something new (or
after ``EVENT_REPEAT_SECONDS``), so a pending gang neither floods the API server nor slows a cycle.

It is also written where a user looks first: the PodGroup's ``Schedulable`` condition (False,
reason ``Unschedulable``, the same message; True, reason ``NoPendingMembers``, once no member is
pending; written only when it changes), and each pending member's own FailedScheduling event,
whose message gets the advice appended (``Reporter.advice``), written again at once when the
advice changes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from apis.client.backend import PODGROUPS, ClusterBackend, EventRecord, ObjectRef
from apis.extension import gang as gang_ext
from scheduler.background import BackgroundTasks
from scheduler.cache.pod_info import PodInfo
from scheduler.explain import ExplanationStore
from scheduler.reporting import EVENT_REPEAT_SECONDS, Reporter
from scheduler.whatif.answer import WhatIfAnswer
from scheduler.whatif.request import MAX_TIME_LIMIT_SECONDS, RequestError, WhatIfRequest
from scheduler.whatif.service import WhatIfService

__all__ = ["CONDITION_SCHEDULABLE", "NO_PENDING", "UNSCHEDULABLE", "Advice", "Advisor"]

log = logging.getLogger(__name__)

ADVICE_TIME_LIMIT_SECONDS = 1.0
CONDITION_SCHEDULABLE = "Schedulable"
"""The PodGroup condition the advisor writes (``status.conditions``)."""
UNSCHEDULABLE = "Unschedulable"
NO_PENDING = "NoPendingMembers"
NO_PENDING_MESSAGE = "no member of the gang is pending"


@dataclass(frozen=True)
class Advice:
    job: str
    blocker: str
    smallest_change: str | None
    version: int
    """The cache version it was computed at."""
    at: float
    seconds: float = ADVICE_TIME_LIMIT_SECONDS
    """The time limit the what-if had."""
    cut: bool = False
    """The deadline stopped the search before every relaxation was tried: asked again, with
    twice the time (until the what-if's limit), even if nothing changed in the cluster."""

    @property
    def will_retry(self) -> bool:
        return self.cut and self.seconds < MAX_TIME_LIMIT_SECONDS

    def message(self) -> str:
        if self.smallest_change is not None:
            change = self.smallest_change
        elif self.cut:
            again = " (searching again with more time)" if self.will_retry else ""
            change = f"none found within {self.seconds:g} s{again}"
        else:
            change = "none found (no single relaxation makes it fit)"
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
    reporter: Reporter | None = None
    """Told when a gang's advice changes, so its members' FailedScheduling messages carry it."""
    _written: dict[str, tuple[str, float]] = field(default_factory=dict)
    _conditions: dict[str, _Written] = field(default_factory=dict)
    """Gang -> the ``Schedulable`` condition last written on its PodGroup."""
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

    def advice_line(self, pod: PodInfo) -> str | None:
        """What a member's FailedScheduling message gets appended (``Reporter.advice``)."""
        advice = self.advice_for(pod.namespace, pod.name)
        return advice.message() if advice is not None else None

    async def tick(self) -> None:
        stuck: dict[str, PodInfo] = {}
        waiting: set[str] = set()
        for pod in self.pending():
            gang = _gang_name(pod)
            if gang is not None:
                waiting.add(f"{pod.namespace}/{gang}")
            explanation = self.explanations.get(pod.namespace, pod.name)
            if gang is None or explanation is None or explanation.result != "unschedulable":
                continue
            stuck.setdefault(f"{pod.namespace}/{gang}", pod)
        for gang_id, written in list(self._conditions.items()):
            if gang_id not in waiting and written.status == "False":
                self._by_job.pop(gang_id, None)
                self._condition(gang_id, written.pod_group, "True", NO_PENDING, NO_PENDING_MESSAGE)
        for gang_id, pod in sorted(stuck.items()):
            last = self._by_job.get(gang_id)
            now = self.clock()
            if last is not None and (
                (last.version == self.service.cache.version and not last.will_retry)
                or now - last.at < self.interval
            ):
                continue
            seconds = ADVICE_TIME_LIMIT_SECONDS
            if last is not None and last.will_retry:
                seconds = min(2 * last.seconds, MAX_TIME_LIMIT_SECONDS)
            try:
                answer = await self.service.answer(WhatIfRequest(gang=gang_id, time_limit_seconds=seconds))
            except RequestError as exc:  # the gang went (or binds) meanwhile
                log.debug("no advice for %s: %s", gang_id, exc)
                continue
            self._keep(gang_id, answer, pod, seconds)

    def _keep(self, gang_id: str, answer: WhatIfAnswer, pod: PodInfo, seconds: float) -> None:
        if answer.fits_now.fits:
            self._by_job.pop(gang_id, None)
            return
        blocker = f"{answer.blocker.kind}: {answer.blocker.message}" if answer.blocker else "does not fit"
        change = answer.smallest_change.description if answer.smallest_change else None
        cut = change is None and bool(answer.notes)
        before = self._by_job.get(gang_id)
        if cut and before is not None and before.smallest_change is not None and before.blocker == blocker:
            # A search its deadline cut (a loaded machine) proves nothing: the change found before
            # for the same blocker stands, and is asked again with more time.
            change = before.smallest_change
        advice = Advice(gang_id, blocker, change, self.service.cache.version, self.clock(), seconds, cut)
        self._by_job[gang_id] = advice
        namespace = gang_id.split("/", 1)[0]
        members = self._members(gang_id)
        for member in members:
            self._job_of_pod[member.key] = gang_id
        if pod.labels.get(gang_ext.LABEL_POD_GROUP):
            pod_group = pod.labels[gang_ext.LABEL_POD_GROUP]
            self._write(gang_id, namespace, pod_group, advice)
            self._condition(gang_id, pod_group, "False", UNSCHEDULABLE, advice.message())
        if self.reporter is not None and (before is None or before.message() != advice.message()):
            for member in members:
                self.reporter.advice_changed(member)

    def _members(self, gang_id: str) -> list[PodInfo]:
        return [p for p in self.pending() if f"{p.namespace}/{_gang_name(p)}" == gang_id]

    def _condition(self, gang_id: str, pod_group: str, status: str, reason: str, message: str) -> None:
        """Write the PodGroup's ``Schedulable`` condition when it says something new; the
        transition time moves only when the status does (metav1.Condition)."""
        last = self._conditions.get(gang_id)
        if last is not None and (last.status, last.reason, last.message) == (status, reason, message):
            return
        since = last.since if last is not None and last.status == status else _now()
        self._conditions[gang_id] = _Written(pod_group, status, reason, message, since)
        condition = {
            "type": CONDITION_SCHEDULABLE,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since,
        }
        namespace = gang_id.split("/", 1)[0]
        patch = {"status": {"conditions": [condition]}}
        self._background.spawn(self._patch(namespace, pod_group, patch))

    async def _patch(self, namespace: str, pod_group: str, patch: dict[str, Any]) -> None:
        try:
            await self.backend.patch_custom(PODGROUPS, namespace, pod_group, patch)
        except Exception as exc:  # the PodGroup went meanwhile, or the API server refused
            log.info("could not write the Schedulable condition of %s/%s: %s", namespace, pod_group, exc)

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


@dataclass(frozen=True)
class _Written:
    pod_group: str
    status: str
    reason: str
    message: str
    since: str


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _gang_name(pod: PodInfo) -> str | None:
    return (
        pod.labels.get(gang_ext.LABEL_POD_GROUP)
        or pod.labels.get(gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME)
        or pod.annotations.get(gang_ext.ANNOTATION_GANG_NAME)
    )
