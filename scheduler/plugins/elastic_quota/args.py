"""ElasticQuotaArgs with Koordinator's names and defaults (api-reference section 3)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from apis.duration import parse_go_duration_ns
from apis.quantity import Quantity

__all__ = ["DEFAULT_QUOTA_GROUP_MAX", "ElasticQuotaArgs", "HookPluginConf"]

DEFAULT_QUOTA_GROUP_MAX = 1844674407370955161
"""int64 max / 5: Koordinator's "no limit" for the default and system quota groups."""


def _unbounded() -> dict[str, Quantity]:
    return {
        "cpu": Quantity.from_int(DEFAULT_QUOTA_GROUP_MAX),
        "memory": Quantity.from_int(DEFAULT_QUOTA_GROUP_MAX),
    }


class HookPluginConf(BaseModel):
    """A quota hook plugin (v1.7); accepted for compatibility, none is built in."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    key: str
    factory_key: str
    factory_args: str = ""


class ElasticQuotaArgs(BaseModel):
    """Args of the ``ElasticQuota`` plugin. Every field has Koordinator's default."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    delay_evict_time: str = "120s"
    """How long a quota may stay over its runtime before the revoke controller evicts."""
    revoke_pod_interval: str = "1s"
    """Period of the revoke controller."""
    default_quota_group_max: dict[str, Quantity] = Field(default_factory=_unbounded)
    """Max of ``koordinator-default-quota`` when no such object exists: unbounded by default."""
    system_quota_group_max: dict[str, Quantity] = Field(default_factory=_unbounded)
    """Max of ``koordinator-system-quota`` when no such object exists."""
    quota_group_namespace: str = "koordinator-system"
    """Namespace of the built-in system and default quotas."""
    monitor_all_quotas: bool = False
    """Run the overuse revoke controller (needs ``enableRuntimeQuota``)."""
    enable_check_parent_quota: bool = False
    """Also check every ancestor below the root at PreFilter."""
    enable_runtime_quota: bool = True
    """Check against runtime (true) or against max (false)."""
    enable_min_quota_scale: bool = True
    """Scale mins down in proportion when the total is below their sum (4.4)."""
    disable_default_quota_preemption: bool = True
    """Pods of the default quota are never quota preemption victims."""
    enable_queue_hint: bool = False
    quota_snapshot_update_interval: str = "120s"
    hook_plugins: list[HookPluginConf] = Field(default_factory=list)

    @field_validator("delay_evict_time", "revoke_pod_interval", "quota_snapshot_update_interval")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_go_duration_ns(value)
        return value
