"""A watch-based informer: list, then watch from the list's resourceVersion, into :class:`States`.

It follows the backend's reflector (``apis.client.kubernetes``), built on the same pieces
(``apis.client.watch``): bookmarks on, the last resourceVersion seen is where a dropped watch
resumes after a capped, jittered exponential backoff;
410 Gone relists (and replaces the kind's objects, so no deletion is missed); a watch the server
ends normally is re-opened at once. An object that does not validate is logged with the field and
skipped; the version koordlet had before stays (a NodeSLO edited into nonsense keeps the last good
one), and a deletion needs no decoding.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pydantic import BaseModel, ValidationError

from apis.client.watch import Backoff, Gone, WatchFailed, WatchStats, watch_event
from koordlet.states.resources import ListWatchAPI, Resource
from koordlet.states.store import States, object_key

__all__ = ["Informer"]

log = logging.getLogger("koordlet.states")


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"


class Informer:
    def __init__(
        self,
        api: ListWatchAPI,
        resource: Resource,
        states: States,
        *,
        field_selector: str | None = None,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
    ) -> None:
        self.api = api
        self.resource = resource
        self.states = states
        self.field_selector = field_selector
        self.backoff = Backoff(backoff_initial, backoff_max)
        self.stats = WatchStats()
        self.resource_version: str | None = None
        self.what = resource.plural + (f" ({field_selector})" if field_selector else "")

    def _decode(self, raw: dict[str, Any]) -> BaseModel | None:
        raw.setdefault("apiVersion", self.resource.api_version)  # list items carry neither
        raw.setdefault("kind", str(self.resource.kind))
        try:
            return self.resource.model.model_validate(raw)
        except ValidationError as exc:
            self.stats.decode_errors += 1
            log.warning(
                "%s %s does not validate, keeping the last good one: %s",
                self.resource.kind,
                object_key(raw),
                _first_error(exc),
            )
            return None

    async def _list(self) -> None:
        items, rv = await self.api.list_raw(self.resource, self.field_selector)
        objects: list[BaseModel] = []
        for raw in items:
            obj = self._decode(raw)
            if obj is None:
                previous = self.states.get(self.resource.kind, object_key(raw))
                if previous is not None:
                    objects.append(previous)
            else:
                objects.append(obj)
        self.states.replace(self.resource.kind, objects)
        self.stats.lists += 1
        self.resource_version = rv
        log.info("listed %s: %d objects at resourceVersion %s", self.what, len(objects), rv)

    def _apply(self, decoded: dict[str, Any]) -> None:
        event = watch_event(decoded)
        kind, raw = event.type, event.object
        if event.resource_version:
            self.resource_version = event.resource_version
        if kind == "DELETED":
            self.states.delete(self.resource.kind, object_key(raw))
        elif kind in ("ADDED", "MODIFIED"):
            obj = self._decode(raw)
            if obj is not None:
                self.states.upsert(self.resource.kind, obj)
        elif kind != "BOOKMARK":
            log.warning("watch %s: ignoring an event of type %r", self.what, kind)

    async def _watch(self) -> None:
        assert self.resource_version is not None
        began, seen = time.monotonic(), 0
        stream = self.api.watch_raw(self.resource, self.field_selector, self.resource_version)
        try:
            async for event in stream:
                seen += 1
                self._apply(event)
                self.backoff.reset()
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        if seen == 0 and time.monotonic() - began < 1.0:
            raise WatchFailed("the watch ended at once without an event")

    async def run(self) -> None:
        """List and watch until cancelled; never raises for the API server's failures."""
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                await self._watch()
            except Gone as exc:
                self.stats.relists += 1
                log.info(
                    "watch %s: resourceVersion %s too old (%s); relisting",
                    self.what,
                    self.resource_version,
                    exc,
                )
                self.resource_version = None
            except Exception as exc:  # the informer outlives any failure of the API server
                self.stats.reconnects += 1
                delay = self.backoff.next_delay()
                log.warning(
                    "%s %s failed at resourceVersion %s: %s; retrying in %.1fs",
                    "list" if self.resource_version is None else "watch",
                    self.what,
                    self.resource_version,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
