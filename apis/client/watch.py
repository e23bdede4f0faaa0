"""What every reflector over the API server's watch shares: the watch request's query, the response
split into event lines, one line read into an event (410 Gone, other errors, bookmarks) or
validated with its object in one pass, and the capped, jittered backoff between retries.

``apis.client.kubernetes.KubernetesBackend`` (koord-scheduler, koord-descheduler) and koordlet's
informer build their list-then-watch loops on these; the benchmarks' raw client splits its lines
with ``event_lines``.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = [
    "Backoff",
    "Gone",
    "TypedEvent",
    "WatchEvent",
    "WatchFailed",
    "WatchStats",
    "decode_event_line",
    "event_lines",
    "read_event",
    "typed_event",
    "watch_event",
    "watch_query",
]


class Gone(Exception):
    """410 Gone: the resourceVersion fell out of the API server's watch cache; relist."""


class WatchFailed(Exception):
    """The watch failed in a way that resuming from the last resourceVersion (after a backoff) may fix."""


@dataclass
class WatchStats:
    """Counters over the watches of one reflector, a backend's or an informer's (for metrics and
    tests)."""

    lists: int = 0
    """Complete lists, initial ones included."""
    relists: int = 0
    """Lists caused by 410 Gone."""
    reconnects: int = 0
    """Watches resumed from the last resourceVersion after a failure."""
    decode_errors: int = 0
    """Objects that did not validate against the model (each one is logged; an informer keeps the
    last good one)."""


class Backoff:
    """Capped exponential backoff with jitter; ``reset`` after any success."""

    def __init__(self, initial: float, cap: float) -> None:
        self._initial = initial
        self._cap = cap
        self._next = initial

    def reset(self) -> None:
        self._next = self._initial

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self._cap, self._next * 2)
        return delay * (1.0 + 0.2 * random.random())  # jitter so watchers do not reconnect in lockstep


def watch_query(
    resource_version: str, *, timeout_seconds: int, field_selector: str | None = None
) -> list[tuple[str, str]]:
    """A watch from ``resource_version`` with bookmarks, which the server ends after ``timeout_seconds``."""
    query = [
        ("watch", "true"),
        ("resourceVersion", resource_version),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", str(timeout_seconds)),
    ]
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


async def event_lines(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """The non-blank lines of a watch response's body (``response.content.iter_any()``)."""
    # Split by hand: aiohttp's line reader refuses lines over 128 KiB, and a NodeMetric of a busy
    # node or a large Node is longer.
    buffer = bytearray()
    async for chunk in chunks:
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[start:end])
            start = end + 1
            if line.strip():
                yield line
        del buffer[:start]
    if bytes(buffer).strip():
        yield bytes(buffer)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event as the server sent it: ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK``
    (any other type is passed on for the reflector to log)."""

    type: str
    object: dict[str, Any] = field(default_factory=dict)
    resource_version: str | None = None
    """The object's ``metadata.resourceVersion``, where a resumed watch starts; None when absent."""


def decode_event_line(line: bytes) -> dict[str, Any]:
    """One event line as JSON; WatchFailed when it is no JSON object."""
    try:
        event = json.loads(line)
    except ValueError as exc:
        raise WatchFailed(f"undecodable watch line: {exc}") from exc
    if not isinstance(event, dict):
        raise WatchFailed(f"watch: not an event: {line[:200]!r}")
    return event


def watch_event(event: Mapping[str, Any]) -> WatchEvent:
    """A decoded event; Gone on an ``ERROR`` event with code 410, WatchFailed on any other ``ERROR``."""
    kind = event.get("type")
    raw = event.get("object") or {}
    if kind == "ERROR":
        if raw.get("code") == 410:
            raise Gone(str(raw.get("message") or "Gone"))
        raise WatchFailed(f"watch ERROR {raw.get('code')}: {raw.get('message')}")
    rv = (raw.get("metadata") or {}).get("resourceVersion")
    return WatchEvent(str(kind), raw, str(rv) if rv else None)


def read_event(line: bytes) -> WatchEvent:
    return watch_event(decode_event_line(line))


T = TypeVar("T", bound=BaseModel)


class TypedEvent(BaseModel, Generic[T]):
    """A watch event with its object validated as ``T``."""

    type: str
    object: T


_TYPED: dict[type[Any], type[TypedEvent[Any]]] = {}


def typed_event(model: type[T], line: bytes) -> TypedEvent[T] | None:
    """``line`` validated straight from its bytes, the object as ``model``: one pass of pydantic-core
    over the JSON, which builds nothing for what the model leaves out (a pod's managedFields, most
    of its status), where ``json.loads`` builds all of it first and validation then reads the dicts
    (twice the CPU). None when the line does not validate so: the Status of an ``ERROR`` event, a
    bookmark whose object is too thin for ``model``, an object with something wrong in it, a line
    that is not JSON; the caller reads those with ``read_event``, which says what is wrong (and
    reads an event of a type it does not know so too)."""
    event_model = _TYPED.get(model)
    if event_model is None:
        event_model = _TYPED[model] = TypedEvent[model]  # type: ignore[valid-type]
    try:
        return event_model.model_validate_json(line)
    except ValidationError:
        return None
