"""How many pods of a workload may migrate or be unavailable at once, and the token buckets that
pace migrations (Koordinator's ``util.GetMaxUnavailable`` and the MigrationController's
ObjectLimiter)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["TokenBucket", "max_allowed", "scaled"]


def scaled(value: int | str, replicas: int) -> int:
    """An int as is, a percentage of ``replicas`` rounded down (``intstr`` with roundUp=false)."""
    if isinstance(value, int):
        return value
    return math.floor(int(value.removesuffix("%")) * replicas / 100)


def max_allowed(value: int | str | None, replicas: int) -> int:
    """maxMigrating / maxUnavailable of a workload with ``replicas`` desired pods.

    Set: scaled and rounded down, and a 0 raised to 1 (v1.6), so an explicit 0 also means 1.
    Unset: more than 10 replicas -> 10% rounded down, 4 to 10 -> 2, fewer -> 1. Capped at replicas."""
    if value is None:
        allowed = replicas * 10 // 100 if replicas > 10 else 2 if replicas >= 4 else 1
    else:
        allowed = scaled(value, replicas) or 1
    return min(allowed, replicas)


@dataclass
class TokenBucket:
    """A bucket of ``burst`` tokens refilled at ``rate`` per second, full at creation; the caller
    passes the time, so the bucket is pure."""

    rate: float
    burst: int
    tokens: float = field(default=-1.0)
    updated: float = 0.0
    last_used: float = 0.0

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = float(self.burst)

    def available(self, now: float) -> float:
        if now > self.updated:
            self.tokens = min(float(self.burst), self.tokens + (now - self.updated) * self.rate)
            self.updated = now
        return self.tokens

    def allows(self, now: float) -> bool:
        return self.available(now) >= 1

    def take(self, now: float) -> bool:
        """Spend one token; False (and nothing spent) when there is none."""
        self.last_used = now
        if self.available(now) < 1:
            return False
        self.tokens -= 1
        return True

    def spend(self, now: float) -> None:
        """Spend one token even into debt (a completed eviction is counted whatever the bucket)."""
        self.available(now)
        self.last_used = now
        self.tokens -= 1
