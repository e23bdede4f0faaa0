"""NodeMetric objects decoded once per watch event into what the plugin reads (integer units)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.duration import parse_go_duration_ns
from apis.extension import priority as priority_ext
from apis.quantity import Quantity
from apis.resources import to_int_units
from apis.slo.nodemetric import NodeMetric, ResourceMap
from apis.slo.nodemetric_reading import pods_metric_by_key

__all__ = ["DEFAULT_REPORT_INTERVAL_SECONDS", "NodeLoad", "PodUsage", "decode"]

DEFAULT_REPORT_INTERVAL_SECONDS = 60.0
"""koordlet's report interval when the NodeMetric's collect policy sets none."""

Usage = dict[str, int]


def _usage(resources: ResourceMap | None) -> Usage:
    amounts: Mapping[str, Quantity] = (resources.resources or {}) if resources else {}
    return {name: to_int_units(name, q) for name, q in amounts.items()}


@dataclass(frozen=True, slots=True)
class PodUsage:
    usage: Usage
    prod: bool
    """Reported as a koord-prod pod in the metric."""


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """One node's reported usage."""

    update_time: float | None
    """POSIX seconds of ``status.updateTime``; None: never reported (always expired)."""
    report_interval: float = DEFAULT_REPORT_INTERVAL_SECONDS
    has_node_metric: bool = False
    """``status.nodeMetric`` is present."""
    node_usage: Usage = field(default_factory=dict)
    system_usage: Usage = field(default_factory=dict)
    aggregated: tuple[tuple[int, dict[str, Usage]], ...] = ()
    """(window in ns, aggregation type -> usage) per reported window."""
    pods: dict[str, PodUsage] = field(default_factory=dict)
    """``namespace/name`` -> the pod's reported usage."""

    def aggregated_usage(self, duration_ns: int, kind: str) -> Usage | None:
        """Koordinator's ``getTargetAggregatedUsage``: the aggregate of ``kind`` over the window
        ``duration_ns``; 0 picks the longest window that reports ``kind``, and falls back to the
        latest node usage when none does. None: nothing to use."""
        if not self.has_node_metric or not self.aggregated:
            return None
        if duration_ns == 0:
            best: tuple[int, Usage] | None = None
            for window, usages in self.aggregated:
                usage = usages.get(kind)
                if usage and (best is None or window > best[0]):
                    best = (window, usage)
            if best is not None:
                return best[1]
            return self.node_usage or None
        for window, usages in self.aggregated:
            if window == duration_ns and usages.get(kind):
                return usages[kind]
        return None


def decode(metric: NodeMetric) -> NodeLoad:
    spec_policy = metric.spec.metric_collect_policy if metric.spec else None
    interval = DEFAULT_REPORT_INTERVAL_SECONDS
    if spec_policy is not None and spec_policy.report_interval_seconds is not None:
        interval = float(spec_policy.report_interval_seconds)
    status = metric.status
    if status is None:
        return NodeLoad(update_time=None, report_interval=interval)
    info = status.node_metric
    aggregated: list[tuple[int, dict[str, Usage]]] = []
    for entry in (info.aggregated_node_usages or ()) if info else ():
        window = parse_go_duration_ns(entry.duration) if entry.duration else 0
        aggregated.append((window, {kind: _usage(rm) for kind, rm in (entry.usage or {}).items()}))
    pods = {
        key: PodUsage(_usage(p.pod_usage), p.priority == priority_ext.PRIORITY_PROD)
        for key, p in pods_metric_by_key(status).items()
    }
    return NodeLoad(
        update_time=status.update_time.timestamp() if status.update_time else None,
        report_interval=interval,
        has_node_metric=info is not None,
        node_usage=_usage(info.node_usage) if info else {},
        system_usage=_usage(info.system_usage) if info else {},
        aggregated=tuple(aggregated),
        pods=pods,
    )
