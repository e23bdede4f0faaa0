"""The first read of slo-controller-config: one GET for many waiting events; the watch event wins."""

from __future__ import annotations

import asyncio
from typing import Any

from operators.handlers.slo_config_read import FirstConfigRead


class SlowReader:
    def __init__(self) -> None:
        self.reads = 0
        self.reading = asyncio.Event()
        self.release = asyncio.Event()

    async def slo_config_map(self) -> dict[str, Any] | None:
        self.reads += 1
        self.reading.set()
        await self.release.wait()
        return {"data": {"k": "read"}}


async def test_waiting_events_share_one_read_and_take_it_once() -> None:
    reader = SlowReader()
    first = FirstConfigRead(reader)
    taken: list[Any] = []
    calls = [asyncio.create_task(first.ensure(lambda: bool(taken), taken.append)) for _ in range(4)]
    await reader.reading.wait()
    reader.release.set()
    await asyncio.gather(*calls)
    assert reader.reads == 1
    assert taken == [{"data": {"k": "read"}}]


async def test_a_watch_event_that_came_while_the_read_was_out_wins() -> None:
    reader = SlowReader()
    first = FirstConfigRead(reader)
    taken: list[Any] = []
    call = asyncio.create_task(first.ensure(lambda: bool(taken), taken.append))
    await reader.reading.wait()
    taken.append("from the watch event")
    reader.release.set()
    await call
    assert taken == ["from the watch event"]
