"""Warning events on the objects whose NUMA data the plugin cannot use (an NRT, a pod's
``resource-status``, a Node's amplification ratios), each problem reported once."""

from __future__ import annotations

import asyncio

from apis.client.backend import EventRecord, ObjectRef
from scheduler.background import BackgroundTasks
from scheduler.framework.handle import Handle

__all__ = ["WarningEvents"]


class WarningEvents:
    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self._background = BackgroundTasks()

    def warn(self, regarding: ObjectRef, message: str) -> None:
        """A Warning event (only where an event loop runs: a unit test feeding events by hand has
        the log line only)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        event = EventRecord(regarding=regarding, type="Warning", reason="InvalidAnnotation", message=message)
        self._background.spawn(self.handle.backend.record_event(event))
