"""The value rules of the NodeSLO strategies, as Koordinator's ConfigMap checker enforces them.

Koordinator's optional ConfigMap webhook (``pkg/webhook/cm/plugins/sloconfig``) validates each
strategy against the ``validate:`` tags of ``apis/slo/v1alpha1/nodeslo_types.go``: value ranges and
"below that other field" pairs. The NodeSLO models already carry the ranges the CRD schema has;
these are the rest. koord-manager applies them to the merged strategies (the cluster strategy over
the defaults, each node strategy over the cluster strategy), so a node strategy that only moves one
end of a range is checked against the other end it inherits. The enum-like strings Go types as bare
strings are checked too, so that a typo is refused with the field's name instead of silently doing
nothing on the node.
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.base import KoordModel
from apis.slo.nodeslo import (
    CPUBurstStrategy,
    CPUQOSCfg,
    MemoryQOSCfg,
    ResctrlQOSCfg,
    ResourceQOSPolicies,
    ResourceThresholdStrategy,
    SystemStrategy,
)

__all__ = ["strategy_problems"]

_PERCENT = (0, 100)
_SWITCH = (0, 1)

_RANGES: Mapping[type[KoordModel], Mapping[str, tuple[int | None, int | None]]] = {
    ResourceThresholdStrategy: {
        "cpu_evict_be_satisfaction_upper_percent": _PERCENT,
        "cpu_evict_be_satisfaction_lower_percent": _PERCENT,
        "cpu_evict_be_usage_threshold_percent": _PERCENT,
        "cpu_evict_time_window_seconds": (1, None),
    },
    CPUQOSCfg: {"group_identity": (-1, 2), "sched_idle": _SWITCH},
    MemoryQOSCfg: {
        "min_limit_percent": _PERCENT,
        "low_limit_percent": _PERCENT,
        "throttling_percent": _PERCENT,
        "priority_enable": _SWITCH,
        "priority": (0, 12),
        "oom_kill_group": _SWITCH,
    },
    CPUBurstStrategy: {
        "cpu_burst_percent": (1, 10000),
        "cfs_quota_burst_percent": (100, None),
        "cfs_quota_burst_period_seconds": (-1, None),
        "share_pool_threshold_percent": _PERCENT,
    },
    SystemStrategy: {
        "min_free_kbytes_factor": (1, None),
        "watermark_scale_factor": (1, 400),
        "memcg_reap_back_ground": _SWITCH,
        "page_cache_limit_enabled": _SWITCH,
    },
}
"""Per model: field -> inclusive (min, max); None is unbounded."""

_BELOW: Mapping[type[KoordModel], tuple[tuple[str, str], ...]] = {
    ResourceThresholdStrategy: (
        ("memory_evict_lower_percent", "memory_evict_threshold_percent"),
        ("cpu_evict_be_satisfaction_lower_percent", "cpu_evict_be_satisfaction_upper_percent"),
    ),
    ResctrlQOSCfg: (("cat_range_start_percent", "cat_range_end_percent"),),
}
"""Per model: (lower, upper) pairs; when both are set, lower must be strictly below upper."""

_CHOICES: Mapping[type[KoordModel], Mapping[str, frozenset[str]]] = {
    ResourceThresholdStrategy: {
        "cpu_suppress_policy": frozenset({"cpuset", "cfsQuota"}),
        "cpu_evict_policy": frozenset({"evictByRealLimit", "evictByAllocatable"}),
    },
    ResourceQOSPolicies: {
        "cpu_policy": frozenset({"groupIdentity", "coreSched"}),
        "net_qos_policy": frozenset({"tc", "terway-qos"}),
    },
    CPUBurstStrategy: {"policy": frozenset({"none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto"})},
}
"""Per model: field -> the values Koordinator knows (Go's zero value "" means unset and passes)."""


def _wire(model: KoordModel, attr: str) -> str:
    return type(model).model_fields[attr].alias or attr


def _range_text(low: int | None, high: int | None) -> str:
    if low is None:
        return f"at most {high}"
    if high is None:
        return f"at least {low}"
    return f"within [{low}, {high}]"


def strategy_problems(model: KoordModel, path: str) -> list[str]:
    """What the rules refuse in ``model`` and the models inside it, each naming its path."""
    problems: list[str] = []
    kind = type(model)
    for attr, (low, high) in _RANGES.get(kind, {}).items():
        value = getattr(model, attr)
        if value is not None and ((low is not None and value < low) or (high is not None and value > high)):
            problems.append(f"{path}.{_wire(model, attr)}: must be {_range_text(low, high)} (got {value})")
    for lower, upper in _BELOW.get(kind, ()):
        low_value, high_value = getattr(model, lower), getattr(model, upper)
        if low_value is not None and high_value is not None and low_value >= high_value:
            problems.append(
                f"{path}.{_wire(model, lower)}: must be below {_wire(model, upper)} "
                f"(got {low_value}, and {high_value})"
            )
    for attr, choices in _CHOICES.get(kind, {}).items():
        value = getattr(model, attr)
        if value and value not in choices:
            problems.append(f"{path}.{_wire(model, attr)}: must be one of {sorted(choices)} (got {value!r})")
    for attr in kind.model_fields:
        value = getattr(model, attr)
        if isinstance(value, KoordModel):
            problems += strategy_problems(value, f"{path}.{_wire(model, attr)}")
    return problems
