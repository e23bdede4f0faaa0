"""The ``colocation-config`` key of ``slo-controller-config`` (algorithms.md 10.1, 10.5).

Koordinator's ``ColocationCfg``: a cluster :class:`ColocationStrategy` with ``nodeConfigs`` entries
that override it for the nodes their ``nodeSelector`` matches. Parsing follows the slo-controller:

1. key missing or empty: the defaults (:func:`default_colocation_strategy`);
2. cluster = defaults overlaid by the top level (``merge_cfg``); an invalid cluster strategy
   (:func:`is_colocation_strategy_valid`) refuses the whole key, so the last good config stays;
3. each ``nodeConfigs[i]`` = cluster overlaid by its fields; an invalid result is replaced by the
   cluster strategy.

Per node (:func:`node_colocation_strategy`): the first ``nodeConfigs`` entry whose selector matches
the node's labels, then the node annotation ``node.koordinator.sh/colocation-strategy`` overlaid,
then the four ratio labels (a fraction, ``"0.6"`` -> 60 %). As in Koordinator, what the node
carries is not validated: an annotation that does not parse is skipped (and reported), a negative
or unparsable label is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, ValidationError

from apis.base import KoordModel
from apis.errors import InvalidAnnotation, InvalidValue
from apis.extension._annotation import lookup, parse_json
from apis.extension.qosannotations import (
    ANNOTATION_NODE_COLOCATION_STRATEGY,
    LABEL_CPU_RECLAIM_RATIO,
    LABEL_MEMORY_RECLAIM_RATIO,
    LABEL_MID_STATIC_CPU_RESERVED_RATIO,
    LABEL_MID_STATIC_MEMORY_RESERVED_RATIO,
)
from apis.meta import LabelSelector
from apis.slo.nodemetric import AggregatePolicy
from apis.slo.sloconfig.merge import merge_cfg
from apis.slo.sloconfig.names import KEY_COLOCATION
from apis.types import PreserveUnknownObject

__all__ = [
    "CALCULATE_BY_MAX_USAGE_REQUEST",
    "CALCULATE_BY_REQUEST",
    "CALCULATE_BY_USAGE",
    "MID_RECLAIM_MODE_STATIC",
    "ColocationCfg",
    "ColocationStrategy",
    "NodeColocationCfg",
    "NodeStrategy",
    "ParsedColocation",
    "default_colocation_strategy",
    "is_colocation_strategy_valid",
    "node_colocation_strategy",
    "parse_colocation_config",
]

CalculatePolicy = Literal["usage", "request", "maxUsageRequest"]
CALCULATE_BY_USAGE: CalculatePolicy = "usage"
CALCULATE_BY_REQUEST: CalculatePolicy = "request"
CALCULATE_BY_MAX_USAGE_REQUEST: CalculatePolicy = "maxUsageRequest"
MID_RECLAIM_MODE_STATIC = "static"


class ColocationStrategy(KoordModel):
    """How a node's batch and mid resources are computed. Every field is optional on the wire; the
    strategy in force is the defaults overlaid by what the ConfigMap and the node set."""

    enable: bool | None = None
    """Co-location on: batch and mid resources are computed (default false: they are removed)."""
    metric_aggregate_duration_seconds: int | None = None
    """The window of the NodeMetric usages koordlet reports, in seconds (default 300)."""
    metric_report_interval_seconds: int | None = None
    """How often koordlet reports NodeMetric, in seconds (default 60)."""
    metric_aggregate_policy: AggregatePolicy | None = None
    """Windows of the aggregated node usages (default 5m, 10m, 30m)."""
    metric_memory_collect_policy: str | None = None
    """How koordlet measures memory (default usageWithoutPageCache)."""
    cpu_reclaim_threshold_percent: int | None = None
    """Percent of the node's CPU capacity batch may reach; the rest is the safety margin (default 60)."""
    cpu_calculate_policy: str | None = None
    """usage (default) or maxUsageRequest; any other value is taken as usage."""
    memory_reclaim_threshold_percent: int | None = None
    """Percent of the node's memory capacity batch may reach (default 65)."""
    memory_calculate_policy: str | None = None
    """usage (default), request or maxUsageRequest; any other value is taken as usage."""
    degrade_time_minutes: int | None = None
    """A NodeMetric older than this removes the node's batch and mid resources (default 15)."""
    update_time_threshold_seconds: int | None = None
    """The node is written at least this often even without a large change, in seconds (default 300)."""
    resource_diff_threshold: float | None = None
    """A change larger than this fraction of the current value is written at once (default 0.1)."""
    mid_reclaim_mode: str | None = None
    """``static``: mid = capacity x midStatic*ReservedPercent; unset: reclaimed from Prod (dynamic)."""
    mid_cpu_threshold_percent: int | None = Field(default=None, alias="midCPUThresholdPercent")
    """Cap of mid-cpu in percent of the node (default 100)."""
    mid_memory_threshold_percent: int | None = None
    """Cap of mid-memory in percent of the node (default 100)."""
    mid_unallocated_percent: int | None = None
    """Percent of the node's unallocated Prod room added to mid (default 0)."""
    mid_static_cpu_reserved_percent: int | None = Field(default=None, alias="midStaticCPUReservedPercent")
    """Static mid-cpu in percent of the capacity (``midReclaimMode: static``; default 0)."""
    mid_static_memory_reserved_percent: int | None = None
    """Static mid-memory in percent of the capacity (``midReclaimMode: static``; default 0)."""
    batch_cpu_threshold_percent: int | None = Field(default=None, alias="batchCPUThresholdPercent")
    """Cap of batch-cpu in percent of the capacity (unset: no cap)."""
    batch_memory_threshold_percent: int | None = None
    """Cap of batch-memory in percent of the capacity (unset: no cap)."""
    extensions: PreserveUnknownObject | None = None
    """Third-party extension fields, kept as given."""


