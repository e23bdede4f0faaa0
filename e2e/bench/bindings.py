"""Bindings as the harness sees them: a watch on one namespace that notes when each pod was first
seen with ``spec.nodeName``, and the sustained rate of those bindings."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp

from apis.client.backend import BackendError
from e2e.bench.harness import BenchError, log_progress
from e2e.bench.kube_api import Api

__all__ = ["BindWatcher", "binding_profile", "sustained_rate"]


class BindWatcher:
    """Counts the pods of one namespace whose ``spec.nodeName`` is set, with the time each was first
    seen bound. ``start`` lists (pods bound already count at that moment) and keeps watching.

    ``path`` and ``is_bound`` let a subclass follow other objects placed on a node (a
    Reservation's ``status.nodeName``)."""

    def __init__(self, api: Api, namespace: str, expected: int, *, path: str | None = None) -> None:
        self.api = api
        self.path = path or f"/api/v1/namespaces/{namespace}/pods"
        self.expected = expected
        self.times: list[float] = []
        self.bound: set[str] = set()
        self.all_bound = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._rv = ""

    async def start(self) -> None:
        await self._relist()
        self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def is_bound(self, obj: dict[str, Any]) -> bool:
        return bool((obj.get("spec") or {}).get("nodeName"))

    def _seen(self, name: str, at: float) -> None:
        if name not in self.bound:
            self.bound.add(name)
            self.times.append(at)
            if len(self.bound) >= self.expected:
                self.all_bound.set()

    async def _relist(self) -> None:
        items, self._rv = await self.api.list(self.path)
        now = time.monotonic()
        for obj in items:
            if self.is_bound(obj):
                self._seen(obj["metadata"]["name"], now)

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                async for line in self.api.watch_lines(self.path, self._rv):
                    failures = 0
                    # Only events that can carry a binding (or a resourceVersion to resume from) are
                    # decoded: the pods' creation events are skipped cheaply.
                    if b'"nodeName"' not in line and b'"BOOKMARK"' not in line and b'"ERROR"' not in line:
                        continue
                    at = time.monotonic()
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        if obj.get("code") == 410:
                            await self._relist()
                            break
                        raise BackendError(f"watch {self.path}: {obj.get('message')}", status=obj.get("code"))
                    self._rv = (obj.get("metadata") or {}).get("resourceVersion") or self._rv
                    if event.get("type") in ("ADDED", "MODIFIED") and self.is_bound(obj):
                        self._seen(obj["metadata"]["name"], at)
            except (aiohttp.ClientError, BackendError, TimeoutError) as exc:
                failures += 1
                log_progress(f"watch {self.path} interrupted ({exc}); resuming")
                if isinstance(exc, BackendError) and exc.status == 410:
                    await self._relist()
                await asyncio.sleep(min(5.0, 0.2 * 2**failures))

    async def wait(self, stall_timeout: float, on_progress: Callable[[int], None]) -> None:
        """Until every expected pod is bound; BenchError after ``stall_timeout`` s without progress."""
        last_count, last_change = len(self.bound), time.monotonic()
        while not self.all_bound.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.all_bound.wait(), timeout=2.0)
            count = len(self.bound)
            on_progress(count)
            if count != last_count:
                last_count, last_change = count, time.monotonic()
            elif time.monotonic() - last_change > stall_timeout:
                raise BenchError(
                    f"{self.path}: no new binding for {stall_timeout:.0f}s, {count}/{self.expected} bound"
                )


def sustained_rate(times: Sequence[float]) -> float | None:
    """Bindings per second between the 10th and the 90th percentile binding."""
    n = len(times)
    if n < 10:
        return None
    ordered = sorted(times)
    lo, hi = int(n * 0.1), math.ceil(n * 0.9) - 1
    span = ordered[hi] - ordered[lo]
    return (hi - lo) / span if span > 0 else None


def binding_profile(times: Sequence[float], start: float, step: float = 0.5) -> list[int]:
    """Bindings in each ``step`` seconds from ``start`` to the last binding: where a run's rate
    ramps up, holds and tails off (a binding before ``start`` counts in the first slot)."""
    if not times:
        return []
    slots = [0] * (int((max(times) - start) // step) + 1)
    for at in times:
        slots[max(0, int((at - start) // step))] += 1
    return slots
