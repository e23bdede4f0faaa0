"""Per-node low/high (and prod low/high) thresholds in absolute units (``newThresholds`` and
``getNodeThresholds``).

A resource a pool names nowhere in ``low`` is not a reason to call a node low or hot: Koordinator
sets both its low and high to 100% (0% deviation), overwriting a high the user did set and
mutating the config. Here a missing low takes the configured high (so the high still guards
targets and sources), and a missing high is 100%; the config is never written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from operators.descheduler.lownodeload.args import NodePool, ResourceThresholds
from operators.descheduler.lownodeload.usage import Amounts, NodeUsage

__all__ = ["NodeThresholds", "node_thresholds", "percent_pair"]

MAX_PERCENT = 100.0


@dataclass(frozen=True, slots=True)
class NodeThresholds:
    low: Amounts
    high: Amounts
    prod_low: Amounts
    prod_high: Amounts


def percent_pair(
    low: ResourceThresholds, high: ResourceThresholds, name: str, deviation: bool
) -> tuple[float, float]:
    """The (low, high) percents of one resource, with the missing-key rule of the module doc."""
    if deviation:
        # A zero low deviation means "ignore this resource" (both thresholds = allocatable).
        return low.get(name, 0.0), high.get(name, 0.0)
    upper = high.get(name, MAX_PERCENT)
    return low.get(name, upper), upper


def _absolute(pct: float, alloc: int) -> int:
    # Koordinator's float64 order of operations (pct x alloc x 0.01), so 33.3% of 10 cores is 3330m.
    return math.floor(pct * alloc * 0.01)


def _mean_percent(usages: Sequence[NodeUsage], name: str, prod: bool) -> float:
    values = [
        (u.prod_usage if prod else u.usage)[name] / u.allocatable[name] * 100
        for u in usages
        if u.allocatable.get(name)
    ]
    return sum(values) / len(values) if values else 0.0


def _clamp(pct: float) -> float:
    return min(max(pct, 0.0), MAX_PERCENT)


def _pair_for_node(
    usage: NodeUsage,
    names: Sequence[str],
    low: ResourceThresholds,
    high: ResourceThresholds,
    deviation: bool,
    means: dict[str, float],
) -> tuple[Amounts, Amounts]:
    lows: Amounts = {}
    highs: Amounts = {}
    for name in names:
        alloc = usage.allocatable.get(name, 0)
        low_pct, high_pct = percent_pair(low, high, name, deviation)
        if deviation:
            if low_pct == 0:
                lows[name] = highs[name] = alloc
                continue
            low_pct = _clamp(means[name] - low_pct)
            high_pct = _clamp(means[name] + high_pct)
        lows[name] = _absolute(low_pct, alloc)
        highs[name] = _absolute(high_pct, alloc)
    return lows, highs


def node_thresholds(pool: NodePool, usages: Sequence[NodeUsage]) -> dict[str, NodeThresholds]:
    """Thresholds of every node with a metric, by node name. In deviation mode the mean is over
    the pool's nodes that have metrics (``usages``)."""
    names = pool.resource_names()
    deviation = pool.use_deviation_thresholds
    means = {name: _mean_percent(usages, name, prod=False) for name in names}
    prod_means = {name: _mean_percent(usages, name, prod=True) for name in names}
    result: dict[str, NodeThresholds] = {}
    for usage in usages:
        low, high = _pair_for_node(usage, names, pool.low_thresholds, pool.high_thresholds, deviation, means)
        if pool.has_prod_thresholds:
            prod_low, prod_high = _pair_for_node(
                usage, names, pool.prod_low_thresholds, pool.prod_high_thresholds, deviation, prod_means
            )
        else:  # no prod thresholds: prod is never hot and never in the way (100%)
            prod_low = prod_high = dict(usage.allocatable)
        result[usage.name] = NodeThresholds(low=low, high=high, prod_low=prod_low, prod_high=prod_high)
    return result