class NodeColocationCfg(ColocationStrategy):
    """A ``nodeConfigs`` entry: a strategy for the nodes its selector matches."""

    name: str | None = None
    """An id for the entry (consoles edit entries by name)."""
    node_selector: LabelSelector | None = None
    """The nodes the entry is for; an entry without one matches no node."""

    def strategy(self) -> ColocationStrategy:
        return ColocationStrategy.model_validate(self.model_dump(exclude={"name", "node_selector"}))


class ColocationCfg(ColocationStrategy):
    """The whole key: the cluster strategy inline, plus ``nodeConfigs``."""

    node_configs: list[NodeColocationCfg] | None = None

    def cluster(self) -> ColocationStrategy:
        return ColocationStrategy.model_validate(self.model_dump(exclude={"node_configs"}))


def default_colocation_strategy() -> ColocationStrategy:
    """Koordinator's ``DefaultColocationStrategy``."""
    return ColocationStrategy(
        enable=False,
        metric_aggregate_duration_seconds=300,
        metric_report_interval_seconds=60,
        metric_aggregate_policy=AggregatePolicy(durations=["5m0s", "10m0s", "30m0s"]),
        metric_memory_collect_policy="usageWithoutPageCache",
        cpu_reclaim_threshold_percent=60,
        cpu_calculate_policy=CALCULATE_BY_USAGE,
        memory_reclaim_threshold_percent=65,
        memory_calculate_policy=CALCULATE_BY_USAGE,
        degrade_time_minutes=15,
        update_time_threshold_seconds=300,
        resource_diff_threshold=0.1,
        mid_cpu_threshold_percent=100,
        mid_memory_threshold_percent=100,
        mid_unallocated_percent=0,
        mid_static_cpu_reserved_percent=0,
        mid_static_memory_reserved_percent=0,
    )


def _invalid_fields(s: ColocationStrategy) -> list[str]:
    """The wire names of the fields ``IsColocationStrategyValid`` refuses (an unset field is fine)."""
    positive = {
        "metricAggregateDurationSeconds": s.metric_aggregate_duration_seconds,
        "metricReportIntervalSeconds": s.metric_report_interval_seconds,
        "degradeTimeMinutes": s.degrade_time_minutes,
        "updateTimeThresholdSeconds": s.update_time_threshold_seconds,
        "resourceDiffThreshold": s.resource_diff_threshold,
    }
    non_negative = {
        "cpuReclaimThresholdPercent": s.cpu_reclaim_threshold_percent,
        "memoryReclaimThresholdPercent": s.memory_reclaim_threshold_percent,
        "midStaticCPUReservedPercent": s.mid_static_cpu_reserved_percent,
        "midStaticMemoryReservedPercent": s.mid_static_memory_reserved_percent,
        "batchCPUThresholdPercent": s.batch_cpu_threshold_percent,
        "batchMemoryThresholdPercent": s.batch_memory_threshold_percent,
    }
    percent = {
        "midCPUThresholdPercent": s.mid_cpu_threshold_percent,
        "midMemoryThresholdPercent": s.mid_memory_threshold_percent,
        "midUnallocatedPercent": s.mid_unallocated_percent,
    }
    bad = [f"{k}={v} (must be > 0)" for k, v in positive.items() if v is not None and v <= 0]
    bad += [f"{k}={v} (must be >= 0)" for k, v in non_negative.items() if v is not None and v < 0]
    bad += [
        f"{k}={v} (must be in [0, 100])" for k, v in percent.items() if v is not None and not 0 <= v <= 100
    ]
    if s.metric_memory_collect_policy is not None and not s.metric_memory_collect_policy:
        bad.append("metricMemoryCollectPolicy is empty")
    return bad


