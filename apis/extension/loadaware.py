"""Load-aware scheduling annotations (api-reference 2.6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import TypeAdapter

from apis.base import KoordModel
from apis.extension._annotation import EmptyAsNone, lookup, parse_go_int, parse_json
from apis.types import GoDuration, NonNegativeInt64, Percent

__all__ = [
    "ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS",
    "ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_INITIALIZED",
    "ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED",
    "ANNOTATION_CUSTOM_USAGE_THRESHOLDS",
    "AggregationType",
    "CustomAggregatedUsage",
    "CustomUsageThresholds",
    "get_custom_estimated_scaling_factors",
    "get_custom_estimated_seconds_after_initialized",
    "get_custom_estimated_seconds_after_pod_scheduled",
    "get_custom_usage_thresholds",
    "parse_custom_estimated_scaling_factors",
    "parse_custom_estimated_seconds_after_initialized",
    "parse_custom_estimated_seconds_after_pod_scheduled",
    "parse_custom_usage_thresholds",
]

_SCHED = "scheduling.koordinator.sh"
ANNOTATION_CUSTOM_USAGE_THRESHOLDS = _SCHED + "/usage-thresholds"
"""Node annotation: per-node override of the LoadAwareScheduling filter thresholds."""
ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS = _SCHED + "/load-estimated-scaling-factors"
"""Pod annotation: JSON map resource -> int percent (needs ``allowCustomizeEstimation``)."""
ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED = (
    _SCHED + "/load-estimated-seconds-after-pod-scheduled"
)
ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_INITIALIZED = _SCHED + "/load-estimated-seconds-after-initialized"

AggregationType = Literal["avg", "p50", "p90", "p95", "p99"]


class CustomAggregatedUsage(KoordModel):
    usage_thresholds: dict[str, Percent] | None = None
    usage_aggregation_type: Annotated[AggregationType | None, EmptyAsNone] = None
    usage_aggregated_duration: GoDuration | None = None


class CustomUsageThresholds(KoordModel):
    usage_thresholds: dict[str, Percent] | None = None
    """Resource -> percent of the whole machine (0 to 100)."""
    prod_usage_thresholds: dict[str, Percent] | None = None
    """Resource -> percent used by Prod pods, relative to the whole machine."""
    aggregated_usage: CustomAggregatedUsage | None = None


def parse_custom_usage_thresholds(raw: str) -> CustomUsageThresholds:
    return parse_json(ANNOTATION_CUSTOM_USAGE_THRESHOLDS, raw, CustomUsageThresholds)


def get_custom_usage_thresholds(annotations: Mapping[str, str] | None) -> CustomUsageThresholds:
    """Empty thresholds when the annotation is absent (as Koordinator)."""
    raw = lookup(annotations, ANNOTATION_CUSTOM_USAGE_THRESHOLDS)
    return CustomUsageThresholds() if raw is None else parse_custom_usage_thresholds(raw)


_FACTORS: TypeAdapter[dict[str, NonNegativeInt64]] = TypeAdapter(dict[str, NonNegativeInt64])


def parse_custom_estimated_scaling_factors(raw: str) -> dict[str, int]:
    return parse_json(ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS, raw, _FACTORS)


def get_custom_estimated_scaling_factors(annotations: Mapping[str, str] | None) -> dict[str, int] | None:
    """None when absent or empty. (Koordinator silently ignores a malformed value; this raises.)"""
    raw = lookup(annotations, ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS)
    return parse_custom_estimated_scaling_factors(raw) if raw else None


def parse_custom_estimated_seconds_after_pod_scheduled(raw: str) -> int:
    """A decimal int64 number of seconds."""
    return parse_go_int(ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED, raw, bits=64)


def parse_custom_estimated_seconds_after_initialized(raw: str) -> int:
    """A decimal int64 number of seconds."""
    return parse_go_int(ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_INITIALIZED, raw, bits=64)


def get_custom_estimated_seconds_after_pod_scheduled(annotations: Mapping[str, str] | None) -> int | None:
    """None when absent or empty (Koordinator's -1)."""
    raw = lookup(annotations, ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED)
    return parse_custom_estimated_seconds_after_pod_scheduled(raw) if raw else None


def get_custom_estimated_seconds_after_initialized(annotations: Mapping[str, str] | None) -> int | None:
    """None when absent or empty (Koordinator's -1)."""
    raw = lookup(annotations, ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_INITIALIZED)
    return parse_custom_estimated_seconds_after_initialized(raw) if raw else None
