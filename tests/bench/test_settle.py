"""``settle`` waits for the cluster's processes to go quiet before a scheduler is measured."""

from __future__ import annotations

import asyncio
import sys

from e2e.bench.processes import settle


async def test_an_idle_process_is_settled_and_a_busy_one_is_not() -> None:
    idle = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(30)")
    busy = await asyncio.create_subprocess_exec(sys.executable, "-c", "while True: pass")
    try:
        assert await settle({"idle": idle.pid}, window=0.5, within=0) < 15
        # within=0: one window, its share returned although it is over the threshold (a low one:
        # on a loaded machine the busy loop gets a small share of a core)
        assert await settle({"busy": busy.pid}, below=5, window=0.5, within=0) >= 5
    finally:
        for process in (idle, busy):
            process.kill()
            await process.wait()
