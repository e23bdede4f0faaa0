"""What koord-scheduler and koord-descheduler need from a cluster, as one Protocol with two
implementations.

``apis.client.kubernetes.KubernetesBackend`` talks to a real API server (list+watch with
resourceVersion, bookmarks, relist on 410 Gone, capped backoff); the scheduler's
``scheduler.backend.memory.MemoryBackend`` keeps the same object model in process for unit tests
and ``koordctl simulate``. Nothing above this seam knows which one it talks to.

Watch semantics (the informer contract the cache relies on):

- a watch starts with one ``REPLACED`` event carrying the complete current list, then streams
  ``ADDED`` / ``MODIFIED`` / ``DELETED`` events in resourceVersion order;
- whenever the backend had to relist (410 Gone, a dropped connection it could not resume), it
  emits ``REPLACED`` again with the complete list, so the consumer can drop objects deleted
  during the gap: no event is ever lost silently;
- a backend told to (``KubernetesBackend``'s ``paged_lists``) may also emit pages of a list as
  ``LISTED`` events as they are decoded, in order, before that list's ``REPLACED`` (any number
  of its first pages, none to all); the ``REPLACED`` still carries every object (the pages' very
  objects, in their order). A list that starts over (a continue token that expired, a failed
  page) emits its pages again, so a consumer that handled pages ahead must still reconcile
  against the ``REPLACED``; consumers that ignore ``LISTED`` see the plain contract;
- the stream ends only when the backend is closed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from apis.base import KoordModel, resource_info
from apis.core import Node, Pod, PodDisruptionBudget
from apis.quota.elasticquotaprofile import ElasticQuotaProfile
from apis.scheduling.device import Device
from apis.scheduling.elasticquota import ElasticQuota
from apis.scheduling.networktopology import ClusterNetworkTopology
from apis.scheduling.podgroup import PodGroup
from apis.scheduling.reservation import Reservation

__all__ = [
    "DEVICES",
    "ELASTICQUOTAPROFILES",
    "ELASTICQUOTAS",
    "NODES",
    "PDBS",
    "PODGROUPS",
    "PODS",
    "RESERVATIONS",
    "TOPOLOGIES",
    "BackendError",
    "ClusterBackend",
    "Conflict",
    "EventRecord",
    "EventType",
    "NotFound",
    "ObjectRef",
    "ResourceType",
    "WatchEvent",
    "each",
]

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class ResourceType(Generic[T]):
    """One API resource the scheduler lists and watches, and the model its objects decode into.

    Build it with :meth:`of` from the model, which declares where its kind is served; a plugin
    declares the resource it watches in its own module (``ResourceType.of(Device)``).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    model: type[T]

    @classmethod
    def of(cls, model: type[T]) -> ResourceType[T]:
        """The resource of ``model``'s kind, read from its ``crd`` (or, for core kinds, ``api``)."""
        info = resource_info(model)
        return cls(info.group, info.version, info.plural, info.kind, info.namespaced, model)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


PODS = ResourceType.of(Pod)
NODES = ResourceType.of(Node)
PDBS = ResourceType.of(PodDisruptionBudget)
PODGROUPS = ResourceType.of(PodGroup)
TOPOLOGIES = ResourceType.of(ClusterNetworkTopology)
ELASTICQUOTAS = ResourceType.of(ElasticQuota)
ELASTICQUOTAPROFILES = ResourceType.of(ElasticQuotaProfile)
RESERVATIONS = ResourceType.of(Reservation)
DEVICES = ResourceType.of(Device)


class EventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    REPLACED = "REPLACED"
    """The complete current list (first event of a watch, and after every relist)."""
    LISTED = "LISTED"
    """One page of a list still being read (module docstring); its ``REPLACED`` follows."""


