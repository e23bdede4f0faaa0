"""The koord-descheduler process: the caches, the MigrationController, the profiles' plugins, and
the leader's loops (descheduling rounds, arbitration, scavenger)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

from apis.client.eviction import EvictionService
from apis.client.kubernetes import KubernetesBackend
from apis.client.leader import LeaderElector
from apis.client.lease import KubernetesLeaseStore
from operators.descheduler.api import DeschedulerApi
from operators.descheduler.config import (
    MIGRATION_CONTROLLER,
    DeschedulerConfiguration,
    MigrationControllerArgs,
    ResolvedProfile,
    duration,
    resolve,
)
from operators.descheduler.defrag.client import kube_client
from operators.descheduler.informers import SYNCED_KINDS, Store
from operators.descheduler.migration import MigrationController
from operators.descheduler.registry import REGISTRY, PluginFactory, args_models
from operators.descheduler.runtime import EvictorProxy, Handle, Profile, RoundLimits, build_profile, run_round

__all__ = ["Descheduler"]

log = logging.getLogger(__name__)

SCAVENGE_INTERVAL = 60.0
SYNC_POLL = 0.2
SYNC_RELIST = 5.0
SYNC_TIMEOUT = 120.0
"""Seconds the first round waits for the caches to hold a fresh list (``Descheduler._caches_synced``)."""


class Descheduler:
    def __init__(
        self,
        config: DeschedulerConfiguration,
        *,
        kubeconfig: Path | None,
        leader_elect: bool,
        initial_delay: float,
        registry: dict[str, PluginFactory] = REGISTRY,
    ) -> None:
        self.config = config
        self.profiles: list[ResolvedProfile] = resolve(config, args_models(registry))
        self._registry = registry
        self._kubeconfig = kubeconfig
        self._leader_elect = leader_elect
        self._initial_delay = initial_delay
        self.store = Store()
        first = self.profiles[0]
        args = first.args.get(MIGRATION_CONTROLLER)
        self.args = args if isinstance(args, MigrationControllerArgs) else MigrationControllerArgs()
        self.controller: MigrationController | None = None
        self._elector: LeaderElector | None = None
        self._backend: KubernetesBackend | None = None
        self._api: DeschedulerApi | None = None
        self._task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None
        self.reconciles = asyncio.Semaphore(self.args.max_concurrent_reconciles)

    @staticmethod
    def validate(config: DeschedulerConfiguration, registry: dict[str, PluginFactory] = REGISTRY) -> None:
        """Raise ConfigError naming every invalid field."""
        resolve(config, args_models(registry))

    @property
    def leading(self) -> bool:
        return self.controller is not None and (self._elector is None or self._elector.is_leader)

    async def start(self) -> None:
        connection = self.config.client_connection
        self._backend = await KubernetesBackend.connect(
            self._kubeconfig,
            qps=connection.qps,
            burst=connection.burst,
            reporting_instance="koord-descheduler",
        )
        api = self._api = DeschedulerApi(self._backend.api_client)
        self.controller = MigrationController(
            self.args, self.store, api, EvictionService(self._backend, "koord-descheduler")
        )
        election = self.config.leader_election
        if self._leader_elect and election.leader_elect:
            self._elector = LeaderElector(
                KubernetesLeaseStore(
                    self._backend.api_client, election.resource_namespace, election.resource_name
                ),
                lease_duration=duration(election.lease_duration).total_seconds(),
                renew_deadline=duration(election.renew_deadline).total_seconds(),
                retry_period=duration(election.retry_period).total_seconds(),
            )
            self._task = asyncio.create_task(self._campaign(self._elector))
        else:
            self._task = asyncio.create_task(self._lead())
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """The leader's work never ends by itself: if it raised (no namespace for the Lease, say),
        the process must not stay up doing nothing; it says why and stops with an error."""
        if task.cancelled() or task.exception() is None:
            return
        self.failure = task.exception()
        log.critical("koord-descheduler cannot go on: %s", self.failure)
        signal.raise_signal(signal.SIGTERM)

    async def _campaign(self, elector: LeaderElector) -> None:
        """Lead while holding the Lease; after losing it, stand by and campaign again."""
        await elector.campaign(self._lead, lambda: log.warning("%s stopped leading", elector.identity))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._backend is not None:
            await self._backend.close()

    async def _lead(self) -> None:
        assert self.controller is not None
        assert self._backend is not None
        limits = RoundLimits(
            self.config.max_no_of_pods_to_evict_per_node,
            self.config.max_no_of_pods_to_evict_per_namespace,
            self.config.max_no_of_pods_to_evict_total,
        )
        proxy = EvictorProxy(self.controller, limits, self.config.dry_run)
        objects = kube_client(self._backend.api_client)  # one for every profile's handle
        profiles = [
            build_profile(
                p, Handle(self.store, proxy, self._backend, p.node_selector, objects), self._registry
            )
            for p in self.profiles
        ]
        await asyncio.gather(
            self._rounds(profiles, limits),
            _every(
                duration(self.args.arbitration_args.interval).total_seconds(), self.controller.arbitrate_once
            ),
            _every(SCAVENGE_INTERVAL, self.controller.scavenge_once),
        )

    async def _rounds(self, profiles: list[Profile], limits: RoundLimits) -> None:
        assert self.controller is not None
        await asyncio.sleep(self._initial_delay)
        await self._caches_synced()
        interval = self.config.interval.total_seconds()
        while True:
            await self._resolve_scales()
            await run_round(self.config, self.store, profiles, limits)
            if interval <= 0:
                log.info("deschedulingInterval is 0: one round done, no more")
                return
            await asyncio.sleep(interval)

    async def _caches_synced(self) -> None:
        """Until the caches hold every pod, node and NodeMetric a list returns now, as Koordinator's
        descheduler waits for its informers to sync before its first round: Kopf's watches deliver
        their first listing object by object, and a round over half a listing decides on half the
        cluster (a loaded machine's round once saw none of the hot nodes' pods). Objects deleted
        meanwhile never arrive: the list is taken again every ``SYNC_RELIST`` seconds, and after
        ``SYNC_TIMEOUT`` the round runs with a warning naming what is missing."""
        assert self._api is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SYNC_TIMEOUT
        while True:
            listed = {kind: await self._api.listed_keys(path) for kind, path in SYNCED_KINDS.items()}
            relist_at = loop.time() + SYNC_RELIST
            while loop.time() < relist_at:
                missing = self.store.missing(listed)
                if not missing:
                    return
                if loop.time() > deadline:
                    counts = ", ".join(f"{len(keys)} {kind}" for kind, keys in sorted(missing.items()))
                    log.warning(
                        "the caches still miss %s after %.0fs; descheduling anyway", counts, SYNC_TIMEOUT
                    )
                    return
                await asyncio.sleep(SYNC_POLL)

    async def _resolve_scales(self) -> None:
        """Replicas of the controllers the caches do not hold, through their ``/scale``."""
        assert self.controller is not None
        self.store.scales.clear()
        for pod in self.store.pods():
            ref = next((r for r in pod.metadata.owner_references or () if r.controller), None)
            if ref is None or not self.store.needs_scale(pod):
                continue
            try:
                self.store.scales[ref.uid] = await self.controller.scale_replicas(
                    ref.api_version, ref.kind, pod.metadata.namespace or "", ref.name
                )
            except Exception as exc:
                log.warning("could not read the scale of %s %s: %s", ref.kind, ref.name, exc)


async def _every(seconds: float, work: Callable[[], Awaitable[None]]) -> None:
    while True:
        try:
            await work()
        except Exception:
            log.exception("%s failed", getattr(work, "__name__", work))
        await asyncio.sleep(seconds)
