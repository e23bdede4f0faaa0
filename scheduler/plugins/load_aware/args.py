"""LoadAwareSchedulingArgs with Koordinator's field names, defaults and validation (api-reference 3)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from apis.duration import parse_go_duration_ns
from apis.extension.loadaware import AggregationType

__all__ = [
    "DEFAULT_ESTIMATED_SCALING_FACTORS",
    "DEFAULT_RESOURCE_WEIGHTS",
    "DEFAULT_USAGE_THRESHOLDS",
    "LoadAwareSchedulingAggregatedArgs",
    "LoadAwareSchedulingArgs",
]

DEFAULT_USAGE_THRESHOLDS = {"cpu": 65, "memory": 95}
DEFAULT_RESOURCE_WEIGHTS = {"cpu": 1, "memory": 1}
DEFAULT_ESTIMATED_SCALING_FACTORS = {"cpu": 85, "memory": 70}

_CAMEL = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


def _percentages(values: dict[str, int], low: int = 0) -> dict[str, int]:
    for name, value in values.items():
        if not low <= value <= 100:
            raise ValueError(f"{name}: {value} is out of range [{low}, 100]")
    return values


def _non_negative_duration(value: str) -> str:
    if value and parse_go_duration_ns(value) < 0:
        raise ValueError("must be >= 0")
    return value


class LoadAwareSchedulingAggregatedArgs(BaseModel):
    """Filter and score on aggregated usage (a percentile over a window) instead of the latest."""

    model_config = _CAMEL

    usage_thresholds: dict[str, int] = Field(default_factory=dict)
    """Resource -> percent: replaces ``usageThresholds`` when set with ``usageAggregationType``."""
    usage_aggregation_type: AggregationType | None = None
    usage_aggregated_duration: str = "0s"
    """Window of the aggregate to filter on; 0: the longest the NodeMetric reports."""
    score_aggregation_type: AggregationType | None = None
    """Score on this aggregate instead of the latest usage (non-prod pods)."""
    score_aggregated_duration: str = "0s"

    @field_validator("usage_thresholds")
    @classmethod
    def _thresholds(cls, value: dict[str, int]) -> dict[str, int]:
        return _percentages(value)

    @field_validator("usage_aggregated_duration", "score_aggregated_duration")
    @classmethod
    def _durations(cls, value: str) -> str:
        return _non_negative_duration(value)

    @field_validator("usage_aggregation_type", "score_aggregation_type", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @property
    def filter_active(self) -> bool:
        """Koordinator's ``filterWithAggregation``."""
        return bool(self.usage_thresholds) and self.usage_aggregation_type is not None

    @property
    def score_active(self) -> bool:
        """Koordinator's ``scoreWithAggregation``."""
        return self.score_aggregation_type is not None


class LoadAwareSchedulingArgs(BaseModel):
    """LoadAwareSchedulingArgs; defaults filled as Koordinator's ``SetDefaults`` fills them."""

    model_config = _CAMEL

    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: int = Field(default=180, gt=0)
    enable_schedule_when_node_metrics_expired: bool = False
    """With ``filterExpiredNodeMetrics``: false keeps pods off nodes whose NodeMetric is expired."""
    resource_weights: dict[str, int] = Field(default_factory=dict)
    """Default {cpu: 1, memory: 1}, applied only when empty and ``dominantResourceWeight`` is 0."""
    dominant_resource_weight: int = Field(default=0, ge=0, le=100)
    usage_thresholds: dict[str, int] = Field(default_factory=dict)
    """Resource -> percent of allocatable; default {cpu: 65, memory: 95}, applied only when empty."""
    prod_usage_thresholds: dict[str, int] = Field(default_factory=dict)
    """Resource -> percent used by prod pods; applies to prod pods only."""
    prod_usage_include_sys: bool = False
    """Prod usage counts the node's system usage too."""
    score_according_prod_usage: bool = False
    estimator: str = ""
    """Only the default estimator exists: empty or ``defaultEstimator``."""
    estimated_scaling_factors: dict[str, int] = Field(default_factory=dict)
    """Resource -> percent of max(request, limit); missing keys from {cpu: 85, memory: 70}."""
    estimated_seconds_after_pod_scheduled: int | None = None
    estimated_seconds_after_initialized: int | None = None
    allow_customize_estimation: bool = False
    """Pods may set their own scaling factors and estimation windows by annotation."""
    aggregated: LoadAwareSchedulingAggregatedArgs | None = None
    supported_resources: list[str] = Field(default_factory=list)
    """Resources tracked beside cpu and memory (and those named in thresholds, weights, factors)."""

    @field_validator("usage_thresholds", "prod_usage_thresholds")
    @classmethod
    def _thresholds(cls, value: dict[str, int]) -> dict[str, int]:
        return _percentages(value)

    @field_validator("resource_weights")
    @classmethod
    def _weights(cls, value: dict[str, int]) -> dict[str, int]:
        return _percentages(value, low=1)

    @field_validator("estimated_scaling_factors")
    @classmethod
    def _factors(cls, value: dict[str, int]) -> dict[str, int]:
        return _percentages(value)

    @field_validator("estimator")
    @classmethod
    def _known_estimator(cls, value: str) -> str:
        if value not in ("", "defaultEstimator"):
            raise ValueError(f"unknown estimator {value!r}: only the default estimator exists")
        return value

    @model_validator(mode="after")
    def _defaults(self) -> LoadAwareSchedulingArgs:
        if not self.resource_weights and self.dominant_resource_weight == 0:
            self.resource_weights = dict(DEFAULT_RESOURCE_WEIGHTS)
        if not self.usage_thresholds:
            self.usage_thresholds = dict(DEFAULT_USAGE_THRESHOLDS)
        self.estimated_scaling_factors = {
            **DEFAULT_ESTIMATED_SCALING_FACTORS,
            **self.estimated_scaling_factors,
        }
        return self

    def tracked_resources(self) -> tuple[str, ...]:
        """cpu and memory, then every other resource the args name, in a stable order."""
        named: list[str] = ["cpu", "memory"]
        aggregated = self.aggregated.usage_thresholds if self.aggregated else {}
        for source in (
            self.usage_thresholds,
            self.prod_usage_thresholds,
            aggregated,
            self.resource_weights,
            self.estimated_scaling_factors,
            self.supported_resources,
        ):
            named.extend(name for name in source if name not in named)
        return tuple(named)
