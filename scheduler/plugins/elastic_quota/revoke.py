"""The overuse revoke controller (algorithms.md 4.7): with ``monitorAllQuotas``, a quota that uses
more than its runtime for longer than ``delayEvictTime`` gives pods back.

Every ``revokePodInterval``, for every quota but the root and system quotas: while ``used <=
runtime`` on every resource, its timer is reset; once it has been over for longer than
``delayEvictTime``, the timer is reset and ``choose_revocations`` picks its pods to evict:

1. its running pods from least to most important (lower priority first, then the later started),
   non-preemptible ones skipped, are tentatively removed until the quota is within its runtime;
2. if that is not enough, all of them go; otherwise the removed ones are put back, most
   important first, wherever the quota stays within its runtime, and the rest go.

Unlike Koordinator, every resource of the runtime is compared while pods are put back (the
reference masks to the resources of the pod at hand, so a CPU-only pod could hide a GPU overuse).
Pods already terminating count as gone. Evictions go through the Eviction API, so
PodDisruptionBudgets hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from apis.extension import quota as quota_ext
from scheduler.cache.pod_info import PodInfo
from scheduler.quota import Figures

__all__ = ["RevokeController", "choose_revocations"]

log = logging.getLogger(__name__)

EXEMPT = frozenset({quota_ext.ROOT_QUOTA_NAME, quota_ext.SYSTEM_QUOTA_NAME})


def _over(used: Mapping[str, int], runtime: Mapping[str, int]) -> bool:
    return any(used.get(r, 0) > limit for r, limit in runtime.items())


def choose_revocations(
    figures: Figures,
    pods: Sequence[PodInfo],
    requests_of: Callable[[PodInfo], Mapping[str, int]] = lambda pod: pod.requests,
) -> list[PodInfo]:
    """The pods of an overused quota to evict so that it is back within its runtime."""
    runtime = figures.runtime
    used = {r: figures.used.get(r, 0) for r in runtime}
    running = []
    for pod in pods:
        if pod.pod.metadata.deletion_timestamp is not None:
            for r in runtime:
                used[r] -= requests_of(pod).get(r, 0)
        else:
            running.append(pod)
    removed: list[PodInfo] = []
    for pod in sorted(running, key=lambda p: (p.priority, -p.created, p.key)):
        if not _over(used, runtime):
            break
        if not quota_ext.is_preemptible(pod.labels):
            continue
        removed.append(pod)
        for r in runtime:
            used[r] -= requests_of(pod).get(r, 0)
    if _over(used, runtime):
        return removed
    for pod in sorted(removed, key=lambda p: (-p.priority, p.created, p.key)):
        trial = {r: used[r] + requests_of(pod).get(r, 0) for r in runtime}
        if not _over(trial, runtime):
            used = trial
            removed.remove(pod)
    return removed


class RevokeController:
    def __init__(
        self,
        figures: Callable[[], Mapping[str, Figures]],
        pods_of: Callable[[str], list[PodInfo]],
        evict: Callable[[PodInfo, str], Awaitable[None]],
        *,
        delay_seconds: float,
        interval_seconds: float,
        clock: Callable[[], float],
        requests_of: Callable[[PodInfo], Mapping[str, int]] = lambda pod: pod.requests,
    ) -> None:
        self._figures = figures
        self._requests_of = requests_of
        self._pods_of = pods_of
        self._evict = evict
        self.delay = delay_seconds
        self.interval = interval_seconds
        self._clock = clock
        self._fine_since: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    def tick(self) -> list[tuple[PodInfo, str]]:
        """(pod, quota) to evict now; resets the timers it acts on."""
        now = self._clock()
        out: list[tuple[PodInfo, str]] = []
        for name, figures in sorted(self._figures().items()):
            if name in EXEMPT or not _over(figures.used, figures.runtime):
                self._fine_since[name] = now
                continue
            since = self._fine_since.setdefault(name, now)
            if now - since < self.delay:
                continue
            self._fine_since[name] = now
            out.extend(
                (pod, name) for pod in choose_revocations(figures, self._pods_of(name), self._requests_of)
            )
        return out

    def start(self) -> None:
        """Run in the background (idempotent; needs a running event loop)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="ElasticQuota revoke")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                for pod, quota in self.tick():
                    await self._evict(pod, quota)
            except Exception:
                log.exception("the ElasticQuota revoke controller failed; it goes on")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
