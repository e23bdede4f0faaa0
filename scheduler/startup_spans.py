"""Where a start-up's time goes: seconds per step, summed, for the start-up log line.

The informers' first list is what makes koord-scheduler's start scale with the cluster's pods
(issue 32), so the steps of handling it are timed (``EventHandlers``) and logged once with the
seconds since the process started (``scheduler.app``); ``e2e.bench.startup`` reads that line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["StartupSpans", "seconds_since_process_start"]


@dataclass
class StartupSpans:
    seconds: dict[str, float] = field(default_factory=dict)
    """Seconds per step, in the order the steps first ran."""

    @contextmanager
    def span(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - began)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def rounded(self) -> dict[str, float]:
        return {name: round(seconds, 3) for name, seconds in self.seconds.items()}


def seconds_since_process_start() -> float | None:
    """Wall seconds since this process was started (``/proc``; None where there is none): covers
    the interpreter's start and the imports, which no timer inside the program sees."""
    try:
        stat = Path(f"/proc/{os.getpid()}/stat").read_text()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        started = int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None
    return max(uptime - started, 0.0)
