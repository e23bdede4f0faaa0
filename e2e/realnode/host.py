"""Small host helpers shared by preflight, start and stop: run a command, list cgroup hierarchies,
read the mount table, and find the processes that run one of our binaries."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "CGROUP_FS",
    "cgroup_hierarchies",
    "is_cgroup2_root",
    "mounts_under",
    "primary_ip",
    "processes_matching",
    "run",
    "sh_ok",
]

CGROUP_FS = Path("/sys/fs/cgroup")


def run(*argv: str, check: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run a host command; ``check``: a non-zero exit raises with its stderr."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def sh_ok(*argv: str) -> bool:
    try:
        return run(*argv, check=False, timeout=30.0).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy: on a v2 host ``/sys/fs/cgroup`` itself; on a v1 or hybrid
    host each controller's (and named) mount, plus ``unified`` when it is there."""
    hierarchies: list[Path] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype = right.split()[0] if right else ""
        mount_point = Path(left.split()[4])
        if fstype in ("cgroup", "cgroup2") and mount_point.is_relative_to(CGROUP_FS):
            hierarchies.append(mount_point)
    return sorted(set(hierarchies))


def is_cgroup2_root() -> bool:
    """A pure v2 host: ``/sys/fs/cgroup`` itself is the unified hierarchy (what kubelet calls v2)."""
    return CGROUP_FS in cgroup_hierarchies()


def mounts_under(directory: Path) -> list[Path]:
    """Mount points at or below ``directory``, deepest first (the order to unmount them)."""
    prefix = str(directory.resolve())
    found: list[Path] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount_point = line.split()[4].replace("\\040", " ")
        if mount_point == prefix or mount_point.startswith(prefix + "/"):
            found.append(Path(mount_point))
    return sorted(found, key=lambda p: (-len(p.parts), str(p)))


def _cmdlines() -> Iterator[tuple[int, list[str]]]:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if raw:
            yield int(entry.name), [a.decode(errors="replace") for a in raw.rstrip(b"\0").split(b"\0")]


def processes_matching(needle: str) -> list[tuple[int, str]]:
    """(pid, command line) of each process whose command line contains ``needle``."""
    me = os.getpid()
    return [(pid, " ".join(argv)) for pid, argv in _cmdlines() if pid != me and needle in " ".join(argv)]


def primary_ip() -> str:
    """The host's address on its default route: what pods reach the API server at."""
    out = run("ip", "-4", "route", "get", "1.1.1.1").stdout.split()
    return out[out.index("src") + 1]