@dataclass(frozen=True, slots=True)
class WatchEvent(Generic[T]):
    type: EventType
    obj: T | None = None
    """The object for ADDED / MODIFIED / DELETED."""
    objects: Sequence[T] = field(default_factory=tuple)
    """Every object, for REPLACED; the page's, for LISTED."""
    told: int = 0
    """For REPLACED: how many of the first ``objects`` the consumer was already told, as these very
    objects, in LISTED events. A listener may skip upserting them again; it must still drop what
    it holds that is not in ``objects``. Set by whoever forwards the events (``EventHandlers``),
    never by a backend."""

    @property
    def untold(self) -> Sequence[T]:
        """The objects a listener has not upserted yet: a LISTED page's, the rest of a REPLACED's."""
        return self.objects[self.told :] if self.told else self.objects

    def dispatch(
        self,
        replaced: Callable[[Sequence[T]], object],
        upserted: Callable[[T], object],
        deleted: Callable[[T], object],
    ) -> None:
        """Hand the event to the informer callback for its type (ADDED and MODIFIED: ``upserted``;
        LISTED: none, as its REPLACED carries its objects again)."""
        if self.type is EventType.REPLACED:
            replaced(self.objects)
        elif self.obj is not None:
            (deleted if self.type is EventType.DELETED else upserted)(self.obj)


def each(objects: Iterable[T], handle: Callable[[T], object]) -> None:
    """``handle`` every object of a list (a REPLACED event's): one that fails is logged and skipped
    and the rest go on, so one hostile object cannot keep an informer from the others."""
    for obj in objects:
        try:
            handle(obj)
        except Exception:
            meta = getattr(obj, "metadata", None)
            name = "/".join(filter(None, (getattr(meta, "namespace", None), getattr(meta, "name", None))))
            log.exception("handling %s %s failed; skipped", type(obj).__name__, name or "?")


class ObjectRef(KoordModel):
    """The object an Event is about."""

    api_version: str = "v1"
    kind: str
    namespace: str | None = None
    name: str
    uid: str | None = None


class EventRecord(KoordModel):
    """A Kubernetes Event as kube-scheduler writes them (``Scheduled``, ``FailedScheduling`` ...)."""

    regarding: ObjectRef
    type: str = "Normal"
    """Normal or Warning."""
    reason: str
    message: str
    action: str = "Scheduling"
    reporting_controller: str = "koord-scheduler"


class BackendError(RuntimeError):
    """A call to the cluster failed; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(BackendError):
    """The object does not exist (any more)."""


class Conflict(BackendError):
    """The write lost a race: the pod is already bound, the resourceVersion moved on ..."""


class ClusterBackend(Protocol):
    def watch(
        self, resource: ResourceType[T], *, field_selector: str | None = None
    ) -> AsyncIterator[WatchEvent[T]]:
        """List then watch ``resource`` following the contract in the module docstring."""
        ...

    async def bind(self, pod: Pod, node_name: str, *, annotations: Mapping[str, str] | None = None) -> None:
        """Bind through the pods/binding subresource; Conflict if the pod is bound already.
        ``annotations`` ride on the Binding: the API server copies them onto the pod in the same
        write (what PreBind plugins would otherwise patch one call earlier)."""
        ...

    async def patch_pod(self, pod: Pod, patch: dict[str, Any]) -> None:
        """JSON merge patch of the pod's metadata or spec (annotations written at PreBind)."""
        ...

    async def patch_pod_status(self, pod: Pod, patch: dict[str, Any]) -> None:
        """Strategic-merge patch of the pods/status subresource (conditions, nominatedNodeName)."""
        ...

    async def patch_custom(
        self,
        resource: ResourceType[Any],
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
    ) -> None:
        """JSON merge patch of any object of ``resource`` through its main resource (metadata, spec,
        and status when the kind has no status subresource, as ElasticQuota), or of its ``subresource``
        (``status``); NotFound if it is gone."""
        ...

    async def evict(self, pod: Pod, *, grace_period_seconds: int | None = None) -> None:
        """Evict through the Eviction API (policy/v1); NotFound if the pod is gone."""
        ...

    async def delete_pod(self, pod: Pod) -> None:
        """Delete the pod with its own grace period (uid precondition); NotFound if it is gone."""
        ...

    async def record_event(self, event: EventRecord) -> None:
        """Write a Kubernetes Event; failures are logged by the implementation, never raised."""
        ...

    async def close(self) -> None: ...
