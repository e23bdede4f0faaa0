"""CFS quota arithmetic shared by the rules that set a quota: kubelet's ``MilliCPUToQuota`` and the
CPU-normalization division."""

from __future__ import annotations

import math

__all__ = ["CFS_PERIOD_US", "normalize_quota", "quota_of_milli"]

CFS_PERIOD_US = 100_000
_MIN_QUOTA_US = 1000


def quota_of_milli(milli: int) -> int:
    """kubelet's ``MilliCPUToQuota``: -1 (unlimited) for no limit, at least 1000 µs."""
    if milli <= 0:
        return -1
    return max(milli * CFS_PERIOD_US // 1000, _MIN_QUOTA_US)


def normalize_quota(quota: int, ratio: float | None) -> int:
    """``ceil(quota / ratio)`` for a limited quota and a ratio above 1; otherwise the quota."""
    if quota <= 0 or ratio is None or ratio <= 1.0:
        return quota
    return math.ceil(quota / ratio)
