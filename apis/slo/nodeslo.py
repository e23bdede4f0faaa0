"""NodeSLO (``slo.koordinator.sh/v1alpha1``, cluster-scoped): QoS strategies for one node.

Named after its node. koord-manager renders the spec from the ``slo-controller-config``
ConfigMap; the defaults quoted in the field descriptions are the controller's, not the
schema's (only ``networkQOS`` carries schema defaults). ``status`` is always empty.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from apis.base import CRDInfo, KoordModel
from apis.meta import KoordResource
from apis.quantity import Quantity
from apis.types import Int32, Int64, IntOrString, PreserveUnknownObject

__all__ = [
    "BlkIOQOSCfg",
    "BlockCfg",
    "CPUBurstStrategy",
    "CPUQOSCfg",
    "HostApplicationSpec",
    "HostApplicationStrategy",
    "IOCfg",
    "MemoryQOSCfg",
    "NetworkQOSCfg",
    "NodeCgroupDir",
    "NodeSLO",
    "NodeSLOSpec",
    "NodeSLOStatus",
    "ResctrlQOSCfg",
    "ResourceQOS",
    "ResourceQOSPolicies",
    "ResourceQOSStrategy",
    "ResourceThresholdStrategy",
    "SystemStrategy",
]

Percent = Int64
"""An int64 percentage; ranges are added per field where the schema enforces them."""


class ResourceThresholdStrategy(KoordModel):
    """Suppression and eviction of BE pods when the node is overloaded."""

    enable: bool | None = None
    """Whether the strategy is enabled; controller default false."""
    cpu_suppress_threshold_percent: Percent | None = Field(default=None, ge=0, le=100)
    """CPU usage threshold for suppressing BE pods; controller default 65."""
    cpu_suppress_min_percent: Percent | None = Field(default=None, ge=0, le=100)
    """Minimum CPU share left to BE pods while suppressed."""
    cpu_suppress_policy: str | None = None
    """cpuset (controller default) or cfsQuota (not enforced by the schema)."""
    memory_evict_threshold_percent: Percent | None = Field(default=None, ge=0, le=100)
    """Memory usage above which BE pods are evicted; controller default 70."""
    memory_evict_lower_percent: Percent | None = Field(default=None, ge=0, le=100)
    """Eviction stops below this memory usage; controller default threshold - 2."""
    memory_allocatable_evict_threshold_percent: Percent | None = Field(default=None, ge=0)
    """Memory request ratio above which BE pods are evicted (documented as 110, but koordlet
    applies no default: unset disables the feature with an error)."""
    memory_allocatable_evict_lower_percent: Percent | None = Field(default=None, ge=0)
    """Allocatable eviction stops below this memory request ratio (documented as 100; no
    default is applied)."""
    cpu_allocatable_evict_threshold_percent: Percent | None = Field(default=None, ge=0)
    """CPU request ratio above which BE pods are evicted (documented as 110; no default is
    applied)."""
    cpu_allocatable_evict_lower_percent: Percent | None = Field(default=None, ge=0)
    """Allocatable eviction stops below this CPU request ratio (documented as 100; no default
    is applied)."""
    cpu_evict_be_satisfaction_upper_percent: Percent | None = Field(
        default=None, alias="cpuEvictBESatisfactionUpperPercent"
    )
    """CPU eviction stops once the BE satisfaction rate (real limit / request) exceeds this."""
    cpu_evict_be_satisfaction_lower_percent: Percent | None = Field(
        default=None, alias="cpuEvictBESatisfactionLowerPercent"
    )
    """CPU eviction starts when the BE satisfaction rate falls below this and BE usage is high."""
    cpu_evict_be_usage_threshold_percent: Percent | None = Field(
        default=None, alias="cpuEvictBEUsageThresholdPercent"
    )
    """BE CPU usage (of its real limit) at which releasing resources is considered."""
    cpu_evict_time_window_seconds: Int64 | None = None
    """Window over which average CPU usage is computed for CPU eviction."""
    cpu_evict_threshold_percent: Percent | None = Field(default=None, ge=0, le=100)
    """CPU usage above which BE pods are evicted (CPUEvict feature)."""
    cpu_evict_lower_percent: Percent | None = Field(default=None, ge=0, le=100)
    """CPU eviction stops below this usage; controller default threshold - 2."""
    cpu_evict_policy: str | None = None
    """evictByRealLimit (controller default) or evictByAllocatable (not enforced by the
    schema)."""
    evict_enabled_priority_threshold: Int32 | None = None
    """Highest priority evicted by the usage-based eviction features (koordlet checks 0-7999)."""
    allocatable_evict_priority_threshold: Int32 | None = None
    """Highest priority evicted by the allocatable-based eviction features; must be below
    koord-prod (koordlet checks 0-7999)."""


class ResourceQOSPolicies(KoordModel):
    """Which kernel mechanism implements each QoS."""

    cpu_policy: str | None = None
    """groupIdentity (controller default) or coreSched (not enforced by the schema)."""
    net_qos_policy: str | None = Field(default=None, alias="netQOSPolicy")
    """tc (controller default) or terway-qos (not enforced by the schema)."""


class CPUQOSCfg(KoordModel):
    """Node-level CPU QoS of one QoS class."""

    enable: bool | None = None
    """Whether CPU QoS is enabled; controller default false."""
    group_identity: Int64 | None = None
    """Group identity value, -1 to 2 (LSR/LS 2, BE -1, SYSTEM 0 by default); used when
    cpuPolicy is groupIdentity."""
    sched_idle: Int64 | None = None
    """cpu.idle value, 0 or 1 (1 means SCHED_IDLE); used when cpuPolicy is coreSched."""
    core_expeller: bool | None = None
    """Whether the class may expel idle pods at the SMT level (true for LSR/LS by default);
    used when cpuPolicy is coreSched."""


class MemoryQOSCfg(KoordModel):
    """Node-level memory QoS of one QoS class."""

    enable: bool | None = None
    """Whether memory QoS is enabled; controller default false."""
    min_limit_percent: Percent | None = Field(default=None, ge=0)
    """Percentage of the memory request protected by memory.min; 0 disables."""
    low_limit_percent: Percent | None = Field(default=None, ge=0)
    """Percentage of the memory request best-effort protected by memory.low; 0 disables."""
    throttling_percent: Percent | None = Field(default=None, ge=0)
    """Factor for memory.high between request and limit; 0 disables."""
    wmark_ratio: Percent | None = Field(default=None, ge=0, le=100)
    """memory.wmark_ratio for async reclaim (Anolis OS); 0 disables, 95 recommended."""
    wmark_scale_permill: Int64 | None = Field(default=None, ge=1, le=1000)
    """memory.wmark_scale_factor in permille (Anolis OS); 50 when closed, 20 recommended."""
    wmark_min_adj: Int64 | None = Field(default=None, ge=-25, le=50)
    """memory.wmark_min_adj (Anolis OS); 0 disables, -25 recommended for LSR/LS, 50 for BE."""
    priority_enable: Int64 | None = None
    """Whether memcg OOM priority is enabled, 0 or 1."""
    priority: Int64 | None = None
    """memcg OOM priority, 0 to 12."""
    oom_kill_group: Int64 | None = None
    """Whether the whole memcg is killed on OOM, 0 or 1."""


class IOCfg(KoordModel):
    """blkio throttling and weights of one block device."""

    read_iops: Int64 | None = Field(default=None, alias="readIOPS", ge=0)
    """Read IOPS limit; 0 disables."""
    write_iops: Int64 | None = Field(default=None, alias="writeIOPS", ge=0)
    """Write IOPS limit; 0 disables."""
    read_bps: Int64 | None = Field(default=None, alias="readBPS", ge=0)
    """Read bytes/s limit; 0 disables."""
    write_bps: Int64 | None = Field(default=None, alias="writeBPS", ge=0)
    """Write bytes/s limit; 0 disables."""
    io_weight_percent: Int64 | None = Field(default=None, ge=1, le=100)
    """blk-iocost weight of the group, 1 to 100; default 100."""
    read_latency: Int64 | None = None
    """blk-iocost read latency threshold in microseconds (root class only)."""
    write_latency: Int64 | None = None
    """blk-iocost write latency threshold in microseconds (root class only)."""
    read_latency_percent: Int64 | None = Field(default=None, ge=0, le=100)
    """Read latency percentile for blk-iocost."""
    write_latency_percent: Int64 | None = Field(default=None, ge=0, le=100)
    """Write latency percentile for blk-iocost."""
    enable_user_model: bool | None = None
    """Whether the blk-iocost cost model below is used; default false."""
    model_read_bps: Int64 | None = Field(default=None, alias="modelReadBPS", ge=1)
    """Read bytes/s of the user cost model."""
    model_write_bps: Int64 | None = Field(default=None, alias="modelWriteBPS", ge=1)
    """Write bytes/s of the user cost model."""
    model_read_seq_iops: Int64 | None = Field(default=None, alias="modelReadSeqIOPS", ge=1)
    """Sequential read IOPS of the user cost model."""
    model_write_seq_iops: Int64 | None = Field(default=None, alias="modelWriteSeqIOPS", ge=1)
    """Sequential write IOPS of the user cost model."""
    model_read_rand_iops: Int64 | None = Field(default=None, alias="modelReadRandIOPS", ge=1)
    """Random read IOPS of the user cost model."""
    model_write_rand_iops: Int64 | None = Field(default=None, alias="modelWriteRandIOPS", ge=1)
    """Random write IOPS of the user cost model."""


class BlockCfg(KoordModel):
    """blkio settings of one block device, volume group or pod volume."""

    name: str | None = None
    """Device, volume-group or volume name."""
    type: str | None = None
    """device, volumegroup or podvolume (not enforced by the schema)."""
    io_cfg: IOCfg | None = None
    """The throttling and weight settings."""


class BlkIOQOSCfg(KoordModel):
    """Node-level blkio QoS of one QoS class."""

    enable: bool | None = None
    """Whether blkio QoS is enabled; controller default false."""
    blocks: list[BlockCfg] | None = None
    """Per-block settings."""


class ResctrlQOSCfg(KoordModel):
    """Node-level resctrl (LLC and memory bandwidth) QoS of one QoS class."""

    enable: bool | None = None
    """Whether resctrl QoS is enabled; controller default false."""
    cat_range_start_percent: Percent | None = Field(default=None, ge=0, le=100)
    """Start of the LLC range available to the class; controller default 0."""
    cat_range_end_percent: Percent | None = Field(default=None, ge=0, le=100)
    """End of the LLC range available to the class; controller default 30 for BE, else 100."""
    mba_percent: Percent | None = Field(default=None, ge=0, le=100)
    """Memory bandwidth allocation percentage; controller default 100."""


class NetworkQOSCfg(KoordModel):
    """Node-level network QoS of one QoS class; an int is a percentage of the total bandwidth
    (0-100), a string a bandwidth such as "50M"."""

    enable: bool | None = None
    """Whether network QoS is enabled; controller default false."""
    ingress_request: IntOrString = 0
    """Minimum ingress bandwidth guaranteed."""
    ingress_limit: IntOrString = 100
    """Maximum ingress bandwidth."""
    egress_request: IntOrString = 0
    """Minimum egress bandwidth guaranteed."""
    egress_limit: IntOrString = 100
    """Maximum egress bandwidth."""


class ResourceQOS(KoordModel):
    """All QoS settings of one QoS class."""

    cpu_qos: CPUQOSCfg | None = Field(default=None, alias="cpuQOS")
    """CPU QoS."""
    memory_qos: MemoryQOSCfg | None = Field(default=None, alias="memoryQOS")
    """Memory QoS."""
    blkio_qos: BlkIOQOSCfg | None = Field(default=None, alias="blkioQOS")
    """blkio QoS."""
    resctrl_qos: ResctrlQOSCfg | None = Field(default=None, alias="resctrlQOS")
    """resctrl QoS."""
    network_qos: NetworkQOSCfg | None = Field(default=None, alias="networkQOS")
    """Network QoS."""


class ResourceQOSStrategy(KoordModel):
    """QoS settings per QoS class."""

    policies: ResourceQOSPolicies | None = None
    """Kernel mechanisms used for CPU and network QoS."""
    lsr_class: ResourceQOS | None = Field(default=None, alias="lsrClass")
    """Settings for LSR pods."""
    ls_class: ResourceQOS | None = Field(default=None, alias="lsClass")
    """Settings for LS pods."""
    be_class: ResourceQOS | None = Field(default=None, alias="beClass")
    """Settings for BE pods."""
    system_class: ResourceQOS | None = Field(default=None, alias="systemClass")
    """Settings for SYSTEM pods."""
    cgroup_root: ResourceQOS | None = None
    """Settings for the root cgroup."""


class CPUBurstStrategy(KoordModel):
    """CPU burst and CFS quota burst."""

    policy: str | None = None
    """none (controller default), cpuBurstOnly, cfsQuotaBurstOnly or auto (not enforced by the
    schema)."""
    cpu_burst_percent: Percent | None = Field(default=None, ge=0, le=10000)
    """cpu.cfs_burst_us (cgroup v1) or cpu.max.burst (v2) as a percentage; controller default
    1000."""
    cfs_quota_burst_percent: Percent | None = None
    """Ceiling of the CFS quota scale-up; controller default 300."""
    cfs_quota_burst_period_seconds: Int64 | None = None
    """How long a pod may burst; controller default -1 (unlimited)."""
    share_pool_threshold_percent: Percent | None = None
    """Node CPU usage above which CFS quota is scaled down; controller default 50."""


class SystemStrategy(KoordModel):
    """Node-wide kernel settings."""

    min_free_kbytes_factor: Int64 | None = None
    """vm.min_free_kbytes = factor * total memory / 10000; unset by default, 100 recommended."""
    watermark_scale_factor: Int64 | None = None
    """vm.watermark_scale_factor (1/10000 units, at most 400); unset by default, 150
    recommended."""
    memcg_reap_back_ground: Int64 | None = None
    """/sys/kernel/mm/memcg_reaper/reap_background, 0 or 1; unset by default."""
    sched_group_identity_enabled: Int64 | None = None
    """/sys/kernel/sched_group_identity_enabled, 0 or 1."""
    sched_idle_saver_wmark: Int64 | None = None
    """/proc/sys/kernel/sched_idle_saver_wmark in nanoseconds."""
    sched_features: dict[str, bool] | None = None
    """Extra /sys/kernel/sched_features switches."""
    page_cache_limit_enabled: Int64 | None = None
    """/sys/kernel/mm/pagecache_limit/enabled (Anolis OS), 0 or 1."""
    total_network_bandwidth: Quantity | None = None
    """Total network bandwidth in Mbps; koordlet defaults it from the NIC speed ("0" when
    unknown)."""


class NodeCgroupDir(KoordModel):
    """Location of a host application's cgroup."""

    base: str | None = None
    """CgroupRoot, Kubepods, KubepodsBurstable or KubepodsBesteffort."""
    parent_dir: str | None = None
    """Parent directory under base."""
    relative_path: str | None = None
    """Path relative to the parent directory."""


