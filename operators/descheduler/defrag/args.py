"""GangDefragmentationArgs: ours, not Koordinator's (Koordinator has no gang defragmentation).
The names follow the descheduler's conventions: camelCase, Go durations."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from apis.duration import parse_go_duration_ns

__all__ = ["GangDefragmentationArgs"]


def _check_duration(value: str) -> str:
    if parse_go_duration_ns(value) <= 0:
        raise ValueError("must be > 0")
    return value


class GangDefragmentationArgs(BaseModel):
    """How long a gang waits before its domain is freed, and how much may move for it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    api_version: str | None = None
    """TypeMeta, as in a ``pluginConfig`` entry; the descheduler's config loader checks it."""
    kind: str | None = None
    """``GangDefragmentationArgs`` when given."""
    wait_threshold: str = "60s"
    """How long every pending member must have been unschedulable (PodScheduled=False) before the
    plugin plans for the gang."""
    max_pods_to_move: int = Field(default=4, ge=1)
    """N: the most pods one plan moves."""
    plan_timeout: str = "10m"
    """How long a plan may take from its Reservations' creation to the gang's binding; also the
    Reservations' ttl. A plan not carried out by then is dropped and its Reservations deleted."""
    dry_run: bool = False
    """Only report the plan (an event on the PodGroup); reserve and move nothing."""
    evict_bare_pods: bool = False
    """Also move pods without a controller (their replacement is nobody's: they are gone)."""
    evict_system_critical_pods: bool = False
    """Also move pods of priority >= 2000000000 (system-cluster-critical and above)."""
    max_unavailable_per_workload: int | str | None = None
    """Per workload: how many of its pods may be unavailable (moving ones included), an int or a
    percent of its pods rounded down and raised from 0 to 1; unset: Koordinator's tiers (more
    than 10 pods: 10%, 4 to 10: 2, fewer: 1)."""
    solver_time_limit_seconds: float = Field(default=5.0, gt=0)
    """CP-SAT's time limit for one domain."""

    @field_validator("wait_threshold", "plan_timeout")
    @classmethod
    def _duration(cls, value: str) -> str:
        return _check_duration(value)

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str | None) -> str | None:
        if value not in (None, "GangDefragmentationArgs"):
            raise ValueError(f"kind {value!r}: expected GangDefragmentationArgs")
        return value

    @field_validator("max_unavailable_per_workload")
    @classmethod
    def _max_unavailable(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and value < 0:
            raise ValueError("must be >= 0")
        if isinstance(value, str) and not (value.endswith("%") and value[:-1].isdigit()):
            raise ValueError("must be an integer or a percent such as '20%'")
        return value

    @property
    def wait_threshold_seconds(self) -> float:
        return parse_go_duration_ns(self.wait_threshold) / 1e9

    @property
    def plan_timeout_seconds(self) -> float:
        return parse_go_duration_ns(self.plan_timeout) / 1e9

    def max_unavailable(self, replicas: int) -> int:
        """The workload's budget of unavailable pods (algorithms.md 12.4, the v1.6 formula)."""
        value = self.max_unavailable_per_workload
        if value is None:
            result = replicas // 10 if replicas > 10 else 2 if replicas >= 4 else 1
        else:
            scaled = value if isinstance(value, int) else replicas * int(value[:-1]) // 100
            result = max(scaled, 1)
        return min(result, replicas)
