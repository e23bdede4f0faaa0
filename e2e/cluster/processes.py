"""Stop a local process group within a bounded time, and say truthfully how it went.

SIGTERM first, then up to ``timeout`` seconds for the group leader to exit, then SIGKILL. Used by
``e2e.components`` (one component) and ``ControlPlane.stop`` (every component of a cluster, before
the API server goes, so none of them is left talking to a dead one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Literal

__all__ = ["Stopped", "alive", "stop_group"]

Outcome = Literal["stopped", "killed", "not running"]


@dataclass(frozen=True)
class Stopped:
    """What stopping one process did."""

    name: str
    pid: int | None
    outcome: Outcome
    """``stopped``: it exited on SIGTERM; ``killed``: it needed SIGKILL; ``not running``: nothing to do."""
    seconds: float

    def __str__(self) -> str:
        if self.outcome == "not running":
            return f"{self.name} was not running"
        if self.outcome == "stopped":
            return f"stopped {self.name} (pid {self.pid}) after {self.seconds:.1f} s"
        return f"killed {self.name} (pid {self.pid}) after {self.seconds:.1f} s: it did not exit on SIGTERM"


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state != "Z"


def _wait(pid: int, child: subprocess.Popen[bytes] | None, deadline: float) -> bool:
    """Wait until ``pid`` exits or ``deadline`` passes; True if it exited."""
    while time.monotonic() < deadline:
        if child is not None:
            if child.poll() is not None:
                return True
        elif not alive(pid):
            return True
        time.sleep(0.05)
    return child.poll() is not None if child is not None else not alive(pid)


def stop_group(
    name: str, pid: int | None, *, timeout: float, child: subprocess.Popen[bytes] | None = None
) -> Stopped:
    """SIGTERM the process group led by ``pid``, wait up to ``timeout`` s, then SIGKILL it.

    ``child``: the Popen of ``pid`` when this process started it, so it is reaped (no zombie).
    """
    if pid is None or not alive(pid):
        if child is not None:
            child.poll()
        return Stopped(name, pid, "not running", 0.0)
    began = time.monotonic()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    if _wait(pid, child, began + timeout):
        return Stopped(name, pid, "stopped", time.monotonic() - began)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    _wait(pid, child, time.monotonic() + 5.0)
    return Stopped(name, pid, "killed", time.monotonic() - began)
