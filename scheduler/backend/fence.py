"""``FencedBackend``: one term of leadership's view of the cluster, closed the moment the term ends.

koord-scheduler builds a fresh ``SchedulerApp`` for every term of leadership on a ``FencedBackend``
over the process's one backend. When the Lease is lost, ``fence()`` is called before the term's work
has even been cancelled, and from then on every write of that term (a Binding, a patch, an eviction,
a deletion) fails with ``Fenced`` without reaching the API server, and every Event is dropped. This
covers the writes of every component at once: the binder's, the reporter's, a plugin's background
tasks, whatever task has not noticed the cancellation yet. Reads (watches) pass through; the term's
informers are cancelled with it.

A write already sent when the fence closes cannot be taken back; it was sent while the lease was
still ours (the leader steps down ``lease_duration - renew_deadline`` before anyone may take over).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from apis.client.backend import BackendError, ClusterBackend, EventRecord, ResourceType, T, WatchEvent
from apis.core import Pod

__all__ = ["Fenced", "FencedBackend"]

log = logging.getLogger(__name__)


class Fenced(BackendError):
    """The write belongs to a term of leadership that has ended: it was not sent."""


class FencedBackend:
    """A ``ClusterBackend`` that passes every call to ``inner`` until ``fence()``, then refuses writes.

    ``close()`` does not close ``inner``: it outlives the term (the process closes it)."""

    def __init__(self, inner: ClusterBackend, term: str = "this term") -> None:
        self._inner = inner
        self._term = term
        self.fenced = False
        self.refused = 0
        """Writes refused since ``fence()`` (Events included)."""

    def fence(self) -> None:
        self.fenced = True

    def _check(self, what: str) -> None:
        if self.fenced:
            self.refused += 1
            raise Fenced(f"{what}: not the leader any more ({self._term} has ended); not sent")

    def watch(
        self, resource: ResourceType[T], *, field_selector: str | None = None
    ) -> AsyncIterator[WatchEvent[T]]:
        return self._inner.watch(resource, field_selector=field_selector)

    async def bind(self, pod: Pod, node_name: str, *, annotations: Mapping[str, str] | None = None) -> None:
        self._check(f"bind {pod.metadata.namespace}/{pod.metadata.name} to {node_name}")
        await self._inner.bind(pod, node_name, annotations=annotations)

    async def patch_pod(self, pod: Pod, patch: dict[str, Any]) -> None:
        self._check(f"patch pod {pod.metadata.namespace}/{pod.metadata.name}")
        await self._inner.patch_pod(pod, patch)

    async def patch_pod_status(self, pod: Pod, patch: dict[str, Any]) -> None:
        self._check(f"patch the status of pod {pod.metadata.namespace}/{pod.metadata.name}")
        await self._inner.patch_pod_status(pod, patch)

    async def patch_custom(
        self,
        resource: ResourceType[Any],
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
    ) -> None:
        self._check(f"patch {resource.kind} {name}")
        await self._inner.patch_custom(resource, namespace, name, patch, subresource=subresource)

    async def evict(self, pod: Pod, *, grace_period_seconds: int | None = None) -> None:
        self._check(f"evict pod {pod.metadata.namespace}/{pod.metadata.name}")
        await self._inner.evict(pod, grace_period_seconds=grace_period_seconds)

    async def delete_pod(self, pod: Pod) -> None:
        self._check(f"delete pod {pod.metadata.namespace}/{pod.metadata.name}")
        await self._inner.delete_pod(pod)

    async def record_event(self, event: EventRecord) -> None:
        """As the protocol asks, never raises: an Event of an ended term is dropped."""
        if self.fenced:
            self.refused += 1
            log.debug("event %s on %s dropped: %s has ended", event.reason, event.regarding.name, self._term)
            return
        await self._inner.record_event(event)

    async def close(self) -> None:
        self.fence()