class HostApplicationStrategy(KoordModel):
    """QoS strategy of a host application (currently empty)."""


class HostApplicationSpec(KoordModel):
    """QoS management of one out-of-band (non-pod) application."""

    name: str | None = None
    """Name of the application."""
    priority: str | None = None
    """Koordinator priority class of the application."""
    qos: str | None = None
    """Koordinator QoS class of the application."""
    cgroup_path: NodeCgroupDir | None = None
    """Host cgroup of the application; derived from priority and qos when unset."""
    strategy: HostApplicationStrategy | None = None
    """QoS strategy of the application."""


class NodeSLOSpec(KoordModel):
    """QoS strategies of the node."""

    resource_used_threshold_with_be: ResourceThresholdStrategy | None = Field(
        default=None, alias="resourceUsedThresholdWithBE"
    )
    """BE suppression and eviction when node usage is high."""
    resource_qos_strategy: ResourceQOSStrategy | None = Field(default=None, alias="resourceQOSStrategy")
    """QoS settings per QoS class."""
    cpu_burst_strategy: CPUBurstStrategy | None = None
    """CPU burst settings."""
    system_strategy: SystemStrategy | None = None
    """Node-wide kernel settings."""
    extensions: PreserveUnknownObject | None = None
    """Third-party extensions, stored without validation."""
    host_applications: list[HostApplicationSpec] | None = None
    """QoS management of out-of-band applications."""


class NodeSLOStatus(KoordModel):
    """Always empty."""


class NodeSLO(KoordResource):
    """NodeSLO carries the QoS strategies koordlet enforces on one node."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="slo.koordinator.sh",
        version="v1alpha1",
        kind="NodeSLO",
        plural="nodeslos",
        singular="nodeslo",
        scope="Cluster",
        status_subresource=True,
    )

    spec: NodeSLOSpec | None = None
    """QoS strategies."""
    status: NodeSLOStatus | None = None
    """Always empty."""
