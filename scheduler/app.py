"""Wiring: backend, cache, queue, one framework per profile, the loop, the binder, the informers.

``koord-scheduler`` (``__main__``) runs a ``SchedulerApp`` on the Kubernetes backend behind
leader election and an HTTP server; ``koordctl simulate`` runs the same app on the in-memory
backend. Nothing here knows which backend it has.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from apis.client.backend import NODES, PODS, ClusterBackend, EventType, ResourceType, WatchEvent
from apis.client.eviction import EvictionService
from apis.core import Pod
from apis.features import FeatureGates
from apis.gcpause import SurvivorFreezer, freezing_lists
from scheduler.binder import Binder
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo, decoding_once
from scheduler.cache.snapshot import Snapshot
from scheduler.config import BIND_CONCURRENCY
from scheduler.debug import DebugFlags
from scheduler.events import EventHandlers
from scheduler.explain import ExplanationStore
from scheduler.framework.equivalence import EquivalenceClasses
from scheduler.framework.handle import Handle, Informers
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.profile import ResolvedProfile
from scheduler.framework.registry import Registry
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Status
from scheduler.loop import SchedulingLoop
from scheduler.metrics import SchedulerMetrics
from scheduler.queue.scheduling_queue import QueuedPodInfo, SchedulingQueue
from scheduler.reporting import Reporter
from scheduler.startup_spans import seconds_since_process_start
from scheduler.whatif.advisor import Advisor
from scheduler.whatif.priorities import PRIORITYCLASSES
from scheduler.whatif.service import WhatIfService

__all__ = ["AppSettings", "SchedulerApp"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppSettings:
    profiles: tuple[ResolvedProfile, ...]
    parallelism: int = 16
    bind_concurrency: int = BIND_CONCURRENCY
    """Bind calls talking to the API server at once. kube-scheduler binds each pod in a goroutine of
    its own (no cap); ours are asyncio tasks capped here, since each needs an HTTP/1.1 connection.
    PreBind is not under this cap: a PreBind waiting for its volumes must not hold a slot."""
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    percentage_of_nodes_to_score: int | None = None
    assumed_pod_ttl_seconds: float = 30.0
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    """Koordinator's feature gates (``--feature-gates``), handed to every plugin."""
    equivalence_classes: bool = True
    """Pods of one template share their row-local Filter and Score work (``framework.equivalence``);
    off: every pod is filtered and scored alone (the same placements, at the plain cost)."""
    whatif_advice_seconds: float = 0.0
    """Every this many seconds, each unschedulable gang's smallest change (``whatif.advisor``); 0: off."""
    freeze_synced_objects: bool = False
    """Once the caches are synced, move every object alive then out of the cyclic collector's reach
    (``gc.freeze``): the cache's tens of thousands of pods stay alive for the whole term, and each
    full collection walked them all, a pause of about 80 ms of CPU at 1,000 nodes that landed in
    scheduling cycles and what-ifs. Reference counting still frees them; a frozen object that ends
    in a garbage cycle is freed when the next term unfreezes. Until then the first lists' pages and
    their handling are frozen as each ends (``apis.gcpause.freezing_lists``), about a fifth of
    decoding them. After it, what survives each full collection is frozen too (the pods bound
    since, their PodInfos and cache entries: full collections were about 15% of a cycle's CPU at
    20,000 pods), and everything is handed back to the collector every ``gc_thaw_seconds``, so a
    garbage cycle among frozen objects lives no longer than that (``apis.gcpause.SurvivorFreezer``).
    The process's own setting (``koord-scheduler`` sets it), not a test's, since freezing is
    process-wide."""
    gc_thaw_seconds: float = 600.0


