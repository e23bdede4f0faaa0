"""What the user is told about a pod the scheduler did not place, and about objects it refused.

One ``Reporter`` per scheduler, shared by the loop, the queue and the informer glue:

- ``pod_failed``: a scheduling cycle found no place (the loop); a ``FailedScheduling`` Warning
  event and a ``PodScheduled=False`` condition, written again with an unchanged message at most
  every ``EVENT_REPEAT_SECONDS``, as kube-scheduler's event recorder would;
- ``pod_gated``: PreEnqueue kept the pod out of the queue. Malformed input (a pod whose requests
  are out of range, a malformed gang annotation) is refused: the same event and condition plus an
  explanation for ``koordctl explain``. A pod merely waiting (for its gang's other members) only
  gets an explanation: Koordinator does not warn for that either;
- ``object_refused``: a bound pod or a node with amounts out of range, reported once per message.

Writes run in the background and never fail the caller: without a running event loop (a unit
test driving the queue synchronously) they are skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from apis.client.backend import RESERVATIONS, ClusterBackend, EventRecord, ObjectRef
from apis.extension.reservation import ANNOTATION_RESERVATION_NAME, is_reserve_pod
from scheduler.background import BackgroundTasks
from scheduler.cache.pod_info import PodInfo
from scheduler.explain import Explanation, ExplanationStore
from scheduler.framework.status import Status
from scheduler.model_update import updated
from scheduler.queue.scheduling_queue import QueuedPodInfo

__all__ = ["EVENT_REPEAT_SECONDS", "Reporter", "is_malformed_input", "regarding"]

log = logging.getLogger(__name__)

EVENT_REPEAT_SECONDS = 60.0
"""A FailedScheduling event with an unchanged message is written again at most this often."""


def is_malformed_input(status: Status) -> bool:
    """Whether a PreEnqueue gate is the pod's own fault (it will not pass until the pod changes)
    rather than a wait: PreEnqueue plugins say so with a rejection code, a wait is PENDING."""
    return status.rejected


def regarding(pod: PodInfo) -> ObjectRef:
    """The object events about ``pod`` are written on: the pod, or the Reservation a reserve pod
    stands in for. Built unvalidated: every field is a str of the validated pod, and every bound
    pod gets one."""
    if is_reserve_pod(pod.annotations):
        return ObjectRef.model_construct(
            api_version=RESERVATIONS.api_version,
            kind=RESERVATIONS.kind,
            name=pod.annotations.get(ANNOTATION_RESERVATION_NAME, pod.name),
            uid=pod.uid,
        )
    return updated(_POD_REF, {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid})


_POD_REF = ObjectRef.model_construct(kind="Pod", namespace="", name="", uid="")
"""What ``regarding`` copies with a pod's names: ``model_construct`` per pod cost twice as much."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class _LastFailure:
    message: str
    written_at: float
    cause: str
    """The cycle's own message, before the what-if advice was added to it."""


class Reporter:
    def __init__(
        self,
        backend: ClusterBackend,
        explanations: ExplanationStore,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.explanations = explanations
        self._clock = clock
        self._last_failure: dict[str, _LastFailure] = {}
        self._refused: dict[str, str] = {}
        """Object uid -> the message already reported for it by ``object_refused``."""
        self._background = BackgroundTasks()
        self.advice: Callable[[PodInfo], str | None] | None = None
        """The what-if advisor's line for the pod's gang (its smallest change), appended to the
        pod's FailedScheduling message; None: no advisor."""

    # ---- pods the scheduler did not place ----------------------------------------------------

    def pod_failed(self, pod: PodInfo, message: str, nominated: str | None = None) -> None:
        """FailedScheduling event and PodScheduled=False condition, without flooding the API."""
        cause = message
        advice = self.advice(pod) if self.advice is not None else None
        if advice:
            message = f"{message} {advice}"
        now = self._clock()
        last = self._last_failure.get(pod.uid)
        if last is not None and last.message == message and now - last.written_at < EVENT_REPEAT_SECONDS:
            return
        self._last_failure[pod.uid] = _LastFailure(message, now, cause)
        event = EventRecord(
            regarding=regarding(pod), type="Warning", reason="FailedScheduling", message=message
        )
        if is_reserve_pod(pod.annotations):
            self._spawn(self.backend.record_event(event))
            self._spawn(self._reservation_unschedulable(pod, message))
            return
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": _now(),
        }
        status_patch: dict[str, Any] = {"status": {"conditions": [condition]}}
        if nominated:
            status_patch["status"]["nominatedNodeName"] = nominated
        self._spawn(self.backend.record_event(event))
        self._spawn(self._patch_status(pod, status_patch))

    def pod_gated(self, qp: QueuedPodInfo, status: Status) -> None:
        """PreEnqueue (or the queue's own range check) kept the pod out; ``qp.gated_by`` says why."""
        pod = qp.pod
        message = qp.gated_by or status.message()
        if not is_malformed_input(status):
            self.explanations.put(
                Explanation(pod.namespace, pod.name, "waiting", message, attempts=qp.attempts)
            )
            return
        self.explanations.put(
            Explanation(
                pod.namespace,
                pod.name,
                "unschedulable",
                message,
                attempts=qp.attempts,
                rejecting_plugins=[status.plugin] if status.plugin else [],
            )
        )
        self.pod_failed(pod, message)

    def advice_changed(self, pod: PodInfo) -> None:
        """The advisor has a new smallest change for the pod's gang: report the pod's last failure
        again with it now, instead of at the pod's next cycle (nothing if it has not failed)."""
        last = self._last_failure.get(pod.uid)
        if last is not None:
            self.pod_failed(pod, last.cause)

    def scheduled(self, uid: str) -> None:
        """The pod was placed: a later failure is reported afresh."""
        self._last_failure.pop(uid, None)

    def forget(self, uid: str) -> None:
        """The object is gone."""
        self._last_failure.pop(uid, None)
        self._refused.pop(uid, None)

    # ---- objects the scheduler cannot account ------------------------------------------------

    def object_refused(self, ref: ObjectRef, reason: str, message: str) -> None:
        """A Warning event on ``ref`` (a bound pod, a node), once per message; also logged."""
        key = ref.uid or f"{ref.kind}/{ref.namespace or ''}/{ref.name}"
        if self._refused.get(key) == message:
            return
        self._refused[key] = message
        log.warning("%s %s: %s", ref.kind, ref.name, message)
        self._spawn(
            self.backend.record_event(
                EventRecord(regarding=ref, type="Warning", reason=reason, message=message)
            )
        )

    # ---- writes ------------------------------------------------------------------------------

    async def _patch_status(self, pod: PodInfo, patch: dict[str, Any]) -> None:
        try:
            await self.backend.patch_pod_status(pod.pod, patch)
        except Exception as exc:  # the pod may be gone; the next attempt writes again
            log.info("could not update the status of %s: %s", pod.key, exc)

    async def _reservation_unschedulable(self, pod: PodInfo, message: str) -> None:
        """Koordinator's record of an unschedulable reservation: phase stays Pending, condition
        Scheduled=False with reason Unschedulable."""
        condition = {
            "type": "Scheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": _now(),
            "lastTransitionTime": _now(),
        }
        name = regarding(pod).name
        try:
            await self.backend.patch_custom(
                RESERVATIONS, None, name, {"status": {"conditions": [condition]}}, subresource="status"
            )
        except Exception as exc:  # the reservation may be gone; the next attempt writes again
            log.info("could not update the status of reservation %s: %s", name, exc)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            coro.close()  # no loop to write from: a synchronous unit test
            return
        self._background.spawn(coro)
