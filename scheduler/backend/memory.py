"""``MemoryBackend``: the ClusterBackend as an in-process cluster, for unit tests and ``koordctl simulate``.

It keeps the API server's observable behaviour where the scheduler depends on it, so code tested
here behaves the same against a real cluster:

- one global, monotonically increasing resourceVersion stamped on every write;
- watches start with ``REPLACED`` (the complete, field-selected list) and then stream
  ``ADDED`` / ``MODIFIED`` / ``DELETED`` in write order; an object that stops (starts) matching a
  watch's field selector is reported ``DELETED`` (``ADDED``), as the API server does;
- ``bind`` refuses an already bound pod (Conflict) or a pod whose uid changed (Conflict, the
  Binding's uid precondition) and sets the PodScheduled condition, as pods/binding does;
- ``patch_pod`` cannot change status and ``patch_pod_status`` can change only status;
- a ``metadata.resourceVersion`` in a ``patch_custom`` patch must match (Conflict otherwise);
- ``evict`` honours PodDisruptionBudgets by their ``status.disruptionsAllowed`` (429 otherwise);
- a negative quantity in a pod's requests, limits or overhead, or in a node's capacity or
  allocatable, is refused (422 Invalid), as the API server's validation refuses it.

Objects are stored as wire dicts with their models, validated on every write, so every object handed
out is a fresh model instance the backend never mutates again (consumers must not mutate them
either). A bind, which changes three fields of a stored pod, builds its version from the stored one
with the unchanged parts shared rather than validating the whole pod again (``_bound``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from apis.client.backend import (
    PDBS,
    PODS,
    BackendError,
    Conflict,
    EventRecord,
    EventType,
    NotFound,
    ResourceType,
    WatchEvent,
)
from apis.core import Node, Pod, PodCondition, PodDisruptionBudget
from apis.meta import selects
from apis.podkey import pod_namespace_name
from apis.quantity import Quantity
from scheduler.model_update import updated

__all__ = ["FieldSelector", "MemoryBackend", "json_merge_patch", "strategic_merge_patch"]

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

Wire = dict[str, Any]

# Lists that strategic merge patch merges by key in pods/status (the rest are replaced).
_MERGE_KEYS: dict[str, str] = {
    "conditions": "type",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ephemeralContainerStatuses": "name",
    "podIPs": "ip",
    "hostIPs": "ip",
    "resourceClaimStatuses": "name",
}


def copy_wire(wire: Any) -> Any:
    """A copy of a JSON tree (dicts, lists, scalars), as ``copy.deepcopy`` makes it but several times
    faster: every write of the in-memory API server copies the stored object."""
    if isinstance(wire, dict):
        return {key: copy_wire(value) for key, value in wire.items()}
    if isinstance(wire, list):
        return [copy_wire(value) for value in wire]
    return wire


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy_wire(patch)
    result: Wire = copy_wire(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """The part of Kubernetes' strategic merge patch that pod status needs: a merge patch, except
    that lists with a patch merge key (``conditions`` by ``type`` ...) merge element by element."""
    if not isinstance(patch, dict):
        return copy_wire(patch)
    result: Wire = copy_wire(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):  # directives ($patch, $setElementOrder ...) are not modelled
            continue
        if value is None:
            result.pop(key, None)
        elif key in _MERGE_KEYS and isinstance(value, list) and isinstance(result.get(key), list):
            merge_key = _MERGE_KEYS[key]
            merged: list[Any] = list(result[key])
            for item in value:
                index = next(
                    (
                        i
                        for i, old in enumerate(merged)
                        if isinstance(old, dict)
                        and isinstance(item, dict)
                        and old.get(merge_key) == item.get(merge_key)
                    ),
                    None,
                )
                if index is None:
                    merged.append(copy_wire(item))
                else:
                    merged[index] = strategic_merge_patch(merged[index], item)
            result[key] = merged
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _field(wire: Wire, path: str) -> str:
    value: Any = wire
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector (``spec.nodeName=,status.phase!=Failed``): terms ANDed, ``=``, ``==``
    and ``!=`` on dotted wire paths, a missing field reading as the empty string."""

    terms: tuple[tuple[str, bool, str], ...] = ()
    """(path, equal?, value)."""

    @classmethod
    def parse(cls, selector: str | None) -> FieldSelector:
        terms: list[tuple[str, bool, str]] = []
        for term in (selector or "").split(","):
            term = term.strip()
            if not term:
                continue
            if "!=" in term:
                path, value = term.split("!=", 1)
                equal = False
            elif "==" in term:
                path, value = term.split("==", 1)
                equal = True
            elif "=" in term:
                path, value = term.split("=", 1)
                equal = True
            else:
                raise ValueError(f"invalid field selector term {term!r} in {selector!r}")
            terms.append((path.strip(), equal, value.strip()))
        return cls(tuple(terms))

    def matches(self, wire: Wire) -> bool:
        return all((_field(wire, path) == value) == equal for path, equal, value in self.terms)


