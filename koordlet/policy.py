"""The NodeMetric collect policy koordlet works with: the spec merged over koordlet's defaults.

Koordinator's koordlet overlays the spec's ``metricCollectPolicy`` on its defaults (report every
60 s, aggregate over 300 s, windows 5m/10m/30m, ``usageWithoutPageCache``) and never reports
faster than every 30 s nor aggregates over less than 60 s.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.duration import parse_go_duration_ns
from apis.slo.nodemetric import NodeMetricCollectPolicy, NodeMetricSpec, default_collect_policy

__all__ = [
    "DEFAULT_COLLECT_POLICY",
    "MIN_AGGREGATE_DURATION_SECONDS",
    "MIN_REPORT_INTERVAL_SECONDS",
    "EffectivePolicy",
    "effective_policy",
]

MIN_REPORT_INTERVAL_SECONDS = 30
MIN_AGGREGATE_DURATION_SECONDS = 60

DEFAULT_COLLECT_POLICY = default_collect_policy()
"""What koord-manager writes into a new NodeMetric, and what koordlet assumes for a field left out."""


@dataclass(frozen=True)
class EffectivePolicy:
    report_interval_seconds: float
    aggregate_duration_seconds: float
    windows: tuple[tuple[str, float], ...]
    """Each aggregation window as written in the spec and in seconds."""
    memory_policy: str


def effective_policy(
    spec: NodeMetricSpec | None, report_interval_override: float | None = None
) -> EffectivePolicy:
    """The policy of ``spec`` over the defaults; ``report_interval_override`` (the
    ``--report-interval-seconds`` flag) replaces the spec's interval and its 30 s floor."""
    given = spec.metric_collect_policy if spec and spec.metric_collect_policy else NodeMetricCollectPolicy()
    default = DEFAULT_COLLECT_POLICY
    report = _first(given.report_interval_seconds, default.report_interval_seconds)
    aggregate = _first(given.aggregate_duration_seconds, default.aggregate_duration_seconds)
    aggregate_policy = given.node_aggregate_policy or default.node_aggregate_policy
    windows = aggregate_policy.durations if aggregate_policy else None
    memory = given.node_memory_collect_policy or default.node_memory_collect_policy
    interval = (
        report_interval_override
        if report_interval_override is not None
        else float(max(report, MIN_REPORT_INTERVAL_SECONDS))
    )
    return EffectivePolicy(
        report_interval_seconds=interval,
        aggregate_duration_seconds=float(max(aggregate, MIN_AGGREGATE_DURATION_SECONDS)),
        windows=tuple((text, parse_go_duration_ns(text) / 1e9) for text in windows or ()),
        memory_policy=memory or "usageWithoutPageCache",
    )


def _first(given: int | None, default: int | None) -> int:
    return given if given is not None else (default or 0)
