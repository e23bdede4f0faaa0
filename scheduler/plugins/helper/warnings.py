"""One warning per problem per object: a log line and a Warning event on the object.

Informer handlers read annotations of objects the scheduler does not own; what they cannot use
they skip, and this tells the object's owner why, once per distinct problem (a relist or a
resync sees the same object again and says nothing new).
"""

from __future__ import annotations

import asyncio
import logging

from apis.client.backend import ClusterBackend, EventRecord, ObjectRef
from scheduler.background import BackgroundTasks

__all__ = ["ObjectWarnings"]

log = logging.getLogger(__name__)


class ObjectWarnings:
    def __init__(self, backend: ClusterBackend, reason: str = "InvalidAnnotation") -> None:
        self.backend = backend
        self.reason = reason
        self._told: dict[tuple[str, str, str], str] = {}
        """(kind, namespace, name) -> the last problem told."""
        self._background = BackgroundTasks()

    def warn(self, regarding: ObjectRef, problem: str) -> bool:
        """Tell ``problem`` about ``regarding`` unless it was the last thing told about it; whether
        it was told. The event is sent only where an event loop runs (a unit test feeding events by
        hand gets the log line only)."""
        key = (regarding.kind, regarding.namespace or "", regarding.name)
        if self._told.get(key) == problem:
            return False
        self._told[key] = problem
        where = f"{regarding.namespace}/{regarding.name}" if regarding.namespace else regarding.name
        log.warning("%s %s: %s", regarding.kind.lower(), where, problem)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return True
        event = EventRecord(regarding=regarding, type="Warning", reason=self.reason, message=problem)
        self._background.spawn(self.backend.record_event(event))
        return True

    def clear(self, regarding: ObjectRef) -> None:
        """The object is fine (or gone): a later problem is told again."""
        self._told.pop((regarding.kind, regarding.namespace or "", regarding.name), None)
