"""Koordinator's defaults of the NodeSLO strategies (``pkg/util/sloconfig/nodeslo_config.go``).

koord-manager lays each key's ``clusterStrategy`` over these. Every call returns a fresh model.
"""

from __future__ import annotations

from apis.quantity import Quantity
from apis.slo.nodeslo import (
    BlkIOQOSCfg,
    CPUBurstStrategy,
    CPUQOSCfg,
    MemoryQOSCfg,
    NetworkQOSCfg,
    ResctrlQOSCfg,
    ResourceQOS,
    ResourceQOSPolicies,
    ResourceQOSStrategy,
    ResourceThresholdStrategy,
    SystemStrategy,
)

__all__ = [
    "default_cpu_burst_strategy",
    "default_resource_qos_strategy",
    "default_resource_threshold_strategy",
    "default_system_strategy",
]


def default_resource_threshold_strategy() -> ResourceThresholdStrategy:
    return ResourceThresholdStrategy(
        enable=False,
        cpu_suppress_threshold_percent=65,
        cpu_suppress_policy="cpuset",
        memory_evict_threshold_percent=70,
        cpu_evict_policy="evictByRealLimit",
    )


# Per class: (groupIdentity, coreExpeller, catRangeEndPercent, wmarkRatio, wmarkScalePermill, wmarkMinAdj).
_CLASS_DEFAULTS = {
    "lsr": (2, True, 100, 95, 20, -25),
    "ls": (2, True, 100, 95, 20, -25),
    "be": (-1, False, 30, 95, 20, 50),
    "system": (0, False, 100, 0, 50, 0),
}


def _class_qos(qos: str) -> ResourceQOS:
    group_identity, core_expeller, cat_end, wmark_ratio, wmark_scale, wmark_min_adj = _CLASS_DEFAULTS[qos]
    return ResourceQOS(
        cpu_qos=CPUQOSCfg(
            enable=False, group_identity=group_identity, sched_idle=0, core_expeller=core_expeller
        ),
        resctrl_qos=ResctrlQOSCfg(
            enable=False, cat_range_start_percent=0, cat_range_end_percent=cat_end, mba_percent=100
        ),
        memory_qos=MemoryQOSCfg(
            enable=False,
            min_limit_percent=0,
            low_limit_percent=0,
            throttling_percent=0,
            wmark_ratio=wmark_ratio,
            wmark_scale_permill=wmark_scale,
            wmark_min_adj=wmark_min_adj,
            priority_enable=0,
            priority=0,
            oom_kill_group=0,
        ),
        blkio_qos=BlkIOQOSCfg(enable=False),
        # Koordinator's NoneNetworkQOS: every request and limit 0 (the feature is off).
        network_qos=NetworkQOSCfg(
            enable=False, ingress_request=0, ingress_limit=0, egress_request=0, egress_limit=0
        ),
    )


def default_resource_qos_strategy() -> ResourceQOSStrategy:
    """``DefaultResourceQOSStrategy``: every feature off, with the values each class gets once on."""
    return ResourceQOSStrategy(
        policies=ResourceQOSPolicies(cpu_policy="groupIdentity", net_qos_policy="tc"),
        lsr_class=_class_qos("lsr"),
        ls_class=_class_qos("ls"),
        be_class=_class_qos("be"),
        system_class=_class_qos("system"),
        cgroup_root=ResourceQOS(blkio_qos=BlkIOQOSCfg(enable=False)),
    )


def default_cpu_burst_strategy() -> CPUBurstStrategy:
    return CPUBurstStrategy(
        policy="none",
        cpu_burst_percent=1000,
        cfs_quota_burst_percent=300,
        cfs_quota_burst_period_seconds=-1,
        share_pool_threshold_percent=50,
    )


def default_system_strategy() -> SystemStrategy:
    return SystemStrategy(
        min_free_kbytes_factor=100,
        watermark_scale_factor=150,
        memcg_reap_back_ground=0,
        total_network_bandwidth=Quantity.parse("0"),
    )
