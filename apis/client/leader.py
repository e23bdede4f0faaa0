"""Leader election through a coordination.k8s.io/v1 Lease, as client-go's ``leaderelection`` does it.

Several koord-scheduler (or koord-descheduler) replicas may run; only the holder of the Lease
works. The rules that keep two replicas from ever scheduling at once:

- **Conditional writes.** The Lease is created (409 if another candidate created it first) or
  updated with its resourceVersion as a precondition (409 if anyone wrote it since we read it), so
  of two candidates racing for an expired or released Lease exactly one wins.
- **Local clocks only.** Expiry is judged from when *this* process last saw the record change
  (``observed_at`` on the monotonic clock) plus the record's ``leaseDurationSeconds``, never from the
  ``renewTime`` written by another machine, so clock skew between nodes cannot shorten a lease.
- **Step down before the lease can expire.** The leader renews every ``retry_period``; if no
  renewal has succeeded for ``renew_deadline`` (measured from when the last successful renewal was
  *sent*), it stops leading. A standby can only take over ``lease_duration`` after it saw that
  renewal, so ``lease_duration - renew_deadline`` is the safety margin for stopping the work.
- **Release on graceful shutdown.** The leader clears ``holderIdentity`` (and sets a 1 s duration)
  when it is cancelled, so a standby takes over at its next retry instead of waiting for expiry.
- **A lost term is over before the next one starts.** ``campaign`` runs terms of leadership in one
  process: after losing the Lease it waits until the work of the lost term has ended, then stands
  by and campaigns again like any other candidate (an API server that restarts answers 403 for a
  while, longer than ``renew_deadline`` under load, and a leader must survive that).

The Lease I/O sits behind ``apis.client.lease.LeaseStore`` (the Kubernetes one on the
backend's ApiClient, an in-memory one for tests) and time behind ``Clock``, so the election logic
here is unit tested with ``InMemoryLeaseStore`` and a fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Final, Protocol

from apis.client.backend import BackendError
from apis.client.lease import (
    InMemoryLeaseStore,
    LeaderElectionError,
    LeaseConflict,
    LeaseRecord,
    LeaseStore,
)

__all__ = [
    "Clock",
    "InMemoryLeaseStore",
    "LeaderElectionError",
    "LeaderElector",
    "LeaseConflict",
    "LeaseRecord",
    "LeaseStore",
    "SystemClock",
    "default_identity",
]

log = logging.getLogger(__name__)

JITTER_FACTOR: Final = 1.2
"""As client-go: acquisition retries wait ``retry_period * (1 + rand * 1.2)``."""


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never jumps (expiry and deadlines)."""
        ...

    def now(self) -> datetime:
        """Wall time, only written into the Lease for humans (``kubectl get lease``)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def default_identity() -> str:
    """``<hostname>_<uuid>`` as kube-scheduler: unique even for two replicas on one host or a restart."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    """Campaign for the Lease in ``store`` and run the leader's work only while holding it.

    ``store`` is a ``apis.client.lease.LeaseStore``: ``KubernetesLeaseStore`` on the
    ``KubernetesBackend.api_client`` in production, ``InMemoryLeaseStore`` in tests.
    """

    def __init__(
        self,
        store: LeaseStore,
        *,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Clock | None = None,
        release_on_cancel: bool = True,
    ) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError(f"renew_deadline must be greater than retry_period * {JITTER_FACTOR}")
        if retry_period <= 0:
            raise ValueError("retry_period must be positive")
        self._store = store
        self.lease = str(store)
        """The Lease, for logs (``namespace/name`` for the Kubernetes store)."""
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self._clock: Clock = clock or SystemClock()
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0
        self._leading = False

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def observed_record(self) -> LeaseRecord | None:
        """The Lease as last read or written by this elector."""
        return self._observed

    async def run(
        self,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], None],
    ) -> bool:
        """One term: acquire, run ``on_started_leading`` as a task while renewing, and stop when the
        lease is lost, when the task ends (its exception is re-raised) or when ``run`` is cancelled
        (the lease is released). On stopping, the task is cancelled and ``on_stopped_leading`` called
        at once (before the task has wound down: it must stop the work's writes synchronously); it is
        called only if leadership was acquired.

        Returns True if the lease was lost, and then only once the task has ended: nothing of the
        lost term runs any more. False if the task ended by itself."""
        await self._acquire()
        self._leading = True
        log.info("%s: became leader of lease %s", self.identity, self.lease)
        leading: asyncio.Future[None] = asyncio.ensure_future(on_started_leading())
        renewing = asyncio.ensure_future(self._renew_until_lost())
        lost = False
        try:
            await asyncio.wait({leading, renewing}, return_when=asyncio.FIRST_COMPLETED)
            lost = renewing.done()
        finally:
            self._leading = False
            renewing.cancel()
            leading.cancel()
            try:
                on_stopped_leading()
            finally:
                # Give the work a bounded time to wind down before the lease is released.
                await asyncio.wait(
                    {leading, renewing}, timeout=max(self.lease_duration - self.renew_deadline, 1)
                )
                if renewing.done() and not renewing.cancelled() and renewing.exception() is not None:
                    log.error("%s: lease renewal failed: %s", self.identity, renewing.exception())
                if not lost and self.release_on_cancel and leading.done():
                    await self._release()
                if lost and not leading.done():
                    # Nothing of a lost term may overlap the next one (``campaign``).
                    log.warning("%s: waiting for the lost term's work to end", self.identity)
                    await asyncio.wait({leading})
        failure = leading.exception() if leading.done() and not leading.cancelled() else None
        if failure is not None:
            raise failure
        return lost

    async def campaign(
        self,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], None],
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        """Terms of leadership (``run``) in one process, until the work ends by itself, raises, or
        this is cancelled. After a lost lease (``on_lost`` is called once the lost term's work has
        ended) the elector stands by and campaigns again like any other candidate: a standby that
        took the lease meanwhile keeps it until it expires or is released, and if nobody did, this
        elector takes its own lease back at its next try. ``on_started_leading`` is called afresh
        for every term."""
        while await self.run(on_started_leading, on_stopped_leading):
            if on_lost is not None:
                on_lost()
            log.warning("%s: lost lease %s; standing by and campaigning again", self.identity, self.lease)
            await self._clock.sleep(self.retry_period)

    async def _acquire(self) -> None:
        while True:
            if await self._attempt(self._clock.monotonic() + self.renew_deadline):
                return
            await self._clock.sleep(self.retry_period * (1 + random.random() * JITTER_FACTOR))

    async def _renew_until_lost(self) -> None:
        """Renew every retry_period; return once no renewal succeeded for renew_deadline."""
        while True:
            await self._clock.sleep(self.retry_period)
            deadline = self._last_renew + self.renew_deadline
            while not await self._attempt(deadline):
                holder = self._observed.holder_identity if self._observed else ""
                if holder and holder != self.identity:
                    log.warning("%s: lease taken over by %s; stepping down", self.identity, holder)
                    return
                if self._clock.monotonic() + self.retry_period >= deadline:
                    log.warning(
                        "%s: failed to renew lease %s within %.1fs; stepping down",
                        self.identity,
                        self.lease,
                        self.renew_deadline,
                    )
                    return
                await self._clock.sleep(self.retry_period)

    async def _attempt(self, deadline: float) -> bool:
        """One tryAcquireOrRenew bounded by ``deadline``; transport failures count as a failed try."""
        remaining = deadline - self._clock.monotonic()
        if remaining <= 0:
            return False
        try:
            async with asyncio.timeout(remaining):  # not wait_for: 3.11's can swallow a cancel
                return await self._try_acquire_or_renew()
        except LeaderElectionError:
            raise
        except (BackendError, OSError, TimeoutError) as exc:
            log.warning("%s: lease %s: %s", self.identity, self.lease, exc)
            return False
        except Exception:
            # A bug must not kill the renew loop silently: count it as a failed try, so a leader
            # that keeps failing steps down at the renew deadline.
            log.exception("%s: lease %s: unexpected error", self.identity, self.lease)
            return False

    async def _try_acquire_or_renew(self) -> bool:
        sent = self._clock.monotonic()
        now = self._clock.now()
        record = await self._store.get()
        if record is None:
            fresh = LeaseRecord(
                holder_identity=self.identity,
                lease_duration_seconds=max(1, round(self.lease_duration)),
                acquire_time=now,
                renew_time=now,
            )
            try:
                created = await self._store.create(fresh)
            except LeaseConflict:
                return False
            self._observe(created)
            self._last_renew = sent
            return True
        if self._observed is None or record.resource_version != self._observed.resource_version:
            self._observe(record)
        held_by_other = bool(record.holder_identity) and record.holder_identity != self.identity
        if held_by_other and self._observed_at + record.lease_duration_seconds > self._clock.monotonic():
            return False
        mine = record.holder_identity == self.identity
        # Our own record while we do not lead: a term lost without anybody else leading since (the
        # update below is conditional on that record's version), so a new term starts.
        renewal = mine and self._leading
        desired = replace(
            record,
            holder_identity=self.identity,
            lease_duration_seconds=max(1, round(self.lease_duration)),
            renew_time=now,
            acquire_time=record.acquire_time if renewal else now,
            lease_transitions=record.lease_transitions if mine else record.lease_transitions + 1,
        )
        try:
            updated = await self._store.update(desired)
        except LeaseConflict:
            return False
        self._observe(updated)
        self._last_renew = sent
        return True

    def _observe(self, record: LeaseRecord) -> None:
        self._observed = record
        self._observed_at = self._clock.monotonic()

    async def _release(self) -> None:
        """Hand the lease back (empty holder, 1 s duration) if this elector still holds it."""
        record = self._observed
        if record is None or record.holder_identity != self.identity:
            return
        now = self._clock.now()
        released = replace(
            record, holder_identity="", lease_duration_seconds=1, acquire_time=now, renew_time=now
        )
        try:
            async with asyncio.timeout(self.renew_deadline):
                self._observe(await self._store.update(released))
            log.info("%s: released lease %s", self.identity, self.lease)
        except (LeaseConflict, BackendError, OSError, TimeoutError) as exc:
            log.warning("%s: could not release lease %s: %s", self.identity, self.lease, exc)
