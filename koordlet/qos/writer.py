"""Writes named cgroup resources under the host's cgroup mount, v1 or v2.

A write that cannot happen is logged once per file and reason and skipped; the caller's loop goes on.
A missing file (the kernel lacks the knob, or the cgroup is not there yet) is looked for again next
round. A write the kernel refuses (EPERM, EINVAL, EBUSY, ...) is retried with exponential backoff
(1 s doubling to 60 s) while the caller keeps asking for the same value; another value is tried at
once. Unchanged values are not rewritten.
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from koordlet.cgroups import CGROUP_MOUNT, CgroupVersion
from koordlet.fs import HostFS
from koordlet.qos.resources import CgroupResource, resource_file, shares_to_weight

__all__ = ["CgroupWriter", "WriteFailure"]

log = logging.getLogger("koordlet.qos")

_DEFAULT_PERIOD_US = 100_000
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 60.0
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


@dataclass(frozen=True)
class _Backoff:
    content: str
    failures: int
    retry_at: float


class CgroupWriter:
    """Reads and writes cgroup resources of paths relative to a hierarchy root (``kubepods/besteffort``)."""

    def __init__(
        self, fs: HostFS, version: CgroupVersion, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.fs = fs
        self.version = version
        self.clock = clock
        self.failures: list[WriteFailure] = []
        """Every distinct failure, in order (each also logged once)."""
        self._reported = _Reported()
        self._backoff: dict[str, _Backoff] = {}

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

    def write(
        self,
        path: str,
        resource: CgroupResource,
        value: int | str,
        *,
        applied: Callable[[str], bool] | None = None,
    ) -> bool:
        """Write ``value`` (v1 units); True when the file holds it afterwards. ``applied`` says
        whether the file's current content already holds it (default: equal to what is written),
        for the files of one line per device."""
        target = self.file(path, resource)
        content = self._render(path, resource, value)
        if not self.fs.exists(target):
            self._report(target, "missing (kernel without this knob, or no such cgroup)")
            return False
        try:
            current: str | None = self.fs.read_text(target).strip()
        except OSError:
            current = None
        if current is not None and (applied(current) if applied else current == content):
            self._backoff.pop(target, None)
            return True
        now = self.clock()
        held = self._backoff.get(target)
        if held is not None and held.content == content and now < held.retry_at:
            return False
        try:
            self.fs.path(target).write_text(content)
        except OSError as exc:
            failures = held.failures + 1 if held is not None and held.content == content else 1
            delay = min(BACKOFF_FIRST_SECONDS * 2 ** (failures - 1), BACKOFF_MAX_SECONDS)
            self._backoff[target] = _Backoff(content, failures, now + delay)
            reason = errno.errorcode.get(exc.errno or 0, "") or str(exc)
            self._report(target, f"{reason}: {exc.strerror or exc} (retrying with backoff)")
            return False
        self._backoff.pop(target, None)
        return True

    def retry_in(self, path: str, resource: CgroupResource) -> float | None:
        """Seconds until a refused write of the file is tried again; None when none is held back."""
        held = self._backoff.get(self.file(path, resource))
        return None if held is None else max(held.retry_at - self.clock(), 0.0)

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
