"""koord-scheduler behind leader election: a fresh ``SchedulerApp`` for every term of leadership.

kube-scheduler exits when it loses its Lease (``OnStoppedLeading`` is fatal) and relies on being
restarted. koord-scheduler instead stops and stands by in the same process, because a leader that
cannot renew for ``renewDeadline`` is not always a dead one: a restarting API server answers 403
until its RBAC caches sync, which under load lasts longer than a short ``renewDeadline``.

Losing the Lease (``LeaderElector.run`` calls ``on_stopped_leading``) ends the term at once:

- the term's backend is fenced (``scheduler.backend.fence``): no Binding, patch, eviction, status
  write or Event of that term reaches the API server any more, whichever task tries;
- the app is aborted: its queue closes and its bindings in flight (those waiting at Permit too) are
  cancelled, not drained; the elector cancels ``app.run``, which cancels the scheduling loop, the
  informers and housekeeping, and closes the plugins;
- ``/readyz`` turns false (``ready``), the queue and cache gauges go to 0, and the loss is counted
  (``koord_scheduler_leadership_losses_total``).

Only once all of that has ended does the elector campaign again. Winning a later term builds a new
app with ``build`` exactly as a freshly started process would (new cache, queue, informers and
plugins, listed from the API server), so nothing of the lost term (assumed pods, nominations, pods
waiting at Permit, backoffs) leaks into the new one. A standby that took the Lease meanwhile keeps
it: this process schedules again only after it has acquired the Lease through the usual
conditional write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from apis.client.backend import ClusterBackend
from apis.client.leader import LeaderElector
from scheduler.app import SchedulerApp
from scheduler.backend.fence import FencedBackend
from scheduler.metrics import SchedulerMetrics
from scheduler.whatif.answer import WhatIfAnswer
from scheduler.whatif.request import RequestError, WhatIfRequest

__all__ = ["AppFactory", "ElectedScheduler"]

log = logging.getLogger(__name__)

AppFactory = Callable[[ClusterBackend], SchedulerApp]
"""Builds a new SchedulerApp on the given backend (``__main__`` builds it from the configuration)."""


class ElectedScheduler:
    """Runs ``build(backend)`` apps: one for ever without an elector, else one per term of leadership."""

    def __init__(
        self,
        build: AppFactory,
        backend: ClusterBackend,
        metrics: SchedulerMetrics,
        elector: LeaderElector | None = None,
    ) -> None:
        self._build = build
        self._backend = backend
        self._metrics = metrics
        self.elector = elector
        self.app: SchedulerApp | None = None
        """The current term's app; None before the first term and between terms."""
        self._fence: FencedBackend | None = None
        self._stop: asyncio.Event | None = None
        self.terms = 0
        """Terms of leadership started (apps built)."""
        self.losses = 0
        """Terms that ended because the Lease was lost."""
        self.lost = False
        """Set when a term ends because the Lease was lost, until the next term starts."""
        self._campaign_began = time.monotonic()
        if elector is not None:
            metrics.set_leader(elector.lease, False)

    @property
    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader

    @property
    def ready(self) -> bool:
        """``/readyz``: the current app has synced its informers, and it is the leader's."""
        app = self.app
        return app is not None and not app.aborted and app.ready and self.is_leader

    def explain(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The current term's explanation of the pod (none between terms)."""
        app = self.app
        if app is None:
            return None
        found = app.explanations.lookup(namespace, name)
        advice = app.advisor.advice_for(namespace, name) if app.advisor is not None else None
        if found is not None and advice is not None:
            found["smallest_change"] = advice.message()
        return found

    async def what_if(self, request: WhatIfRequest) -> WhatIfAnswer:
        """The current term's what-if (none between terms: 503)."""
        app = self.app
        if app is None or not self.is_leader:
            raise RequestError("body", "the scheduler is not leading: no cache to ask", status=503)
        if not app.ready:
            raise RequestError("body", "the scheduler's caches are not synced yet", status=503)
        return await app.whatif.answer(request)

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop`` is set (graceful: bindings in flight finish) or this is cancelled (the
        elector releases the Lease); a lost Lease is not an end but a pause."""
        self._stop = stop
        if self.elector is None:
            self.app = self._build(self._backend)
            self.terms += 1
            await self.app.run(stop)
            return
        elector = self.elector
        log.info("campaigning for lease %s as %s", elector.lease, elector.identity)
        self._campaign_began = time.monotonic()
        await elector.campaign(lambda: self._lead(stop), self._stopped_leading, self._lost)

    async def _lead(self, stop: asyncio.Event) -> None:
        assert self.elector is not None
        self.terms += 1
        self.lost = False
        waited = time.monotonic() - self._campaign_began
        log.info(
            "leading (term %d) after %.2fs of campaigning",
            self.terms,
            waited,
            extra={"startup": {"leader_seconds": round(waited, 3)}},
        )
        fence = FencedBackend(self._backend, f"term {self.terms} of {self.elector.identity}")
        app = self._build(fence)
        self._fence, self.app = fence, app
        self._metrics.set_leader(self.elector.lease, True)
        if self.terms > 1:
            log.warning("leading again (term %d): scheduling with a fresh cache and queue", self.terms)
        await app.run(stop)

    def _stopped_leading(self) -> None:
        """Called by the elector at once when the term ends, before its work has wound down."""
        if self.elector is not None:
            self._metrics.set_leader(self.elector.lease, False)
        if self._stop is not None and self._stop.is_set():
            return  # graceful shutdown: bindings in flight finish while we still hold the Lease
        if self._fence is not None:
            self._fence.fence()
        if self.app is not None:
            self.app.abort()
        self._metrics.set_pending(0, 0, 0, 0)
        self._metrics.set_cache_size(0, 0, 0)

    def _lost(self) -> None:
        """The term ended because the Lease was lost, and its work has ended."""
        self.losses += 1
        self.lost = True
        self._campaign_began = time.monotonic()
        self._metrics.leadership_lost()
        refused = self._fence.refused if self._fence is not None else 0
        log.warning(
            "stopped scheduling: the lease was lost (%d writes of the lost term refused); "
            "standing by to campaign again",
            refused,
        )
        self.app, self._fence = None, None