@dataclass
class SchedulerApp:
    settings: AppSettings
    backend: ClusterBackend
    registry: Registry
    metrics: SchedulerMetrics
    clock: Callable[[], float] = time.monotonic
    on_bound: Callable[[QueuedPodInfo, str], None] | None = None
    debug_flags: DebugFlags = field(default_factory=DebugFlags)
    """Shared with the HTTP server, which sets them at run time (``/debug/flags/...``)."""
    cache: Cache = field(init=False)
    queue: SchedulingQueue = field(init=False)
    frameworks: dict[str, Framework] = field(init=False)
    informers: Informers = field(init=False)
    handles: list[Handle] = field(init=False)
    explanations: ExplanationStore = field(init=False)
    handlers: EventHandlers = field(init=False)
    loop: SchedulingLoop = field(init=False)
    whatif: WhatIfService = field(init=False)
    advisor: Advisor | None = field(init=False, default=None)
    """Read-only what-ifs on this app's cache and profiles (``POST /debug/whatif``)."""
    binder: Binder = field(init=False)
    aborted: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.cache = Cache(assumed_ttl=self.settings.assumed_pod_ttl_seconds)
        self.explanations = ExplanationStore()
        self.informers = Informers()
        reporter = Reporter(self.backend, self.explanations)
        self.frameworks = {}
        for profile in self.settings.profiles:
            handle = Handle(
                backend=self.backend,
                snapshot=lambda: Snapshot(self.cache),
                clock=self.clock,
                scheduler_name=profile.scheduler_name,
                informers=self.informers,
                activate=lambda uids: self.queue.activate(uids),
                nominator=self.cache,
                stand_ins=_StandIns(self),
                evictor=EvictionService(self.backend, profile.scheduler_name),
                solver_metrics=self.metrics,
                features=self.settings.feature_gates,
            )
            self.frameworks[profile.scheduler_name] = Framework(
                profile,
                self.registry,
                handle,
                observe=self.metrics.observe_plugin,
                observe_point=self.metrics.observe_extension_point,
            )
        self.handles = [fwk.handle for fwk in self.frameworks.values()]
        first = next(iter(self.frameworks.values()))
        self.queue = SchedulingQueue(
            sort_key=first.queue_sort_key,
            pre_enqueue=self._pre_enqueue,
            plugin_events=self._plugin_events,
            initial_backoff=self.settings.pod_initial_backoff_seconds,
            max_backoff=self.settings.pod_max_backoff_seconds,
            clock=self.clock,
            on_gated=reporter.pod_gated,
            on_incoming=self.metrics.queue_incoming,
        )
        self.binder = Binder(
            backend=self.backend,
            cache=self.cache,
            queue=self.queue,
            explanations=self.explanations,
            parallelism=self.settings.bind_concurrency,
            clock=self.clock,
            on_bound=self.on_bound,
            metrics=self.metrics,
        )
        self.loop = SchedulingLoop(
            backend=self.backend,
            cache=self.cache,
            queue=self.queue,
            frameworks=self.frameworks,
            binder=self.binder,
            metrics=self.metrics,
            explanations=self.explanations,
            percentage_of_nodes_to_score=self.settings.percentage_of_nodes_to_score,
            debug_flags=self.debug_flags,
            reporter=reporter,
            classes=EquivalenceClasses() if self.settings.equivalence_classes else None,
        )
        self.whatif = WhatIfService(
            self.cache, self.frameworks, lambda: (qp.pod for qp in self.queue.pending())
        )
        self.informers.subscribe(PRIORITYCLASSES, self.whatif.priorities.on_event)
        self.advisor = (
            Advisor(
                self.whatif,
                self.explanations,
                self.backend,
                lambda: (qp.pod for qp in self.queue.pending()),
                self.settings.whatif_advice_seconds,
                self.clock,
                reporter=reporter,
            )
            if self.settings.whatif_advice_seconds > 0
            else None
        )
        if self.advisor is not None:
            reporter.advice = self.advisor.advice_line
        self.handlers = EventHandlers(
            backend=self.backend,
            cache=self.cache,
            queue=self.queue,
            scheduler_names=tuple(self.frameworks),
            on_pod_gone=self._pod_gone,
            pod_listeners=self._listeners(PODS),
            reporter=reporter,
        )
        self._custom_watches = {
            resource: self._listeners(resource) for resource in self.informers.resources()
        }
        for watched in (PODS, NODES):
            self._custom_watches.pop(watched, None)
        self._custom_synced = {resource: asyncio.Event() for resource in self._custom_watches}

    def _listeners(self, resource: ResourceType[Any]) -> list[Callable[[WatchEvent[Any]], None]]:
        return list(self.informers.listeners(resource))

    async def _watch_custom(self, resource: ResourceType[Any]) -> None:
        """Feed a custom resource's events to the plugins that subscribed; each change is a cluster
        event that may make rejected pods schedulable."""
        async for event in self.backend.watch(resource):
            for listener in self._custom_watches[resource]:
                try:
                    listener(event)
                except Exception:
                    log.exception("a %s listener failed", resource.kind)
            if event.type is EventType.REPLACED:
                self._custom_synced[resource].set()
            self.queue.on_event(ClusterEvent.CUSTOM_RESOURCE)

    def _pre_enqueue(self, pod: PodInfo) -> Status:
        fwk = self.frameworks.get(pod.scheduler_name)
        return fwk.run_pre_enqueue(pod) if fwk is not None else Status.success()

    def _plugin_events(self, name: str) -> ClusterEvent:
        for fwk in self.frameworks.values():
            plugin = fwk.plugin(name)
            if plugin is not None:
                register = getattr(plugin, "events_to_register", None)
                return register() if register is not None else ClusterEvent.ALL
        return ClusterEvent.ALL

    def _pod_gone(self, uid: str) -> None:
        self.loop.forget_pod(uid)
        for handle in self.handles:  # a deleted pod stops waiting at Permit at once
            waiting = handle.waiting_pods.get(uid)
            if waiting is not None:
                waiting.reject("", "the pod was deleted")

    @property
    def ready(self) -> bool:
        return self.handlers.synced and all(e.is_set() for e in self._custom_synced.values())

    def abort(self) -> None:
        """Leadership lost: stop acting on the cluster at once. The queue closes and every binding in
        flight is cancelled (not drained); ``run``, cancelled by the caller, then ends without waiting
        for them. Writes of other background tasks are the caller's to stop: it fences the backend
        this app was built on (``scheduler.backend.fence``). The app is not run again."""
        self.aborted = True
        self.queue.close()
        self.binder.cancel()

    async def run(self, stop: asyncio.Event) -> None:
        """Informers first; scheduling starts once nodes and pods are listed; runs until ``stop``."""
        began = time.monotonic()
        if self.settings.freeze_synced_objects:
            gc.unfreeze()  # the last term's cache, frozen at its sync, is being dropped
        tasks: list[asyncio.Task[Any]] = [
            asyncio.create_task(self.handlers.run_nodes(), name="watch nodes"),
            asyncio.create_task(self.handlers.run_pods(), name="watch pods"),
            asyncio.create_task(self._housekeeping(), name="housekeeping"),
        ]
        tasks += [
            asyncio.create_task(self._watch_custom(resource), name=f"watch {resource.plural}")
            for resource in self._custom_watches
        ]
        first_lists = contextlib.ExitStack()
        survivors = SurvivorFreezer(self.settings.gc_thaw_seconds)
        if self.settings.freeze_synced_objects:
            # Until synced, each list page and list handling is frozen as it ends (apis.gcpause).
            first_lists.enter_context(freezing_lists())
        try:
            synced = asyncio.gather(
                self.handlers.synced_nodes.wait(),
                self.handlers.synced_pods.wait(),
                *(e.wait() for e in self._custom_synced.values()),
            )
            # A watch that fails before the first list ends the run too: waiting for a sync that
            # cannot come would leave the process alive and never ready.
            await _first(synced, stop.wait(), *tasks)
            if not synced.done():
                synced.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await synced
            first_lists.close()
            _raise_failed(tasks)
            if not stop.is_set():
                self._log_synced(time.monotonic() - began)
                if self.settings.freeze_synced_objects:
                    gc.freeze()
                    survivors.install()
                tasks.append(asyncio.create_task(self.loop.run(), name="scheduling loop"))
                if self.advisor is not None:
                    tasks.append(asyncio.create_task(self.advisor.run(), name="what-if advisor"))
                await _first(stop.wait(), *(t for t in tasks))
                _raise_failed(tasks)
        finally:
            first_lists.close()
            survivors.uninstall()
            self.queue.close()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if self.aborted:
                self.binder.cancel()  # bindings submitted since abort() too
            await self.binder.drain(grace_seconds=1.0 if self.aborted else 10.0)
            await self._close_plugins()

    def _log_synced(self, seconds: float) -> None:
        """The start-up line: how long the lists and their handling took, step by step."""
        since_start = seconds_since_process_start()
        spans = self.handlers.startup.rounded()
        log.info(
            "caches synced: %d nodes, %d assigned and %d pending pods in %.2fs (%s); %s after the "
            "process started; scheduling",
            self.cache.node_count(),
            self.cache.sizes()[1],
            self.queue.counts().active,
            seconds,
            ", ".join(f"{name} {value:.2f}s" for name, value in spans.items()),
            "?" if since_start is None else f"{since_start:.2f}s",
            extra={
                "startup": {
                    "sync_seconds": round(seconds, 3),
                    "since_process_start": None if since_start is None else round(since_start, 3),
                    "spans": spans,
                }
            },
        )

    async def _close_plugins(self) -> None:
        """Stop the plugins' own background work (a plugin with an async ``close``)."""
        for fwk in self.frameworks.values():
            for name, plugin in fwk.plugins.items():
                close = getattr(plugin, "close", None)
                if close is None or not asyncio.iscoroutinefunction(close):
                    continue
                try:
                    await close()
                except Exception:
                    log.exception("closing plugin %s failed", name)

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            for expired in self.cache.expire_assumed(self.clock()):
                self.queue.add(expired)
            self.metrics.set_cache_size(*self.cache.sizes())
            counts = self.queue.counts()
            self.metrics.set_pending(counts.active, counts.backoff, counts.unschedulable, counts.gated)
            self.metrics.set_unschedulable_pods(self.queue.unschedulable_by_plugin())
            if self.loop.classes is not None:
                self.metrics.count_class_hits(self.loop.classes.hits)


