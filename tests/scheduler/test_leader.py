"""LeaderElector on an in-memory Lease and a virtual clock: one leader at a time, fast hand-over on
release, take-over after expiry, and a leader that cannot renew steps down before anyone else leads."""

from __future__ import annotations

import ast
import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from apis.client import leader
from apis.client.backend import BackendError
from apis.client.leader import (
    InMemoryLeaseStore,
    LeaderElectionError,
    LeaderElector,
    LeaseConflict,
    LeaseRecord,
)

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


class FakeClock:
    """Virtual time: ``sleep`` parks the caller until ``advance`` moves the clock past its deadline."""

    def __init__(self) -> None:
        self.t = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self.t

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self.t)

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.t + seconds, next(self._seq), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Run every task until all are parked, waking sleepers in deadline order up to now + seconds."""
        end = self.t + seconds
        while True:
            await settle()
            while self._sleepers and self._sleepers[0][2].done():
                heapq.heappop(self._sleepers)
            if not self._sleepers or self._sleepers[0][0] > end:
                break
            when, _, future = heapq.heappop(self._sleepers)
            self.t = max(self.t, when)
            future.set_result(None)
        self.t = end
        await settle()


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


class FlakyStore:
    """One candidate's view of the shared store; ``broken`` simulates a network partition."""

    def __init__(self, inner: InMemoryLeaseStore) -> None:
        self.inner = inner
        self.broken = False

    def _check(self) -> None:
        if self.broken:
            raise BackendError("connection refused")

    async def get(self) -> LeaseRecord | None:
        self._check()
        return await self.inner.get()

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        return await self.inner.create(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        return await self.inner.update(record)


class Candidate:
    """An elector plus a timeline of when it started and stopped leading."""

    def __init__(
        self,
        name: str,
        store: InMemoryLeaseStore | FlakyStore,
        clock: FakeClock,
        timeline: list[tuple[float, str]],
    ) -> None:
        self.name = name
        self.clock = clock
        self.timeline = timeline
        self.elector = LeaderElector(store, identity=name, clock=clock)
        self.leading = False
        self.work_cancelled = False
        self.task: asyncio.Task[None] | None = None

    async def _work(self) -> None:
        self.leading = True
        self.timeline.append((self.clock.t, f"{self.name} started"))
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.work_cancelled = True
            raise

    def _stopped(self) -> None:
        self.leading = False
        self.timeline.append((self.clock.t, f"{self.name} stopped"))

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.ensure_future(self.elector.run(self._work, self._stopped))
        return self.task


def never_two_leaders(timeline: list[tuple[float, str]]) -> bool:
    leaders: set[str] = set()
    for _, entry in sorted(timeline, key=lambda e: e[0]):
        name, what = entry.split()
        if what == "started":
            leaders.add(name)
            if len(leaders) > 1:
                return False
        else:
            leaders.discard(name)
    return True


async def stop(*tasks: asyncio.Task[None] | None) -> None:
    for task in tasks:
        if task is not None and not task.done():
            task.cancel()
    await asyncio.gather(*(t for t in tasks if t is not None), return_exceptions=True)


async def test_of_two_candidates_exactly_one_leads_and_keeps_renewing() -> None:
    clock, store = FakeClock(), InMemoryLeaseStore()
    timeline: list[tuple[float, str]] = []
    a, b = Candidate("a", store, clock, timeline), Candidate("b", store, clock, timeline)
    a.start(), b.start()
    await clock.advance(120)
    assert [a.leading, b.leading].count(True) == 1
    assert store.record is not None
    leader = a if a.leading else b
    assert store.record.holder_identity == leader.name
    assert store.record.lease_transitions == 0
    assert store.record.renew_time is not None
    assert store.record.renew_time >= EPOCH + timedelta(seconds=clock.t - 2)  # renewed every retry_period
    assert leader.elector.is_leader
    assert len(timeline) == 1
    await stop(a.task, b.task)


async def test_the_standby_takes_over_quickly_when_the_leader_releases() -> None:
    clock, store = FakeClock(), InMemoryLeaseStore()
    timeline: list[tuple[float, str]] = []
    a = Candidate("a", store, clock, timeline)
    a.start()
    await clock.advance(1)
    assert a.leading
    b = Candidate("b", store, clock, timeline)
    b.start()
    await clock.advance(30)
    assert not b.leading

    released_at = clock.t
    await stop(a.task)  # graceful shutdown: releases the lease
    assert a.work_cancelled
    assert store.record is not None
    assert store.record.holder_identity == ""
    await clock.advance(10)
    assert b.leading
    started_b = next(t for t, e in timeline if e == "b started")
    assert started_b - released_at <= 2 * (1 + 1.2) + 0.01  # one retry, well before the 15 s expiry
    assert store.record.holder_identity == "b"
    assert store.record.lease_transitions == 1
    assert never_two_leaders(timeline)
    await stop(b.task)


async def test_a_partitioned_leader_steps_down_before_the_standby_takes_over() -> None:
    clock, shared = FakeClock(), InMemoryLeaseStore()
    timeline: list[tuple[float, str]] = []
    a_view = FlakyStore(shared)
    a = Candidate("a", a_view, clock, timeline)
    a.start()
    await clock.advance(1)
    b = Candidate("b", shared, clock, timeline)
    b.start()
    await clock.advance(20)
    assert a.leading
    assert not b.leading

    a_view.broken = True
    broken_at = clock.t
    await clock.advance(30)
    assert not a.leading
    assert a.work_cancelled
    assert a.task is not None
    assert a.task.done()
    assert a.task.exception() is None  # run() returned: the process exits and restarts
    assert b.leading
    stopped_a = next(t for t, e in timeline if e == "a stopped")
    started_b = next(t for t, e in timeline if e == "b started")
    assert stopped_a - broken_at <= 10  # within renew_deadline of the last good renewal
    assert started_b - stopped_a >= 15 - 10 - 2  # the lease_duration - renew_deadline margin (less one retry)
    assert never_two_leaders(timeline)
    assert shared.record is not None
    assert shared.record.holder_identity == "b"
    assert shared.record.lease_transitions == 1
    await stop(b.task)


async def test_a_leader_that_sees_another_holder_steps_down_at_once() -> None:
    clock, store = FakeClock(), InMemoryLeaseStore()
    timeline: list[tuple[float, str]] = []
    a = Candidate("a", store, clock, timeline)
    a.start()
    await clock.advance(1)
    assert store.record is not None
    # Someone (a misconfigured replica, an operator) overwrote the lease.
    await store.update(
        LeaseRecord(holder_identity="intruder", resource_version=store.record.resource_version)
    )
    await clock.advance(3)
    assert not a.leading
    assert a.task is not None
    assert a.task.done()


async def test_two_candidates_racing_for_an_expired_lease_cannot_both_win() -> None:
    store = InMemoryLeaseStore()
    await store.create(LeaseRecord(holder_identity="old"))
    stale = await store.get()
    assert stale is not None
    await store.update(LeaseRecord(holder_identity="a", resource_version=stale.resource_version))
    with pytest.raises(LeaseConflict):
        await store.update(LeaseRecord(holder_identity="b", resource_version=stale.resource_version))
    with pytest.raises(LeaseConflict):
        await store.create(LeaseRecord(holder_identity="b"))


async def test_a_failing_leader_task_releases_and_reraises() -> None:
    clock, store = FakeClock(), InMemoryLeaseStore()
    elector = LeaderElector(store, identity="a", clock=clock)
    stopped: list[bool] = []

    async def crash() -> None:
        raise RuntimeError("boom")

    task = asyncio.ensure_future(elector.run(crash, lambda: stopped.append(True)))
    await clock.advance(1)
    with pytest.raises(RuntimeError, match="boom"):
        await task
    assert stopped == [True]
    assert store.record is not None
    assert store.record.holder_identity == ""


async def test_a_missing_namespace_is_fatal() -> None:
    class NoNamespace(InMemoryLeaseStore):
        async def create(self, record: LeaseRecord) -> LeaseRecord:
            raise LeaderElectionError("namespace 'koordinator-system' does not exist")

    never: Callable[[], Awaitable[None]] = asyncio.Event().wait  # type: ignore[assignment]
    with pytest.raises(LeaderElectionError, match="does not exist"):
        await LeaderElector(NoNamespace(), clock=FakeClock()).run(never, lambda: None)


@pytest.mark.parametrize(
    ("lease", "renew", "retry"), [(10, 10, 2), (15, 2, 2), (15, 10, 0)], ids=["lease", "renew", "retry"]
)
def test_durations_are_validated(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        LeaderElector(InMemoryLeaseStore(), lease_duration=lease, renew_deadline=renew, retry_period=retry)


def test_identity_defaults_to_hostname_and_uuid() -> None:
    a, b = LeaderElector(InMemoryLeaseStore()), LeaderElector(InMemoryLeaseStore())
    assert a.identity != b.identity
    assert "_" in a.identity


def test_the_election_talks_to_the_api_server_only_through_the_backend_lease_store() -> None:
    """The Lease I/O lives in apis.client.lease; the election logic imports no API client."""
    tree = ast.parse(Path(leader.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not {m for m in imported if m and m.split(".")[0] in ("kubernetes_asyncio", "aiohttp")}
    assert "apis.client.lease" in imported


async def test_campaign_leads_again_after_a_lost_term_with_fresh_work() -> None:
    """A leader that cannot renew steps down (its work is cancelled and has ended before anything
    else happens), stands by, and takes its own lease back once the store answers again."""
    clock, shared = FakeClock(), InMemoryLeaseStore()
    view = FlakyStore(shared)
    elector = LeaderElector(view, identity="a", clock=clock)
    terms: list[float] = []
    ended: list[float] = []
    losses: list[float] = []

    async def work() -> None:
        terms.append(clock.t)
        try:
            await asyncio.Event().wait()
        finally:
            ended.append(clock.t)

    def stopped() -> None:
        assert not elector.is_leader

    def lost() -> None:
        assert len(ended) == len(terms)  # the lost term's work has ended
        losses.append(clock.t)

    task = asyncio.ensure_future(elector.campaign(work, stopped, lost))
    await clock.advance(1)
    assert elector.is_leader
    assert terms == [0.0]
    assert shared.record is not None
    first_acquired = shared.record.acquire_time

    view.broken = True
    await clock.advance(30)
    assert not elector.is_leader
    assert not task.done()  # standing by, not exited
    assert len(losses) == 1
    assert len(ended) == 1
    assert len(terms) == 1

    view.broken = False
    await clock.advance(5)
    assert elector.is_leader
    assert len(terms) == 2
    assert shared.record.holder_identity == "a"
    assert shared.record.acquire_time is not None
    assert first_acquired is not None
    assert shared.record.acquire_time > first_acquired  # a new term
    await stop(task)


async def test_campaign_does_not_take_the_lease_from_a_standby_that_holds_it() -> None:
    clock, shared = FakeClock(), InMemoryLeaseStore()
    timeline: list[tuple[float, str]] = []
    a_view = FlakyStore(shared)
    a = Candidate("a", a_view, clock, timeline)
    a.task = asyncio.ensure_future(a.elector.campaign(a._work, a._stopped))
    await clock.advance(1)
    b = Candidate("b", shared, clock, timeline)
    b.start()
    await clock.advance(5)
    assert a.leading
    assert not b.leading

    a_view.broken = True
    await clock.advance(30)
    assert b.leading
    assert not a.leading
    a_view.broken = False
    await clock.advance(60)
    assert b.leading
    assert not a.leading
    assert not a.task.done()
    assert never_two_leaders(timeline)

    await stop(b.task)  # b releases: a leads again
    await clock.advance(10)
    assert a.leading
    assert never_two_leaders(timeline)
    await stop(a.task)
