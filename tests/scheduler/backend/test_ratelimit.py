"""The client rate limiter lets a burst through, then spaces requests at 1/qps."""

from __future__ import annotations

import pytest

from apis.client import ratelimit
from apis.client.ratelimit import TokenBucket


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(ratelimit.asyncio, "sleep", fake.sleep)
    return fake


async def test_burst_then_one_request_per_interval(fake: FakeTime) -> None:
    bucket = TokenBucket(qps=10, burst=3, clock=fake.clock)
    for _ in range(5):
        await bucket.acquire()
    assert fake.sleeps == [0.1, 0.1]


async def test_idle_time_refills_up_to_the_burst(fake: FakeTime) -> None:
    bucket = TokenBucket(qps=10, burst=2, clock=fake.clock)
    await bucket.acquire()
    await bucket.acquire()
    fake.now += 60
    for _ in range(2):
        await bucket.acquire()
    assert fake.sleeps == []
    await bucket.acquire()
    assert fake.sleeps == [0.1]


async def test_zero_qps_is_unlimited(fake: FakeTime) -> None:
    bucket = TokenBucket(qps=0, burst=1, clock=fake.clock)
    for _ in range(100):
        await bucket.acquire()
    assert fake.sleeps == []


async def test_concurrency_limit_admits_at_most_the_limit_in_arrival_order() -> None:
    import asyncio

    from apis.client.ratelimit import ConcurrencyLimit

    limit = ConcurrencyLimit(2)
    inside: list[int] = []
    peak = 0
    order: list[int] = []
    release = asyncio.Event()

    async def holder(i: int) -> None:
        nonlocal peak
        async with limit:
            order.append(i)
            inside.append(i)
            peak = max(peak, len(inside))
            await release.wait()
            inside.remove(i)

    tasks = [asyncio.create_task(holder(i)) for i in range(6)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert order == [0, 1]
    release.set()
    await asyncio.gather(*tasks)
    assert peak == 2
    assert order == [0, 1, 2, 3, 4, 5]
