"""Writes named cgroup resources under the host's cgroup mount, v1 or v2.

A write that cannot happen (the file is missing because the kernel lacks the knob or the cgroup is
gone, EPERM, EINVAL) is logged once per file and reason and skipped: the caller's loop goes on and
the next round tries again. Unchanged values are not rewritten.
"""

from __future__ import annotations

import errno
import logging
from dataclasses import dataclass, field

from koordlet.cgroups import CGROUP_MOUNT, CgroupVersion
from koordlet.fs import HostFS
from koordlet.qos.resources import CgroupResource, resource_file, shares_to_weight

__all__ = ["CgroupWriter", "WriteFailure"]

log = logging.getLogger("koordlet.qos")

_DEFAULT_PERIOD_US = 100_000
_V1_MOUNTS = {
    "cpu": ("cpu", "cpu,cpuacct", "cpuacct,cpu"),
    "cpuset": ("cpuset",),
    "memory": ("memory",),
}


@dataclass(frozen=True)
class WriteFailure:
    file: str
    reason: str


@dataclass
class _Reported:
    seen: set[tuple[str, str]] = field(default_factory=set)


class CgroupWriter:
    """Reads and writes cgroup resources of paths relative to a hierarchy root (``kubepods/besteffort``)."""

    def __init__(self, fs: HostFS, version: CgroupVersion) -> None:
        self.fs = fs
        self.version = version
        self.failures: list[WriteFailure] = []
        """Every distinct failure, in order (each also logged once)."""
        self._reported = _Reported()

    def subsystem_root(self, subsystem: str) -> str:
        if self.version == 2:
            return CGROUP_MOUNT
        for name in _V1_MOUNTS.get(subsystem, (subsystem,)):
            if self.fs.is_dir(f"{CGROUP_MOUNT}/{name}"):
                return f"{CGROUP_MOUNT}/{name}"
        return f"{CGROUP_MOUNT}/{subsystem}"

    def file(self, path: str, resource: CgroupResource) -> str:
        spec = resource_file(resource, self.version)
        parts = [self.subsystem_root(spec.subsystem), path.strip("/"), spec.name]
        return "/".join(part for part in parts if part)

    def supported(self, path: str, resource: CgroupResource) -> bool:
        """Whether the kernel offers the resource's file in this cgroup."""
        return self.fs.exists(self.file(path, resource))

    def read(self, path: str, resource: CgroupResource) -> str | None:
        """The raw content (stripped), None where the file cannot be read."""
        try:
            return self.fs.read_text(self.file(path, resource)).strip()
        except OSError:
            return None

    def read_int(self, path: str, resource: CgroupResource) -> int | None:
        """The value in v1 units: quota -1 for unlimited, ``cpu.max``'s period, shares as written."""
        raw = self.read(path, resource)
        if raw is None:
            return None
        if self.version == 2 and resource in (CgroupResource.CPU_CFS_QUOTA, CgroupResource.CPU_CFS_PERIOD):
            quota, _, period = raw.partition(" ")
            value = quota if resource is CgroupResource.CPU_CFS_QUOTA else period or str(_DEFAULT_PERIOD_US)
            return -1 if value == "max" else int(value)
        if raw == "max":
            return -1
        try:
            return int(raw)
        except ValueError:
            return None

    def write(self, path: str, resource: CgroupResource, value: int | str) -> bool:
        """Write ``value`` (v1 units); True when the file holds it afterwards."""
        target = self.file(path, resource)
        content = self._render(path, resource, value)
        if not self.fs.exists(target):
            self._report(target, "missing (kernel without this knob, or no such cgroup)")
            return False
        try:
            current = self.fs.read_text(target).strip()
        except OSError:
            current = None
        if current == content:
            return True
        try:
            self.fs.path(target).write_text(content)
        except OSError as exc:
            reason = errno.errorcode.get(exc.errno or 0, "") or str(exc)
            self._report(target, f"{reason}: {exc.strerror or exc}")
            return False
        return True

    def _render(self, path: str, resource: CgroupResource, value: int | str) -> str:
        if isinstance(value, str):
            return value
        if self.version == 1:
            return str(value)
        if resource is CgroupResource.CPU_CFS_QUOTA:
            period = self.read_int(path, CgroupResource.CPU_CFS_PERIOD) or _DEFAULT_PERIOD_US
            return f"{'max' if value < 0 else value} {period}"
        if resource is CgroupResource.CPU_CFS_PERIOD:
            quota = self.read_int(path, CgroupResource.CPU_CFS_QUOTA)
            return f"{'max' if quota is None or quota < 0 else quota} {value}"
        if resource is CgroupResource.CPU_SHARES:
            return str(shares_to_weight(value))
        if resource in (CgroupResource.MEMORY_LIMIT, CgroupResource.MEMORY_HIGH) and value < 0:
            return "max"
        return str(value)

    def _report(self, target: str, reason: str) -> None:
        key = (target, reason)
        if key in self._reported.seen:
            return
        self._reported.seen.add(key)
        self.failures.append(WriteFailure(target, reason))
        log.warning("cgroup write skipped: %s %s", self.fs.path(target), reason)
