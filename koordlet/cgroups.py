"""Pods' and containers' cgroups as kubelet lays them out, read through cgroups v1 or v2.

kubelet puts every pod under the ``kubepods`` cgroup of its ``--cgroup-root``, in a QoS sub-group for
Burstable and BestEffort pods, and names the pod's cgroup after its UID:

=========  ====================================================================================
driver     pod cgroup (container cgroups below it)
=========  ====================================================================================
cgroupfs   ``kubepods/burstable/pod<uid>/<container-id>``
systemd    ``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice/``
           ``cri-containerd-<container-id>.scope`` (``docker-``, ``crio-`` for other runtimes)
=========  ====================================================================================

Both drivers are searched, so koordlet needs no flag for them. On cgroups v1 the paths repeat under
each controller's mount (``cpuacct``, ``memory``); on v2 there is one tree. A host with v1
controllers and the unified v2 hierarchy mounted beside them (``/sys/fs/cgroup/unified``) keeps cpu
and memory accounting in v1, so v1 is read there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from koordlet.fs import HostFS

__all__ = [
    "CGROUP_MOUNT",
    "CgroupReader",
    "MemoryStat",
    "PodCgroup",
    "detect_version",
    "discover_pods",
    "parse_idle_page_stats",
]

CGROUP_MOUNT = "sys/fs/cgroup"
CgroupVersion = Literal[1, 2]

_CGROUPFS_POD = re.compile(r"^pod([0-9a-fA-F-]+)$")
_SYSTEMD_POD = re.compile(r"^kubepods(?:-burstable|-besteffort)?-pod([0-9a-fA-F_]+)\.slice$")
_CONTAINER = re.compile(r"^(?:(?:cri-containerd|docker|crio)-)?([0-9a-f]{64})(?:\.scope)?$")
_QOS_GROUPS = {
    "kubepods": ("", "burstable", "besteffort"),
    "kubepods.slice": ("", "kubepods-burstable.slice", "kubepods-besteffort.slice"),
}
IDLE_PAGE_STATS_FILES = ("memory.idle_page_stats", "memory.idle_stat")
"""kidled's per-cgroup cold page histogram (Anolis kernels name it ``memory.idle_page_stats``)."""


def detect_version(fs: HostFS) -> CgroupVersion | None:
    """2 on a pure v2 host, 1 where the v1 cpu accounting controller is mounted (hybrid hosts
    included), None without cgroups."""
    if fs.exists(f"{CGROUP_MOUNT}/cgroup.controllers"):
        return 2
    if fs.is_dir(f"{CGROUP_MOUNT}/cpuacct") or fs.is_dir(f"{CGROUP_MOUNT}/cpu,cpuacct"):
        return 1
    return None


@dataclass(frozen=True)
class PodCgroup:
    uid: str
    path: str
    """The pod's cgroup, relative to a hierarchy root (``kubepods/burstable/pod<uid>``)."""
    containers: dict[str, str] = field(default_factory=dict)
    """Container ID -> its cgroup path."""


@dataclass(frozen=True)
class MemoryStat:
    """The fields of ``memory.stat`` koordlet uses (v1 reads the hierarchical ``total_`` ones)."""

    inactive_anon: int = 0
    active_anon: int = 0
    unevictable: int = 0
    inactive_file: int = 0
    active_file: int = 0

    @property
    def usage(self) -> int:
        """Usage without page cache: anonymous and unevictable memory."""
        return self.inactive_anon + self.active_anon + self.unevictable

    @property
    def page_cache(self) -> int:
        return self.inactive_file + self.active_file

    @property
    def usage_with_page_cache(self) -> int:
        return self.usage + self.page_cache


def parse_idle_page_stats(text: str) -> int:
    """Bytes of idle (cold) pages in a kidled histogram: every bucket of every page class, as
    Koordinator's kidled collector sums them."""
    total = 0
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        total += sum(int(value) for value in fields[1:] if value.isdigit())
    return total


class CgroupReader:
    """Reads cpu and memory accounting of a cgroup path under the host's cgroup mount."""

    def __init__(self, fs: HostFS, version: CgroupVersion) -> None:
        self.fs = fs
        self.version = version
        if version == 1:
            cpu = "cpuacct" if fs.is_dir(f"{CGROUP_MOUNT}/cpuacct") else "cpu,cpuacct"
            self._cpu_root = f"{CGROUP_MOUNT}/{cpu}"
            self._memory_root = f"{CGROUP_MOUNT}/memory"
        else:
            self._cpu_root = self._memory_root = CGROUP_MOUNT

    def _cpu_file(self, path: str, name: str) -> str:
        return f"{self._cpu_root}/{path.strip('/')}/{name}".replace("//", "/")

    def _memory_file(self, path: str, name: str) -> str:
        return f"{self._memory_root}/{path.strip('/')}/{name}".replace("//", "/")

    @property
    def hierarchy(self) -> str:
        """The hierarchy pods are searched in (the cpu accounting one on v1)."""
        return self._cpu_root

    def cpu_usage_ns(self, path: str) -> int:
        """Cumulative CPU time of the cgroup in nanoseconds."""
        if self.version == 1:
            return int(self.fs.read_text(self._cpu_file(path, "cpuacct.usage")).strip())
        for line in self.fs.read_text(self._cpu_file(path, "cpu.stat")).splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) * 1000
        raise ValueError(f"no usage_usec in {self._cpu_file(path, 'cpu.stat')}")

    def memory_stat(self, path: str) -> MemoryStat:
        values: dict[str, int] = {}
        for line in self.fs.read_text(self._memory_file(path, "memory.stat")).splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                values[key] = int(value)
        prefix = "total_" if self.version == 1 else ""
        return MemoryStat(
            inactive_anon=values.get(f"{prefix}inactive_anon", 0),
            active_anon=values.get(f"{prefix}active_anon", 0),
            unevictable=values.get(f"{prefix}unevictable", 0),
            inactive_file=values.get(f"{prefix}inactive_file", 0),
            active_file=values.get(f"{prefix}active_file", 0),
        )

    def cold_page_bytes(self, path: str) -> int | None:
        """Cold page bytes from kidled's file in the cgroup, None where the kernel has none."""
        for name in IDLE_PAGE_STATS_FILES:
            relative = self._memory_file(path, name)
            if self.fs.exists(relative):
                return parse_idle_page_stats(self.fs.read_text(relative))
        return None


def discover_pods(reader: CgroupReader, cgroup_root: str = "/") -> list[PodCgroup]:
    """Every pod cgroup under ``<cgroup_root>/kubepods`` (cgroupfs) and ``kubepods.slice`` (systemd).

    ``cgroup_root`` is kubelet's ``--cgroup-root``.
    """
    pods: list[PodCgroup] = []
    base = cgroup_root.strip("/")
    for kubepods, qos_groups in _QOS_GROUPS.items():
        for qos in qos_groups:
            parent = "/".join(part for part in (base, kubepods, qos) if part)
            for name in reader.fs.subdirs(f"{reader.hierarchy}/{parent}"):
                match = _CGROUPFS_POD.match(name) or _SYSTEMD_POD.match(name)
                if match is None:
                    continue
                uid = match.group(1).replace("_", "-")
                path = f"{parent}/{name}"
                containers = {
                    found.group(1): f"{path}/{child}"
                    for child in reader.fs.subdirs(f"{reader.hierarchy}/{path}")
                    if (found := _CONTAINER.match(child)) is not None
                }
                pods.append(PodCgroup(uid=uid, path=path, containers=containers))
    return pods
