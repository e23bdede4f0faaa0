"""CoschedulingArgs: the Coscheduling plugin's arguments, with Koordinator's defaults."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from apis.duration import parse_go_duration_ns
from apis.extension import gang as gang_ext
from scheduler.plugins.not_supported import only_default

__all__ = ["CoschedulingArgs"]


class CoschedulingArgs(BaseModel):
    """CoschedulingArgs with Koordinator's defaults (api-reference section 3)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    default_timeout: str = "600s"
    """Permit wait of a gang that sets none (Go duration); must be >= 0."""
    controller_workers: int = Field(default=1, ge=1)
    """Not supported yet: only Koordinator's default 1 is accepted. Koordinator's scheduler runs a
    PodGroup controller with this many workers; here koord-manager keeps PodGroup status."""
    skip_check_schedule_cycle: bool = False
    """Not supported yet: only Koordinator's default false is accepted. koord-scheduler places a
    gang as a whole, so it has no per-member schedule cycle to check or skip."""
    enable_preemption: bool = False
    """Job-level preemption at PostFilter: victims chosen by CP-SAT (``placementStrategy``) so that
    the whole job fits, then evicted; every member is nominated."""
    eviction_mode: Literal["Eviction", "SoftEviction"] = "Eviction"
    """koordinator-py: how preemption victims go. ``Eviction``: the Eviction API (policy/v1) with
    the pod's grace period. ``SoftEviction``: only the ``scheduling.koordinator.sh/soft-eviction``
    label and annotation are written, for a custom evictor (Koordinator's soft eviction)."""
    aware_network_topology: bool = False
    """Network-topology-aware placement of gangs with a network-topology-spec."""
    default_match_policy: gang_ext.GangMatchPolicy = gang_ext.DEFAULT_GANG_MATCH_POLICY
    placement_strategy: Literal["cpsat", "greedy"] = "cpsat"
    """koordinator-py: how a gang group is placed as a whole. ``cpsat`` (CP-SAT, the greedy plan as
    its hint and fallback) or ``greedy`` (Koordinator's plan algorithm)."""
    solver_time_limit_seconds: float = Field(default=1.0, gt=0)
    """koordinator-py: CP-SAT's time limit per gang placement; the greedy plan is used after it."""
    solver_relative_gap: float = Field(default=0.01, ge=0, lt=1)
    """koordinator-py: CP-SAT stops as soon as its answer is proven within this relative gap of
    the best possible one (gang placement and victim selection); 0 asks for proven optima."""

    @field_validator("default_timeout")
    @classmethod
    def _non_negative_duration(cls, value: str) -> str:
        if parse_go_duration_ns(value) < 0:
            raise ValueError("must be >= 0")
        return value

    @field_validator("controller_workers")
    @classmethod
    def _one_worker(cls, value: int) -> int:
        return only_default(value, 1, "PodGroup status is kept by koord-manager, not by the scheduler")

    @field_validator("skip_check_schedule_cycle")
    @classmethod
    def _schedule_cycle_checked(cls, value: bool) -> bool:
        return only_default(value, False, "a gang is placed as a whole, with no schedule cycle to skip")

    def default_timeout_seconds(self) -> float:
        ns = parse_go_duration_ns(self.default_timeout)
        if ns < 0:
            raise ValueError("defaultTimeout must be >= 0")
        return ns / 1e9
