"""Evicts pods through the Eviction API and says why on the pod, once per pod.

As Koordinator's koordlet evictor: a pod already evicted is not evicted again (kept for
``remember_seconds``); a successful eviction records a Warning event ``evictPodSuccess`` with
``evict Pod:<name>, reason: <reason>, message: <message>``; a refused one (a PodDisruptionBudget's
429, a pod already gone) is logged and the pod may be picked again next round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

import aiohttp
from kubernetes_asyncio import client

from apis.core import Pod

__all__ = ["EVENT_EVICT_FAILED", "EVENT_EVICT_SUCCESS", "EvictionAPI", "Evictor"]

log = logging.getLogger("koordlet.qos")

EVENT_EVICT_SUCCESS = "evictPodSuccess"
EVENT_EVICT_FAILED = "evictPodFail"


class EvictionAPI(Protocol):
    async def evict(self, namespace: str, name: str) -> None: ...

    async def pod_event(self, pod: Pod, reason: str, message: str, event_type: str, host: str) -> None: ...


class Evictor:
    def __init__(
        self,
        api: EvictionAPI,
        remember_seconds: float = 300.0,
        on_evicted: Callable[[str, str], None] | None = None,
    ) -> None:
        self.api = api
        self.on_evicted = on_evicted
        """Called with (node, reason) after each eviction (koordlet's eviction counter)."""
        self.remember_seconds = remember_seconds
        self._evicted: dict[str, float] = {}
        self.evicted_total = 0

    def already_evicted(self, uid: str, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        self._evicted = {k: t for k, t in self._evicted.items() if now - t < self.remember_seconds}
        return uid in self._evicted

    async def evict(self, pod: Pod, node: str, reason: str, message: str) -> bool:
        """True when the pod is (or already was) evicted."""
        uid = pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"
        if self.already_evicted(uid):
            return True
        name, namespace = pod.metadata.name or "", pod.metadata.namespace or "default"
        text = f"evict Pod:{name}, reason: {reason}, message: {message}"
        try:
            await self.api.evict(namespace, name)
        except client.ApiException as exc:
            log.warning(
                "evicting pod %s/%s (%s) failed: %s %s", namespace, name, reason, exc.status, exc.reason
            )
            if exc.status == 404:
                return False
            await self._event(pod, EVENT_EVICT_FAILED, f"{text}, error: {exc.reason}", "Warning", node)
            return False
        self._evicted[uid] = time.time()
        self.evicted_total += 1
        if self.on_evicted is not None:
            self.on_evicted(node, reason)
        log.info("evicted pod %s/%s on %s: %s, %s", namespace, name, node, reason, message)
        await self._event(pod, EVENT_EVICT_SUCCESS, text, "Warning", node)
        return True

    async def _event(self, pod: Pod, reason: str, message: str, event_type: str, node: str) -> None:
        try:
            await self.api.pod_event(pod, reason, message, event_type, node)
        except (client.ApiException, aiohttp.ClientError, OSError) as exc:
            log.warning("event on pod %s/%s not recorded: %s", pod.metadata.namespace, pod.metadata.name, exc)
