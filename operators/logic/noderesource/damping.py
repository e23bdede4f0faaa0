"""Whether a computed batch/mid result is worth writing (algorithms.md 10.2.4 step 3).

A node is written when koord-manager has not written it for ``updateTimeThresholdSeconds`` (the
timer is in memory, so a restarted koord-manager writes every node once), or when a resource
appears, disappears, or moves by more than ``resourceDiffThreshold`` of its current value
(``|new - old| > old x threshold``, in milli units). Smaller moves wait for the timer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apis.quantity import Quantity

__all__ = ["is_resource_diff", "need_sync"]


def is_resource_diff(old: Quantity, new: Quantity, threshold: float) -> bool:
    return abs(new.milli_value() - old.milli_value()) > old.milli_value() * threshold


def need_sync(
    names: Iterable[str],
    current: Mapping[str, Quantity],
    desired: Mapping[str, Quantity | None],
    *,
    last_write: float | None,
    now: float,
    update_time_threshold_seconds: float,
    resource_diff_threshold: float,
) -> bool:
    """``current``: the node's allocatable; ``desired``: the new value of each name (None: removed)."""
    if last_write is None or now - last_write > update_time_threshold_seconds:
        return True
    for name in names:
        old, new = current.get(name), desired.get(name)
        if (old is None) != (new is None):
            return True
        if old is not None and new is not None and is_resource_diff(old, new, resource_diff_threshold):
            return True
    return False