@dataclass(eq=False)
class _Watcher:
    """One watch stream's events in write order (None: the stream ends), for its one reader.

    A deque and the reader's waiting future rather than an ``asyncio.Queue``, whose bookkeeping for
    many readers and writers (putters, unfinished tasks, its ``join`` event) cost more than the
    rest of handing over an event, and every bound pod is two events."""

    selector: FieldSelector
    events: deque[WatchEvent[Any] | None] = field(default_factory=deque)
    waiter: asyncio.Future[None] | None = None

    def put(self, event: WatchEvent[Any] | None) -> None:
        self.events.append(event)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> WatchEvent[Any] | None:
        while not self.events:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self.events.popleft()


@dataclass
class _Entry:
    wire: Wire
    obj: BaseModel


class MemoryBackend:
    """An in-process cluster behind the ClusterBackend protocol.

    ``apply`` / ``delete`` / ``get`` / ``list`` are the test and simulator side of it; everything the
    scheduler calls is the protocol. ``events`` collects recorded EventRecords, ``bindings`` every
    successful bind as ``(namespace/name, node)``; ``bind_latency`` delays each bind to simulate the
    API server's round trip.
    """

    def __init__(self, *, bind_latency: float = 0.0) -> None:
        self.bind_latency = bind_latency
        self.events: list[EventRecord] = []
        self.bindings: list[tuple[str, str]] = []
        self._rv = 0
        self._store: dict[ResourceType[Any], dict[str, _Entry]] = {}
        self._watchers: dict[ResourceType[Any], list[_Watcher]] = {}
        self._closed = False

    # ------------------------------------------------------------------ test / simulator side

    @property
    def resource_version(self) -> str:
        """The resourceVersion of the latest write."""
        return str(self._rv)

    def apply(self, resource: ResourceType[T], obj: T | Wire) -> T:
        """Create or replace an object (a model or a wire dict); returns the stored version with
        resourceVersion, uid and creationTimestamp filled in. Watchers see ADDED or MODIFIED."""
        wire = self._to_wire(obj)
        meta = wire.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ValueError("the object has neither metadata.name nor metadata.generateName")
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if resource.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        wire.setdefault("apiVersion", resource.api_version)
        wire.setdefault("kind", resource.kind)
        key = self._key(resource, meta.get("namespace"), meta["name"])
        old = self._objects(resource).get(key)
        if old is not None:
            meta.setdefault("uid", old.wire["metadata"].get("uid"))
            meta.setdefault("creationTimestamp", old.wire["metadata"].get("creationTimestamp"))
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        return self._put(resource, key, wire)

    def delete(self, resource: ResourceType[T], namespace: str | None, name: str) -> T:
        """Remove an object; watchers see DELETED with its last state. NotFound if it is missing."""
        key = self._key(resource, namespace, name)
        entry = self._objects(resource).pop(key, None)
        if entry is None:
            raise NotFound(f"{resource.plural} {key} not found", status=404)
        self._rv += 1
        wire = copy_wire(entry.wire)
        wire["metadata"]["resourceVersion"] = str(self._rv)
        obj = resource.model.model_validate(wire)
        self._notify(resource, entry.wire, None, obj)
        return obj

    def get(self, resource: ResourceType[T], namespace: str | None, name: str) -> T | None:
        entry = self._objects(resource).get(self._key(resource, namespace, name))
        return cast(T, entry.obj) if entry is not None else None

    def list(self, resource: ResourceType[T]) -> list[T]:
        return [cast(T, entry.obj) for entry in self._objects(resource).values()]

    def force_relist(self, resource: ResourceType[Any]) -> None:
        """Send every watcher of ``resource`` a REPLACED, as a relist after 410 Gone would."""
        for watcher in self._watchers.get(resource, ()):
            watcher.put(self._replaced(resource, watcher.selector))

    # ------------------------------------------------------------------ ClusterBackend

    def watch(
        self, resource: ResourceType[T], *, field_selector: str | None = None
    ) -> AsyncIterator[WatchEvent[T]]:
        selector = FieldSelector.parse(field_selector)  # a bad selector fails here, not at the first event
        return self._watch(resource, selector)

    async def _watch(
        self, resource: ResourceType[T], selector: FieldSelector
    ) -> AsyncIterator[WatchEvent[T]]:
        if self._closed:
            return
        # The snapshot and the registration happen without an await in between: no write can fall
        # between the REPLACED list and the first queued event.
        watcher = _Watcher(selector)
        self._watchers.setdefault(resource, []).append(watcher)
        try:
            yield self._replaced(resource, selector)
            while True:
                event = await watcher.get()
                if event is None:
                    return
                yield event
        finally:
            watchers = self._watchers.get(resource, [])
            if watcher in watchers:
                watchers.remove(watcher)

    async def bind(self, pod: Pod, node_name: str, *, annotations: Mapping[str, str] | None = None) -> None:
        if self.bind_latency > 0:
            await asyncio.sleep(self.bind_latency)
        namespace, name = pod_namespace_name(pod)
        key = self._key(PODS, namespace, name)
        entry = self._require(PODS, key, pod.metadata.uid)
        bound = entry.wire.get("spec", {}).get("nodeName")
        if bound:
            raise Conflict(f"pod {key} is already assigned to node {bound!r}", status=409)
        self._rv += 1
        wire, obj = _bound(entry, node_name, annotations, str(self._rv), _now())
        objects = self._objects(PODS)
        objects[key] = _Entry(wire, obj)
        self._notify(PODS, entry.wire, wire, obj)
        self.bindings.append((key, node_name))

    async def patch_pod(self, pod: Pod, patch: dict[str, Any]) -> None:
        namespace, name = pod_namespace_name(pod)
        key = self._key(PODS, namespace, name)
        entry = self._require(PODS, key, None)
        wire = json_merge_patch(entry.wire, {k: v for k, v in patch.items() if k != "status"})
        # Identity fields are immutable; the main resource cannot change status.
        for immutable in ("name", "namespace", "uid", "creationTimestamp"):
            wire["metadata"][immutable] = entry.wire["metadata"].get(immutable)
        if "status" in entry.wire:
            wire["status"] = copy_wire(entry.wire["status"])
        else:
            wire.pop("status", None)
        self._put(PODS, key, wire)

    async def patch_pod_status(self, pod: Pod, patch: dict[str, Any]) -> None:
        namespace, name = pod_namespace_name(pod)
        key = self._key(PODS, namespace, name)
        entry = self._require(PODS, key, None)
        wire = copy_wire(entry.wire)
        wire["status"] = strategic_merge_patch(wire.get("status") or {}, patch.get("status") or {})
        self._put(PODS, key, wire)

    async def patch_custom(
        self,
        resource: ResourceType[Any],
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
    ) -> None:
        """A JSON merge patch of the whole object (identity fields stay), as a custom resource
        without a status subresource takes it; a ``metadata.resourceVersion`` in the patch is a
        precondition (Conflict when the object moved on), as the API server treats it. With
        ``subresource="status"`` only the status changes."""
        if subresource == "status":
            patch = {"status": patch.get("status") or {}, "metadata": patch.get("metadata") or {}}
        key = self._key(resource, namespace, name)
        entry = self._require(resource, key, None)
        expected = (patch.get("metadata") or {}).get("resourceVersion")
        if expected is not None and expected != entry.wire["metadata"].get("resourceVersion"):
            raise Conflict(
                f'Operation cannot be fulfilled on {resource.plural} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                status=409,
            )
        wire = json_merge_patch(entry.wire, patch)
        for immutable in ("name", "namespace", "uid", "creationTimestamp"):
            if immutable in entry.wire["metadata"]:
                wire["metadata"][immutable] = entry.wire["metadata"][immutable]
        self._put(resource, key, wire)

    async def evict(self, pod: Pod, *, grace_period_seconds: int | None = None) -> None:
        """Delete the pod (the grace period is not simulated; a pod with finalizers terminates until
        ``finish_termination``) unless a PodDisruptionBudget selecting it allows no disruption
        (BackendError 429, as the Eviction API answers)."""
        namespace, name = pod_namespace_name(pod)
        key = self._key(PODS, namespace, name)
        entry = self._require(PODS, key, pod.metadata.uid)
        labels = entry.wire["metadata"].get("labels") or {}
        budgets = [
            (pdb_key, pdb)
            for pdb_key, pdb in self._objects(PDBS).items()
            if pdb.wire["metadata"].get("namespace") == namespace
            and selects(cast(PodDisruptionBudget, pdb.obj).spec.selector, labels)
        ]
        for pdb_key, pdb in budgets:
            if int((pdb.wire.get("status") or {}).get("disruptionsAllowed") or 0) <= 0:
                raise BackendError(
                    f"evict pod {key}: Cannot evict pod as it would violate the pod's disruption budget "
                    f"{pdb_key}",
                    status=429,
                )
        for pdb_key, pdb in budgets:
            wire = copy_wire(pdb.wire)
            wire["status"]["disruptionsAllowed"] = int(wire["status"]["disruptionsAllowed"]) - 1
            self._put(PDBS, pdb_key, wire)
        self._delete_pod(namespace, name)

    def _delete_pod(self, namespace: str, name: str) -> None:
        """A pod with finalizers only gets its deletionTimestamp (it terminates until they are
        removed, see ``finish_termination``); any other pod goes at once."""
        key = self._key(PODS, namespace, name)
        entry = self._require(PODS, key, None)
        if not entry.wire["metadata"].get("finalizers"):
            self.delete(PODS, namespace, name)
            return
        if entry.wire["metadata"].get("deletionTimestamp"):
            return
        wire = copy_wire(entry.wire)
        wire["metadata"]["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._put(PODS, key, wire)

    def finish_termination(self, namespace: str, name: str) -> None:
        """Remove a terminating pod's finalizers: it is gone (tests of pods that take their time)."""
        self.delete(PODS, namespace, name)

    async def delete_pod(self, pod: Pod) -> None:
        """Delete the pod (the grace period is not simulated; finalizers are, see ``_delete_pod``)."""
        namespace, name = pod_namespace_name(pod)
        self._require(PODS, self._key(PODS, namespace, name), pod.metadata.uid)
        self._delete_pod(namespace, name)

    async def record_event(self, event: EventRecord) -> None:
        self.events.append(event)

    async def close(self) -> None:
        """End every watch stream."""
        self._closed = True
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.put(None)

    # ------------------------------------------------------------------ internals

    def _objects(self, resource: ResourceType[Any]) -> dict[str, _Entry]:
        return self._store.setdefault(resource, {})

    @staticmethod
    def _key(resource: ResourceType[Any], namespace: str | None, name: str) -> str:
        return f"{namespace or 'default'}/{name}" if resource.namespaced else name

    @staticmethod
    def _to_wire(obj: BaseModel | Wire) -> Wire:
        if isinstance(obj, BaseModel):
            return obj.model_dump(by_alias=True, exclude_none=True, mode="json")
        return cast(Wire, copy_wire(obj))

    def _require(self, resource: ResourceType[Any], key: str, uid: str | None) -> _Entry:
        entry = self._objects(resource).get(key)
        if entry is None:
            raise NotFound(f"{resource.plural} {key} not found", status=404)
        if uid and entry.wire["metadata"].get("uid") != uid:
            raise Conflict(
                f"{resource.plural} {key}: precondition failed: uid {uid} (the object was recreated)",
                status=409,
            )
        return entry

    def _put(self, resource: ResourceType[T], key: str, wire: Wire) -> T:
        self._rv += 1
        wire["metadata"]["resourceVersion"] = str(self._rv)
        try:
            obj = resource.model.model_validate(wire)
        except ValidationError as exc:
            self._rv -= 1
            raise BackendError(f"{resource.kind} {key} is invalid: {exc}", status=422) from exc
        negative = _negative_quantities(obj)
        if negative:
            self._rv -= 1
            raise BackendError(
                f"{resource.kind} {key} is invalid: "
                + "; ".join(f"{f}: must be greater than or equal to 0" for f in negative),
                status=422,
            )
        objects = self._objects(resource)
        old = objects.get(key)
        objects[key] = _Entry(wire, obj)
        self._notify(resource, old.wire if old else None, wire, obj)
        return obj

    def _notify(
        self, resource: ResourceType[Any], old: Wire | None, new: Wire | None, obj: BaseModel
    ) -> None:
        """Queue the event for every watcher, translated through its field selector."""
        for watcher in self._watchers.get(resource, ()):
            was = old is not None and watcher.selector.matches(old)
            now = new is not None and watcher.selector.matches(new)
            if was and now:
                kind = EventType.MODIFIED
            elif now:
                kind = EventType.ADDED
            elif was:
                kind = EventType.DELETED
            else:
                continue
            watcher.put(WatchEvent(kind, obj=obj))

    def _replaced(self, resource: ResourceType[T], selector: FieldSelector) -> WatchEvent[T]:
        objects = tuple(
            cast(T, entry.obj) for entry in self._objects(resource).values() if selector.matches(entry.wire)
        )
        return WatchEvent(EventType.REPLACED, objects=objects)


def _now() -> str:
    """The API server's timestamp format, to the second; formatted once per second, as binding
    every pod formatted it again."""
    second = int(time.time())
    if _NOW[0] != second:
        _NOW[0], _NOW[1] = second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return cast(str, _NOW[1])


_NOW: list[Any] = [0, ""]


def _bound(
    entry: _Entry, node_name: str, annotations: Mapping[str, str] | None, resource_version: str, now: str
) -> tuple[Wire, Pod]:
    """The pod of ``entry`` bound to ``node_name``, as pods/binding writes it (nodeName, the
    Binding's annotations, the PodScheduled condition), as a wire dict and its model.

    A bind changes three fields of an object that was validated when it was written, so the new
    version is built from the stored one rather than copied and validated whole: new dicts and
    models along the changed paths, the rest shared (every stored version is immutable)."""
    old_wire: Wire = entry.wire
    old = cast(Pod, entry.obj)
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}
    meta_wire = {**old_wire.get("metadata", {}), "resourceVersion": resource_version}
    meta_update: dict[str, Any] = {"resource_version": resource_version}
    if annotations:  # the API server copies the Binding's annotations onto the pod
        meta_wire["annotations"] = {**(meta_wire.get("annotations") or {}), **annotations}
        meta_update["annotations"] = dict(meta_wire["annotations"])
    old_status: Wire = old_wire.get("status") or {}
    old_conditions = old_status.get("conditions")
    if not isinstance(old_conditions, list):
        old_conditions = []
    # As strategic merge patch merges {"conditions": [scheduled]} (by type), but with only the
    # merged condition new: the others are shared, as wires and as models.
    at = next((i for i, c in enumerate(old_conditions) if c.get("type") == "PodScheduled"), None)
    conditions_wire = list(old_conditions)
    if at is None:
        at = len(conditions_wire)
        conditions_wire.append(scheduled)
    else:
        conditions_wire[at] = {**old_conditions[at], **scheduled}
    status_wire = {**old_status, "conditions": conditions_wire}
    wire = {
        **old_wire,
        "metadata": meta_wire,
        "spec": {**old_wire.get("spec", {}), "nodeName": node_name},
        "status": status_wire,
    }
    conditions = list(old.status.conditions or ())
    if len(conditions) != len(old_conditions):  # not the models of these wires: validate them all
        conditions = [PodCondition.model_validate(c) for c in conditions_wire]
    else:
        conditions[at : at + 1] = [_condition(conditions_wire[at])]
    obj = updated(
        old,
        {
            "metadata": updated(old.metadata, meta_update),
            "spec": updated(old.spec, {"node_name": node_name}),
            "status": updated(old.status, {"conditions": conditions}),
        },
    )
    return wire, obj


