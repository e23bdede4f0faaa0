"""Named cgroup resources and the files behind them on cgroups v1 and v2.

Values are given in cgroups v1 units (quota and period in µs, ``cpu.shares``); on v2 they are
converted to the unified files (``cpu.max`` ``"<quota|max> <period>"``, ``cpu.weight``) as
Koordinator's ``pkg/koordlet/util/system/cgroup_resource.go`` maps them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["CgroupResource", "ResourceFile", "resource_file", "shares_to_weight"]


class CgroupResource(enum.StrEnum):
    CPUSET_CPUS = "cpuset.cpus"
    CPUSET_MEMS = "cpuset.mems"
    CPU_CFS_QUOTA = "cpu.cfs_quota_us"
    CPU_CFS_PERIOD = "cpu.cfs_period_us"
    CPU_SHARES = "cpu.shares"
    CPU_BURST = "cpu.cfs_burst_us"
    CPU_BVT_WARP_NS = "cpu.bvt_warp_ns"
    CPU_IDLE = "cpu.idle"
    MEMORY_LIMIT = "memory.limit_in_bytes"
    MEMORY_MIN = "memory.min"
    MEMORY_LOW = "memory.low"
    MEMORY_HIGH = "memory.high"


@dataclass(frozen=True)
class ResourceFile:
    subsystem: str
    """The v1 controller the file lives under (``cpu``, ``cpuset``, ``memory``); unused on v2."""
    name: str


_V1 = {
    CgroupResource.CPUSET_CPUS: ResourceFile("cpuset", "cpuset.cpus"),
    CgroupResource.CPUSET_MEMS: ResourceFile("cpuset", "cpuset.mems"),
    CgroupResource.CPU_CFS_QUOTA: ResourceFile("cpu", "cpu.cfs_quota_us"),
    CgroupResource.CPU_CFS_PERIOD: ResourceFile("cpu", "cpu.cfs_period_us"),
    CgroupResource.CPU_SHARES: ResourceFile("cpu", "cpu.shares"),
    CgroupResource.CPU_BURST: ResourceFile("cpu", "cpu.cfs_burst_us"),
    CgroupResource.CPU_BVT_WARP_NS: ResourceFile("cpu", "cpu.bvt_warp_ns"),
    CgroupResource.CPU_IDLE: ResourceFile("cpu", "cpu.idle"),
    CgroupResource.MEMORY_LIMIT: ResourceFile("memory", "memory.limit_in_bytes"),
    CgroupResource.MEMORY_MIN: ResourceFile("memory", "memory.min"),
    CgroupResource.MEMORY_LOW: ResourceFile("memory", "memory.low"),
    CgroupResource.MEMORY_HIGH: ResourceFile("memory", "memory.high"),
}
_V2 = {
    CgroupResource.CPUSET_CPUS: ResourceFile("", "cpuset.cpus"),
    CgroupResource.CPUSET_MEMS: ResourceFile("", "cpuset.mems"),
    CgroupResource.CPU_CFS_QUOTA: ResourceFile("", "cpu.max"),
    CgroupResource.CPU_CFS_PERIOD: ResourceFile("", "cpu.max"),
    CgroupResource.CPU_SHARES: ResourceFile("", "cpu.weight"),
    CgroupResource.CPU_BURST: ResourceFile("", "cpu.max.burst"),
    CgroupResource.CPU_BVT_WARP_NS: ResourceFile("", "cpu.bvt_warp_ns"),
    CgroupResource.CPU_IDLE: ResourceFile("", "cpu.idle"),
    CgroupResource.MEMORY_LIMIT: ResourceFile("", "memory.max"),
    CgroupResource.MEMORY_MIN: ResourceFile("", "memory.min"),
    CgroupResource.MEMORY_LOW: ResourceFile("", "memory.low"),
    CgroupResource.MEMORY_HIGH: ResourceFile("", "memory.high"),
}


def resource_file(resource: CgroupResource, version: int) -> ResourceFile:
    return (_V1 if version == 1 else _V2)[resource]


def shares_to_weight(shares: int) -> int:
    """``cpu.shares`` [2, 262144] to ``cpu.weight`` [1, 10000], the linear map runc and kubelet use."""
    shares = min(max(shares, 2), 262144)
    return 1 + ((shares - 2) * 9999) // 262142
