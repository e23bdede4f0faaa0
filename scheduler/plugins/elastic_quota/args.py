"""ElasticQuotaArgs with Koordinator's names and defaults (api-reference section 3)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from apis.duration import parse_go_duration_ns
from apis.quantity import Quantity
from scheduler.plugins.elastic_quota.hooks import ENTRY_POINT_GROUP, find_factory
from scheduler.plugins.not_supported import only_default

__all__ = ["DEFAULT_QUOTA_GROUP_MAX", "ElasticQuotaArgs", "HookPluginConf"]

DEFAULT_QUOTA_GROUP_MAX = 1844674407370955161
"""int64 max / 5: Koordinator's "no limit" for the default and system quota groups."""


def _unbounded() -> dict[str, Quantity]:
    return {
        "cpu": Quantity.from_int(DEFAULT_QUOTA_GROUP_MAX),
        "memory": Quantity.from_int(DEFAULT_QUOTA_GROUP_MAX),
    }


class HookPluginConf(BaseModel):
    """A quota hook plugin (v1.7): ``key`` names this instance, ``factoryKey`` the factory (an entry
    point of ``koordinator_py.quota_hooks``, see ``elastic_quota.hooks``), ``factoryArgs`` is
    handed to the factory as written."""

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
    """Pods of the default quota are never quota preemption victims. Only Koordinator's default
    true is accepted: turning it off is not supported yet."""
    enable_queue_hint: bool = False
    """Not supported yet: only Koordinator's default false is accepted (no quota queueing hints)."""
    quota_snapshot_update_interval: str = "120s"
    """Not supported yet: only Koordinator's default 120s is accepted. Quota figures are computed
    from the live cache, with no periodic snapshot to tune."""
    hook_plugins: list[HookPluginConf] = Field(default_factory=list)
    """Quota hook plugins, called in this order (``elastic_quota.hooks``). A factory key that is
    neither registered nor an installed entry point is refused, so koord-scheduler does not start."""

    @field_validator("delay_evict_time", "revoke_pod_interval", "quota_snapshot_update_interval")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_go_duration_ns(value)
        return value

    @field_validator("quota_snapshot_update_interval")
    @classmethod
    def _default_snapshot_interval(cls, value: str) -> str:
        if parse_go_duration_ns(value) == parse_go_duration_ns("120s"):
            return value
        return only_default(value, "120s", "quota figures come from the live cache, not a periodic snapshot")

    @field_validator("disable_default_quota_preemption")
    @classmethod
    def _default_quota_not_preempted(cls, value: bool) -> bool:
        return only_default(value, True, "pods of the default quota are never quota preemption victims")

    @field_validator("enable_queue_hint")
    @classmethod
    def _no_queue_hint(cls, value: bool) -> bool:
        return only_default(value, False, "koord-scheduler has no ElasticQuota queueing hints")

    @field_validator("hook_plugins")
    @classmethod
    def _known_hook_plugins(cls, value: list[HookPluginConf]) -> list[HookPluginConf]:
        problems = []
        seen: set[str] = set()
        for index, conf in enumerate(value):
            if not conf.key:
                problems.append(f"[{index}]: key is empty")
            elif conf.key in seen:
                problems.append(f"[{index}]: key {conf.key} is used twice")
            seen.add(conf.key)
            if not conf.factory_key:
                problems.append(f"[{index}] {conf.key}: factoryKey is empty")
            elif find_factory(conf.factory_key) is None:
                problems.append(
                    f"[{index}] {conf.key}: factory {conf.factory_key} not found (neither registered nor "
                    f"an installed entry point of the group {ENTRY_POINT_GROUP})"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return value
