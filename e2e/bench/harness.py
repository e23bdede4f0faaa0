"""What every cluster benchmark harness shares: its error, its progress lines and its phase timer.

Progress goes to stderr so that a report on stdout stays machine-readable (``-o json``).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

__all__ = ["BenchError", "log_progress", "phase"]


class BenchError(RuntimeError):
    """The benchmark could not run as asked (sizes that do not fit, a scheduler that did not start)."""


def log_progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def phase(
    phases: dict[str, float], name: str, progress: Callable[[str], None] = log_progress
) -> Iterator[None]:
    """Time one phase of a benchmark run into ``phases`` and say when it starts and ends."""
    progress(f"phase {name} ...")
    began = time.monotonic()
    try:
        yield
    finally:
        phases[name] = round(time.monotonic() - began, 1)
        progress(f"phase {name}: {phases[name]:.1f}s")