def is_colocation_strategy_valid(strategy: ColocationStrategy | None) -> bool:
    return strategy is not None and not _invalid_fields(strategy)


@dataclass(frozen=True)
class ParsedColocation:
    """The key in force: the cluster strategy and each ``nodeConfigs`` entry already merged over it."""

    cluster: ColocationStrategy
    node_configs: tuple[tuple[LabelSelector | None, ColocationStrategy], ...] = ()


def parse_colocation_config(text: str | None) -> ParsedColocation:
    """The key's JSON (None: absent or empty) as Koordinator's colocation ConfigMap handler reads it.

    Raises InvalidValue naming the field when the JSON does not parse or the cluster strategy is
    invalid (the caller keeps its last good value).
    """
    defaults = default_colocation_strategy()
    if text is None:
        return ParsedColocation(cluster=defaults)
    try:
        # Keys match case-insensitively and nothing is coerced ("60" is no int), as Go's json reads it.
        cfg = parse_json(KEY_COLOCATION, text, ColocationCfg)
    except InvalidAnnotation as exc:
        raise InvalidValue(exc.problem) from exc
    cluster = merge_cfg(defaults, cfg.cluster())
    bad = _invalid_fields(cluster)
    if bad:
        raise InvalidValue("invalid cluster strategy: " + ", ".join(bad))
    entries = []
    for entry in cfg.node_configs or ():
        merged = merge_cfg(cluster, entry.strategy())
        entries.append((entry.node_selector, merged if is_colocation_strategy_valid(merged) else cluster))
    return ParsedColocation(cluster=cluster, node_configs=tuple(entries))


@dataclass(frozen=True)
class NodeStrategy:
    strategy: ColocationStrategy
    problem: str | None = None
    """Why the node's colocation-strategy annotation was skipped (to report on the node)."""


def _ratio_percent(labels: Mapping[str, str], key: str) -> int | None:
    raw = labels.get(key)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    if not 0 <= value < float("inf"):  # NaN fails too
        return None
    return int(value * 100)


def node_colocation_strategy(
    config: ParsedColocation, labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None
) -> NodeStrategy:
    """The strategy in force on a node (``GetNodeColocationStrategy``)."""
    labels = labels or {}
    strategy = config.cluster
    for selector, entry in config.node_configs:
        if selector is not None and selector.matches(labels):
            strategy = entry
            break
    problem = None
    raw = lookup(annotations, ANNOTATION_NODE_COLOCATION_STRATEGY)
    if raw is not None:
        try:
            strategy = merge_cfg(
                strategy, parse_json(ANNOTATION_NODE_COLOCATION_STRATEGY, raw, ColocationStrategy)
            )
        except (InvalidAnnotation, ValidationError) as exc:
            problem = str(exc)
    overrides: dict[str, int] = {}
    for key, field in (
        (LABEL_CPU_RECLAIM_RATIO, "cpu_reclaim_threshold_percent"),
        (LABEL_MEMORY_RECLAIM_RATIO, "memory_reclaim_threshold_percent"),
        (LABEL_MID_STATIC_CPU_RESERVED_RATIO, "mid_static_cpu_reserved_percent"),
        (LABEL_MID_STATIC_MEMORY_RESERVED_RATIO, "mid_static_memory_reserved_percent"),
    ):
        percent = _ratio_percent(labels, key)
        if percent is not None:
            overrides[field] = percent
    if overrides:
        strategy = strategy.model_copy(update=overrides)
    return NodeStrategy(strategy=strategy, problem=problem)
