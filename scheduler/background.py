"""Fire-and-forget coroutines that are kept referenced until they finish.

asyncio holds only weak references to tasks, so a task nobody keeps can be garbage-collected
mid-flight; every component that starts background writes (events, status patches, bindings,
evictions) keeps them in one of these.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["BackgroundTasks"]


class BackgroundTasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    def cancel(self) -> None:
        """Cancel every task in flight (they are gone from the set once their cancellation is done)."""
        for task in list(self._tasks):
            task.cancel()

    async def drain(self, grace_seconds: float) -> None:
        """Let the tasks in flight finish, for at most ``grace_seconds``."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace_seconds)