def _condition(wire: Wire) -> PodCondition:
    """The PodScheduled condition's model, validated once per distinct wire: every pod bound
    within the same second without an earlier PodScheduled condition gets the same three fields
    (models are never mutated, so one instance serves them all)."""
    key = tuple(wire.items())
    if _CONDITION[0] != key:
        _CONDITION[0], _CONDITION[1] = key, PodCondition.model_validate(wire)
    return cast(PodCondition, _CONDITION[1])


_CONDITION: list[Any] = [None, None]


def _negative_quantities(obj: BaseModel) -> list[str]:
    """The paths of negative quantities the API server's validation would refuse."""
    lists: list[tuple[str, dict[str, Quantity] | None]] = []
    if isinstance(obj, Pod):
        for kind, containers in (
            ("containers", obj.spec.containers),
            ("initContainers", obj.spec.init_containers or []),
        ):
            for i, c in enumerate(containers):
                if c.resources is not None:
                    lists.append((f"spec.{kind}[{i}].resources.requests", c.resources.requests))
                    lists.append((f"spec.{kind}[{i}].resources.limits", c.resources.limits))
        lists.append(("spec.overhead", obj.spec.overhead))
    elif isinstance(obj, Node):
        lists += [("status.capacity", obj.status.capacity), ("status.allocatable", obj.status.allocatable)]
    return [f"{path}.{name}" for path, rl in lists for name, q in (rl or {}).items() if q.sign() < 0]