class _StandIns:
    """``Handle.stand_ins`` over the app's cache and queue (built before them, read when called)."""

    def __init__(self, app: SchedulerApp) -> None:
        self._app = app

    def enqueue(self, pod: PodInfo) -> None:
        cache = self._app.cache
        if cache.pod(pod.uid) is None and not cache.is_assumed(pod.uid):
            self._app.queue.add(pod)

    def dequeue(self, uid: str) -> None:
        self._app.queue.delete(uid)

    def hold(self, pod: PodInfo) -> None:
        self._app.queue.delete(pod.uid)
        self._app.cache.upsert_pod(pod)

    def announce(self, event: WatchEvent[Pod]) -> None:
        with decoding_once():
            for listener in self._app.handlers.pod_listeners:
                try:
                    listener(event)
                except Exception:
                    log.exception("a pod listener failed on a stand-in")

    def release(self, uid: str) -> None:
        self._app.queue.delete(uid)
        if self._app.cache.pod(uid) is not None:
            self._app.cache.remove_pod(uid)
            self._app.queue.on_event(ClusterEvent.POD_DELETE)  # its room is free for everyone


def _raise_failed(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


async def _first(*aws: Awaitable[Any]) -> None:
    """Wait until the first of ``aws`` completes; cancel what this call wrapped, never a task passed in."""
    futures = [asyncio.ensure_future(a) for a in aws]
    wrapped = [f for a, f in zip(aws, futures, strict=True) if f is not a]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for fut in wrapped:
            fut.cancel()
