"""Pods held at Permit: each waits for every plugin that said WAIT to allow it, or for one reject,
or for the earliest of their timeouts. Another cycle (the gang's last member) allows or rejects."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

from scheduler.cache.pod_info import PodInfo
from scheduler.framework.status import Status

__all__ = ["WaitingPod", "WaitingPods"]


@dataclass(eq=False)
class WaitingPod:
    pod: PodInfo
    node: str
    pending: set[str]
    """Plugins that have not allowed the pod yet."""
    deadline: float
    """Loop time at which the earliest plugin timeout rejects the pod."""
    _result: asyncio.Future[Status] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def allow(self, plugin: str) -> None:
        self.pending.discard(plugin)
        if not self.pending and not self._result.done():
            self._result.set_result(Status.success())

    def reject(self, plugin: str, reason: str) -> None:
        if not self._result.done():
            self._result.set_result(Status.unschedulable(reason).with_plugin(plugin))

    async def wait(self) -> Status:
        timeout = self.deadline - asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(max(0.0, timeout)):  # not wait_for: 3.11's can swallow a cancel
                return await asyncio.shield(self._result)
        except TimeoutError:
            plugins = ", ".join(sorted(self.pending))
            status = Status.unschedulable(f"rejected due to timeout after waiting at permit ({plugins})")
            if not self._result.done():
                self._result.set_result(status)
            return self._result.result()


class WaitingPods:
    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, pod: PodInfo, node: str, plugins: dict[str, float]) -> WaitingPod:
        loop = asyncio.get_running_loop()
        waiting = WaitingPod(
            pod=pod, node=node, pending=set(plugins), deadline=loop.time() + min(plugins.values())
        )
        self._pods[pod.uid] = waiting
        return waiting

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)
