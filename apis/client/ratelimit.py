"""client-go's token-bucket rate limiter: ``qps`` requests per second on average, bursts of
``burst``; callers wait for a token instead of being refused. ``qps <= 0`` means unlimited."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["ConcurrencyLimit", "TokenBucket"]


class TokenBucket:
    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.qps)
        self._updated = now

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:  # first come, first served
            self._refill()
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self.qps)
                self._refill()
            self._tokens -= 1


class ConcurrencyLimit:
    """At most ``limit`` holders at once, first come first served, O(1) per acquire.

    asyncio.Semaphore.acquire (Python 3.11) scans every waiter on each call; with thousands of
    bindings or events queued that turns quadratic. A queue of tokens wakes exactly one waiter.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._tokens: asyncio.Queue[None] = asyncio.Queue()
        for _ in range(limit):
            self._tokens.put_nowait(None)

    async def __aenter__(self) -> None:
        await self._tokens.get()

    async def __aexit__(self, *exc: object) -> None:
        self._tokens.put_nowait(None)
