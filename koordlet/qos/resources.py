"""Named cgroup resources and the files behind them on cgroups v1 and v2.

Values are given in cgroups v1 units (quota and period in µs, ``cpu.shares``); on v2 they are
converted to the unified files (``cpu.max`` ``"<quota|max> <period>"``, ``cpu.weight``) as
Koordinator's ``pkg/koordlet/util/system/cgroup_resource.go`` maps them. The block-IO files hold one
line per device (``<major>:<minor> <value>``); :mod:`koordlet.qos.blkio` renders them per version.
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
    BLKIO_READ_IOPS = "blkio.throttle.read_iops_device"
    BLKIO_READ_BPS = "blkio.throttle.read_bps_device"
    BLKIO_WRITE_IOPS = "blkio.throttle.write_iops_device"
    BLKIO_WRITE_BPS = "blkio.throttle.write_bps_device"
    BLKIO_WEIGHT = "blkio.cost.weight"
    BLKIO_COST_QOS = "blkio.cost.qos"
    BLKIO_COST_MODEL = "blkio.cost.model"


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
    CgroupResource.BLKIO_READ_IOPS: ResourceFile("blkio", "blkio.throttle.read_iops_device"),
    CgroupResource.BLKIO_READ_BPS: ResourceFile("blkio", "blkio.throttle.read_bps_device"),
    CgroupResource.BLKIO_WRITE_IOPS: ResourceFile("blkio", "blkio.throttle.write_iops_device"),
    CgroupResource.BLKIO_WRITE_BPS: ResourceFile("blkio", "blkio.throttle.write_bps_device"),
    # blk-iocost on cgroups v1 is an Anolis / Alibaba Cloud Linux addition (upstream has it on v2 only)
    CgroupResource.BLKIO_WEIGHT: ResourceFile("blkio", "blkio.cost.weight"),
    CgroupResource.BLKIO_COST_QOS: ResourceFile("blkio", "blkio.cost.qos"),
    CgroupResource.BLKIO_COST_MODEL: ResourceFile("blkio", "blkio.cost.model"),
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
    # one io.max line carries all four limits of a device (``rbps= wbps= riops= wiops=``)
    CgroupResource.BLKIO_READ_IOPS: ResourceFile("", "io.max"),
    CgroupResource.BLKIO_READ_BPS: ResourceFile("", "io.max"),
    CgroupResource.BLKIO_WRITE_IOPS: ResourceFile("", "io.max"),
    CgroupResource.BLKIO_WRITE_BPS: ResourceFile("", "io.max"),
    CgroupResource.BLKIO_WEIGHT: ResourceFile("", "io.weight"),
    CgroupResource.BLKIO_COST_QOS: ResourceFile("", "io.cost.qos"),
    CgroupResource.BLKIO_COST_MODEL: ResourceFile("", "io.cost.model"),
}


def resource_file(resource: CgroupResource, version: int) -> ResourceFile:
    return (_V1 if version == 1 else _V2)[resource]


def shares_to_weight(shares: int) -> int:
    """``cpu.shares`` [2, 262144] to ``cpu.weight`` [1, 10000], the linear map runc and kubelet use."""
    shares = min(max(shares, 2), 262144)
    return 1 + ((shares - 2) * 9999) // 262142
