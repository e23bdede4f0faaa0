"""The resctrl filesystem: control groups, their schemata (L3 cache ways and memory bandwidth), tasks.

Formulas as Koordinator's ``pkg/koordlet/util/system/resctrl.go``: the root's L3 capacity bitmask has
``ways`` bits; a class with L3 range [start %, end %] gets the ways ``ceil(ways x start %)`` up to
``ceil(ways x end %)`` (``(1 << end) - (1 << start)``), the same mask on every cache id. Memory
bandwidth is a percent rounded up to a multiple of 10 on Intel, and on AMD 2048 for 100 % and
``int(160 x pct / 100)`` otherwise; a percent outside [1, 100] leaves MB unwritten.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
from dataclasses import dataclass
from typing import Literal

from koordlet.fs import HostFS

__all__ = [
    "RESCTRL_ROOT",
    "ResctrlInfo",
    "ResctrlWriter",
    "Vendor",
    "l3_mask",
    "mb_value",
    "render_schemata",
]

log = logging.getLogger("koordlet.qos")

RESCTRL_ROOT = "sys/fs/resctrl"
Vendor = Literal["intel", "amd"]


def l3_mask(ways: int, start_percent: int, end_percent: int) -> int:
    start = math.ceil(ways * start_percent / 100)
    end = math.ceil(ways * end_percent / 100)
    return (1 << end) - (1 << start)


def mb_value(vendor: Vendor, percent: int) -> int | None:
    if not 1 <= percent <= 100:
        return None
    if vendor == "amd":
        return 2048 if percent == 100 else int(160 * percent / 100)
    return math.ceil(percent / 10) * 10


@dataclass(frozen=True)
class ResctrlInfo:
    """What the root group offers: cache ids, their bitmask width, memory bandwidth ids."""

    ways: int
    l3_ids: tuple[str, ...]
    mb_ids: tuple[str, ...]
    vendor: Vendor


def render_schemata(info: ResctrlInfo, l3_start: int, l3_end: int, mb_percent: int) -> str:
    lines = []
    if info.l3_ids and info.ways > 0:
        mask = f"{l3_mask(info.ways, l3_start, l3_end):x}"
        lines.append("L3:" + ";".join(f"{cache}={mask}" for cache in info.l3_ids))
    mb = mb_value(info.vendor, mb_percent)
    if info.mb_ids and mb is not None:
        lines.append("MB:" + ";".join(f"{domain}={mb}" for domain in info.mb_ids))
    return "\n".join(lines) + ("\n" if lines else "")


def _parse_line(schemata: str, resource: str) -> dict[str, str]:
    for line in schemata.splitlines():
        name, _, rest = line.strip().partition(":")
        if name.strip() == resource:
            return dict(item.split("=", 1) for item in rest.split(";") if "=" in item)
    return {}


class ResctrlWriter:
    def __init__(self, fs: HostFS, root: str = RESCTRL_ROOT) -> None:
        self.fs = fs
        self.root = root
        self._reported: set[tuple[str, str]] = set()

    def available(self) -> bool:
        return self.fs.exists(f"{self.root}/schemata")

    def info(self) -> ResctrlInfo | None:
        try:
            schemata = self.fs.read_text(f"{self.root}/schemata")
        except OSError:
            return None
        l3 = _parse_line(schemata, "L3")
        try:
            cbm = int(self.fs.read_text(f"{self.root}/info/L3/cbm_mask").strip(), 16)
        except (OSError, ValueError):
            cbm = int(next(iter(l3.values()), "0"), 16)
        return ResctrlInfo(
            ways=cbm.bit_length(),
            l3_ids=tuple(l3),
            mb_ids=tuple(_parse_line(schemata, "MB")),
            vendor=self._vendor(),
        )

    def _vendor(self) -> Vendor:
        try:
            cpuinfo = self.fs.read_text("proc/cpuinfo")
        except OSError:
            return "intel"
        return "amd" if "AuthenticAMD" in cpuinfo or "HygonGenuine" in cpuinfo else "intel"

    def group_dir(self, group: str) -> str:
        return f"{self.root}/{group}"

    def ensure_group(self, group: str) -> bool:
        try:
            self.fs.path(self.group_dir(group)).mkdir(exist_ok=True)
        except OSError as exc:
            self._report(self.group_dir(group), str(exc))
            return False
        return True

    def remove_group(self, group: str) -> None:
        """rmdir, which the kernel's resctrl allows with the group's files in it; a plain directory
        (a test tree) has them removed first."""
        path = self.fs.path(self.group_dir(group))
        try:
            path.rmdir()
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                return
            with contextlib.suppress(OSError):
                for child in path.iterdir():
                    child.unlink()
                path.rmdir()

    def groups(self) -> list[str]:
        return [name for name in self.fs.subdirs(self.root) if name not in ("info", "mon_data", "mon_groups")]

    def write_schemata(self, group: str, schemata: str) -> bool:
        if not schemata or not self.ensure_group(group):
            return False
        target = f"{self.group_dir(group)}/schemata"
        try:
            self.fs.path(target).write_text(schemata)
        except OSError as exc:
            self._report(target, str(exc))
            return False
        return True

    def tasks(self, group: str) -> set[int]:
        try:
            text = self.fs.read_text(f"{self.group_dir(group)}/tasks")
        except OSError:
            return set()
        return {int(line) for line in text.split() if line.isdigit()}

    def add_tasks(self, group: str, pids: list[int]) -> int:
        """Moves the pids not yet in the group there, one write each (the kernel takes one per write);
        returns how many moved. A pid that exited meanwhile is skipped silently."""
        if not pids or not self.ensure_group(group):
            return 0
        present = self.tasks(group)
        moved = 0
        target = self.fs.path(f"{self.group_dir(group)}/tasks")
        for pid in pids:
            if pid in present:
                continue
            try:
                with target.open("a") as tasks:
                    tasks.write(f"{pid}\n")
                moved += 1
            except ProcessLookupError:
                continue
            except OSError as exc:
                self._report(str(target), str(exc))
                break
        return moved

    def _report(self, target: str, reason: str) -> None:
        if (target, reason) in self._reported:
            return
        self._reported.add((target, reason))
        log.warning("resctrl write skipped: %s %s", target, reason)
