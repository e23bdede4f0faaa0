"""Sorting a pool's nodes into sources and targets (``classifyNodes``).

"Under" a threshold means <= on every resource; "over" means > on at least one. Koordinator walks
a Go map (random order); here every list is sorted by node name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from operators.descheduler.lownodeload.thresholds import NodeThresholds
from operators.descheduler.lownodeload.usage import Amounts, NodeUsage

__all__ = ["Classified", "classify", "is_over", "is_under", "over_resources"]


def is_under(usage: Amounts, threshold: Amounts) -> bool:
    return all(usage.get(name, 0) <= value for name, value in threshold.items())


def over_resources(usage: Amounts, threshold: Amounts) -> list[str]:
    return [name for name, value in threshold.items() if usage.get(name, 0) > value]


def is_over(usage: Amounts, threshold: Amounts) -> bool:
    return bool(over_resources(usage, threshold))


@dataclass(slots=True)
class Classified:
    low: list[NodeUsage] = field(default_factory=list)
    """Node usage under low, prod usage neither over prodHigh nor under prodLow."""
    both_low: list[NodeUsage] = field(default_factory=list)
    """Node usage under low and prod usage under prodLow: a target of both passes."""
    prod_low: list[NodeUsage] = field(default_factory=list)
    """Node usage between low and high, prod usage under prodLow: a prod-pass target."""
    sources: list[NodeUsage] = field(default_factory=list)
    """Node usage over high (prod usage not examined)."""
    prod_high: list[NodeUsage] = field(default_factory=list)
    """Not a source, prod usage over prodHigh: a prod-pass source."""

    @property
    def targets(self) -> int:
        return len(self.low) + len(self.both_low) + len(self.prod_low)


def classify(usages: Iterable[NodeUsage], thresholds: Mapping[str, NodeThresholds]) -> Classified:
    result = Classified()
    for usage in sorted(usages, key=lambda u: u.name):
        t = thresholds[usage.name]
        schedulable = not usage.node.spec.unschedulable
        prod_high = is_over(usage.prod_usage, t.prod_high)
        prod_low = is_under(usage.prod_usage, t.prod_low)
        if schedulable and is_under(usage.usage, t.low):
            if prod_high:
                result.prod_high.append(usage)
            elif prod_low:
                result.both_low.append(usage)
            else:
                result.low.append(usage)
        elif is_over(usage.usage, t.high):
            result.sources.append(usage)
        elif prod_high:
            result.prod_high.append(usage)
        elif prod_low and schedulable:  # an unschedulable node is never a target
            result.prod_low.append(usage)
    return result
