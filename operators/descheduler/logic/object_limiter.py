"""The MigrationController's ObjectLimiter (v1.6): one token bucket per workload (its controller
uid) and, when configured, per namespace. rate = maxMigrating / duration, burst = ``burst``
(0 -> 1), full at creation; an eviction spends a token; a bucket unused for 1.5 x duration is
forgotten. Koordinator's ``trackEvictedPod`` skips the other kind when one has max 0 (bug 5);
here each kind is tracked on its own."""

from __future__ import annotations

from dataclasses import dataclass, field

from apis.core import Pod
from operators.descheduler.config import LimiterKind, MigrationControllerArgs, duration
from operators.descheduler.logic.limits import TokenBucket, max_allowed
from operators.descheduler.logic.view import Workload

__all__ = ["ObjectLimiter"]


@dataclass
class ObjectLimiter:
    args: MigrationControllerArgs
    _buckets: dict[tuple[LimiterKind, str], TokenBucket] = field(default_factory=dict)

    def _keys(self, pod: Pod, workload: Workload | None) -> list[tuple[LimiterKind, str, int, float]]:
        """(kind, key, maxMigrating, seconds) of each limiter that applies to the pod."""
        out: list[tuple[LimiterKind, str, int, float]] = []
        for kind, limiter in sorted(self.args.object_limiters.items()):
            seconds = duration(limiter.duration).total_seconds()
            if seconds <= 0:
                continue
            if kind == "workload":
                if workload is None:
                    continue
                value = (
                    limiter.max_migrating
                    if limiter.max_migrating is not None
                    else self.args.max_migrating_per_workload
                )
                out.append((kind, workload.uid, max_allowed(value, workload.replicas), seconds))
            else:
                # A percentage has no base for a namespace: read as 0, i.e. off (as Koordinator).
                value = limiter.max_migrating if isinstance(limiter.max_migrating, int) else 0
                out.append((kind, pod.metadata.namespace or "", value, seconds))
        return [k for k in out if k[2] > 0]

    def _bucket(
        self, kind: LimiterKind, key: str, max_migrating: int, seconds: float, now: float
    ) -> TokenBucket:
        limiter = self.args.object_limiters[kind]
        bucket = self._buckets.get((kind, key))
        if bucket is None:
            bucket = TokenBucket(
                rate=max_migrating / seconds, burst=limiter.burst or 1, updated=now, last_used=now
            )
            self._buckets[(kind, key)] = bucket
        return bucket

    def allows(self, pod: Pod, workload: Workload | None, now: float) -> bool:
        self._forget(now)
        return all(self._bucket(*k, now).allows(now) for k in self._keys(pod, workload))

    def track(self, pod: Pod, workload: Workload | None, now: float) -> None:
        """An eviction happened: spend a token in each bucket of the pod."""
        for k in self._keys(pod, workload):
            self._bucket(*k, now).spend(now)

    def _forget(self, now: float) -> None:
        for (kind, key), bucket in list(self._buckets.items()):
            seconds = duration(self.args.object_limiters[kind].duration).total_seconds()
            if now - bucket.last_used > 1.5 * seconds:
                del self._buckets[(kind, key)]
