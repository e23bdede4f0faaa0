"""Which thresholds a node's filter applies: the plugin's, or its own from the node annotation
``scheduling.koordinator.sh/usage-thresholds`` (Koordinator's ``generateUsageThresholdsFilterProfile``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from apis.core import Node
from apis.duration import parse_go_duration_ns
from apis.extension import loadaware
from scheduler.plugins.load_aware.args import LoadAwareSchedulingArgs

__all__ = ["FilterProfile", "node_profile", "plugin_profile"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FilterProfile:
    """Koordinator's ``usageThresholdsFilterProfile`` of one node."""

    usage: Mapping[str, int]
    prod: Mapping[str, int]
    aggregated: tuple[Mapping[str, int], str, int] | None = None
    """(thresholds, aggregation type, window in ns) when filtering on an aggregate."""


def plugin_profile(args: LoadAwareSchedulingArgs) -> FilterProfile:
    agg = args.aggregated
    aggregated = None
    if agg is not None and agg.filter_active and agg.usage_aggregation_type is not None:
        duration = parse_go_duration_ns(agg.usage_aggregated_duration)
        aggregated = (agg.usage_thresholds, agg.usage_aggregation_type, duration)
    return FilterProfile(args.usage_thresholds, args.prod_usage_thresholds, aggregated)


def node_profile(
    node: Node | None, default: FilterProfile, report: Callable[[Node, str], None] | None = None
) -> FilterProfile:
    """The node's annotation over the plugin's profile, each part falling back when empty.

    A malformed annotation (a threshold outside 0-100 among them) is ignored: the plugin's
    thresholds apply and ``report`` is told the problem, to warn the node's owner."""
    annotations = node.metadata.annotations if node is not None else None
    if node is None or not annotations or loadaware.ANNOTATION_CUSTOM_USAGE_THRESHOLDS not in annotations:
        return default
    try:
        custom = loadaware.get_custom_usage_thresholds(annotations)
    except ValueError as error:
        log.debug("node %s: %s; the plugin's thresholds apply", node.metadata.name, error)
        if report is not None:
            report(node, f"usage thresholds ignored, the plugin's apply: {error}")
        return default
    aggregated = default.aggregated
    agg = custom.aggregated_usage
    if agg is not None and agg.usage_thresholds and agg.usage_aggregation_type:
        duration = parse_go_duration_ns(agg.usage_aggregated_duration) if agg.usage_aggregated_duration else 0
        aggregated = (agg.usage_thresholds, agg.usage_aggregation_type, duration)
    return FilterProfile(
        custom.usage_thresholds or default.usage, custom.prod_usage_thresholds or default.prod, aggregated
    )
