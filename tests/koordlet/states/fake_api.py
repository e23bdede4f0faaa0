"""An in-memory API server for informers: a list answers the objects and a resourceVersion, a watch
plays the events queued for it, then ends (as the server ends a watch after ``timeoutSeconds``) or
fails as scripted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from apis.client.watch import Gone
from koordlet.states.resources import Resource


class FakeListWatch:
    def __init__(self, items: list[dict[str, Any]] | None = None, resource_version: str = "10") -> None:
        self.items = list(items or [])
        self.resource_version = resource_version
        self.lists: list[str | None] = []
        """The field selector of each list."""
        self.watches: list[str] = []
        """The resourceVersion each watch started from."""
        self.relists: list[tuple[list[dict[str, Any]], str]] = []
        """What the lists after the first answer, one each (then ``items`` again)."""
        self.list_failures: list[Exception] = []
        """Raised by the next lists, one each."""
        self.watch_scripts: list[list[dict[str, Any] | Exception]] = []
        """One per watch: the events it plays, an exception ends it with that failure; a watch
        without a script waits until cancelled."""
        self._watched = asyncio.Event()

    async def wait_watches(self, count: int) -> None:
        """Until ``count`` watches have started (the events before the last one are applied)."""
        while len(self.watches) < count:
            await self._watched.wait()
            self._watched.clear()

    async def list_raw(
        self, resource: Resource, field_selector: str | None
    ) -> tuple[list[dict[str, Any]], str]:
        self.lists.append(field_selector)
        if self.list_failures:
            raise self.list_failures.pop(0)
        if len(self.lists) > 1 and self.relists:
            self.items, self.resource_version = self.relists.pop(0)
        return [dict(item) for item in self.items], self.resource_version

    async def watch_raw(
        self, resource: Resource, field_selector: str | None, resource_version: str
    ) -> AsyncIterator[dict[str, Any]]:
        self.watches.append(resource_version)
        self._watched.set()
        if not self.watch_scripts:
            await asyncio.Event().wait()
        for step in self.watch_scripts.pop(0):
            if isinstance(step, Exception):
                raise step
            yield step
            await asyncio.sleep(0)


def gone() -> Gone:
    return Gone("HTTP 410")


def named(name: str, rv: str, **fields: Any) -> dict[str, Any]:
    """A cluster-scoped object's JSON."""
    return {"metadata": {"name": name, "resourceVersion": rv}, **fields}


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}
