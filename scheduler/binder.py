"""The binding cycle, run concurrently with later scheduling cycles: WaitOnPermit -> PreBind ->
Bind -> PostBind, with at most ``parallelism`` Bind calls talking to the API server at once.
PreBind is not capped here (as kube-scheduler's goroutine per binding is not): a PreBind may wait
minutes (VolumeBinding, for the PV controller), and its writes are capped by the backend.

On success the cache starts the confirmation deadline of the assumed pod and a ``Scheduled``
event is written; on failure the pod is unreserved, forgotten by the cache (its resources come
back) and sent to backoff, with a FailedScheduling event saying why.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from apis.client.backend import ClusterBackend, EventRecord, ObjectRef
from apis.client.ratelimit import ConcurrencyLimit
from scheduler.background import BackgroundTasks
from scheduler.cache.cache import Cache
from scheduler.explain import Explanation, ExplanationStore
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import HOLD_ROOM
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Status
from scheduler.metrics import SchedulerMetrics
from scheduler.model_update import updated
from scheduler.queue.scheduling_queue import QueuedPodInfo, SchedulingQueue
from scheduler.reporting import regarding

__all__ = ["Binder"]

log = logging.getLogger(__name__)


_SCHEDULED = EventRecord.model_construct(
    regarding=ObjectRef.model_construct(kind="Pod", name=""), reason="Scheduled", message="", action="Binding"
)
"""The Scheduled event each bound pod gets a copy of, with its own object and message: unvalidated
(str fields we made), and copied rather than built by ``model_construct`` (twice the cost)."""


def _result(status: Status) -> str:
    """kube-scheduler's result label: scheduled, unschedulable (a plugin said no) or error."""
    if status.ok:
        return "scheduled"
    return "unschedulable" if status.rejected else "error"


class Binder:
    def __init__(
        self,
        *,
        backend: ClusterBackend,
        cache: Cache,
        queue: SchedulingQueue,
        explanations: ExplanationStore,
        parallelism: int = 16,
        clock: Callable[[], float] = time.monotonic,
        timer: Callable[[], float] = time.perf_counter,
        on_bound: Callable[[QueuedPodInfo, str], None] | None = None,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self._backend = backend
        self._cache = cache
        self._queue = queue
        self._explanations = explanations
        self._limit = ConcurrencyLimit(parallelism)
        self._clock = clock
        self._timer = timer
        """Times the permit wait and the binding (``clock`` is the cache's, for its deadlines)."""
        self._on_bound = on_bound
        self._metrics = metrics
        self._tasks = BackgroundTasks()

    def submit(self, fwk: Framework, state: CycleState, qp: QueuedPodInfo, node: str) -> None:
        self._tasks.spawn(self._bind(fwk, state, qp, node), name=f"bind {qp.pod.key}")

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def drain(self, grace_seconds: float) -> None:
        """Let bindings in flight finish (graceful shutdown)."""
        await self._tasks.drain(grace_seconds)

    def cancel(self) -> None:
        """Cancel every binding in flight, those waiting at Permit too (leadership lost)."""
        self._tasks.cancel()

    async def _bind(self, fwk: Framework, state: CycleState, qp: QueuedPodInfo, node: str) -> None:
        pod = qp.pod
        timer = self._timer
        started = timer()
        status = await fwk.wait_on_permit(pod)
        if self._metrics is not None:
            self._metrics.permit_wait(_result(status), timer() - started)
        if status.ok:
            started = timer()
            # PreBind outside the cap: VolumeBinding's waits for the PV controller (up to
            # bindTimeoutSeconds) would otherwise hold the binding slots, and a StatefulSet's
            # claims on a slow provisioner would stop every other pod's binding. PreBind's own
            # writes are capped by the backend's write slots, as every request is.
            status = await fwk.run_pre_bind(state, pod, node)
            if status.ok:
                # The wait for a slot is not binding latency (kube-scheduler binds each pod in
                # a goroutine of its own, without one): in a burst of thousands of pods it
                # read as seconds of "binding" while each Bind took milliseconds.
                waited = timer()
                async with self._limit:
                    started += timer() - waited
                    status = await fwk.run_bind(state, pod, node)
            if self._metrics is not None:
                self._metrics.binding(_result(status), timer() - started)
        if not status.ok:
            self._failed(fwk, state, qp, node, status)
            return
        now = self._clock()
        self._cache.finish_binding(pod.uid, now)
        if self._metrics is not None:
            self._metrics.pod_scheduled(qp.attempts, max(0.0, now - qp.first_seen))
        self._queue.done(pod.uid)
        self._explanations.put(
            Explanation(
                pod.namespace,
                pod.name,
                "scheduled",
                f"bound to {node}",
                node=node,
                attempts=qp.attempts,
                notes=list(state.notes),
            )
        )
        fwk.run_post_bind(state, pod, node)
        if self._on_bound is not None:
            self._on_bound(qp, node)
        await self._backend.record_event(
            updated(
                _SCHEDULED,
                {"regarding": regarding(pod), "message": f"Successfully assigned {pod.key} to {node}"},
            )
        )

    def _failed(
        self, fwk: Framework, state: CycleState, qp: QueuedPodInfo, node: str, status: Status
    ) -> None:
        pod = qp.pod
        fwk.run_unreserve(state, pod, node)
        self._cache.forget(pod.uid)
        if state.get(HOLD_ROOM):
            self._cache.nominate(pod, node)
        reason = status.message()
        message = f"binding rejected: {reason}" if status.plugin else reason
        log.info("binding %s to %s failed: %s", pod.key, node, message)
        self._explanations.put(
            Explanation(pod.namespace, pod.name, "unschedulable", message, attempts=qp.attempts)
        )
        if status.rejected:
            self._queue.add_unschedulable(qp, {status.plugin} - {""})
        else:
            self._queue.add_backoff(qp)
        self._spawn(
            self._backend.record_event(
                EventRecord(
                    regarding=regarding(pod),
                    type="Warning",
                    reason="FailedScheduling",
                    message=message,
                )
            )
        )

    def _spawn(self, coro: Any) -> None:
        self._tasks.spawn(coro)
