"""The host's files behind one root path, so that tests read a fake tree under ``tmp_path``.

koordlet in a pod sees the host's ``/proc`` and ``/sys/fs/cgroup`` where the chart mounts them; the
root is ``/`` on a node and a temporary directory in unit tests. Paths are relative to the root.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["HostFS"]


class HostFS:
    """``mounts`` puts a host directory elsewhere than under ``root``: ``{"sys/fs/cgroup":
    Path("/host-cgroup")}`` is Koordinator's ``-cgroup-root-dir=/host-cgroup/`` (the longest
    matching prefix wins)."""

    def __init__(self, root: Path | str = "/", mounts: Mapping[str, Path] | None = None) -> None:
        self.root = Path(root)
        self.mounts = sorted(
            ((key.strip("/"), Path(value)) for key, value in (mounts or {}).items()), reverse=True
        )

    def path(self, relative: str) -> Path:
        relative = relative.lstrip("/")
        for prefix, mounted in self.mounts:
            if relative == prefix or relative.startswith(prefix + "/"):
                return mounted / relative[len(prefix) :].lstrip("/")
        return self.root / relative

    def read_text(self, relative: str) -> str:
        """The file's content; raises OSError (missing, permission denied) for the caller to judge."""
        return self.path(relative).read_text()

    def exists(self, relative: str) -> bool:
        return self.path(relative).exists()

    def is_dir(self, relative: str) -> bool:
        return self.path(relative).is_dir()

    def subdirs(self, relative: str) -> list[str]:
        """Names of the directories under ``relative``; empty when it is missing or unreadable."""
        try:
            return sorted(entry.name for entry in self.path(relative).iterdir() if entry.is_dir())
        except OSError:
            return []
