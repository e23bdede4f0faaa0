"""BE CPU suppression by the LS usage (Koordinator's ``qosmanager/plugins/cpusuppress``).

What BE may use is what the threshold leaves after everything that is not BE::

    sys      = max(max(node - Σ pods - Σ host apps, 0), reserved)
    suppress = capacity x cpuSuppressThresholdPercent / 100 - Σ non-BE pods - Σ non-BE host apps - sys

(floored at ``capacity x cpuSuppressMinPercent / 100`` when that is set; all in milli-cores). A pod
is non-BE when neither its ``koordinator.sh/qosClass`` is BE nor its Kubernetes class BestEffort.

- ``cfsQuota``: ``quota = suppress x 100`` µs per 100 000 µs period, at least 2000; a change under
  1 % of the node's cores x period is skipped (unless at the floor) and a rise is capped at 10 %
  of them per round once a quota is set; written to the besteffort QoS cgroup.
- ``cpuset`` (default): ``n = max(ceil(suppress / 1000), 2)`` CPUs, growing by at most
  ``ceil(10 % x logical CPUs)`` a round; LSR-bound CPUs get ``floor(n x |LSR| / (|LSR| + |rest|))``
  of them; CPUs are taken per (NUMA node, socket) bucket, larger buckets first, round-robin, whole
  hyper-thread pairs before single CPUs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "CFS_PERIOD_US",
    "MIN_QUOTA_US",
    "CPUInfo",
    "UsageOf",
    "cfs_quota",
    "cpuset_size",
    "select_cpus",
    "split_lsr",
    "suppress_milli",
]

CFS_PERIOD_US = 100_000
MIN_QUOTA_US = 2000
_MAX_INCREASE = 0.10
_MIN_DELTA = 0.01
_MIN_CPUS = 2


@dataclass(frozen=True)
class UsageOf:
    """One pod's or host application's CPU use in milli-cores and whether it counts as BE."""

    milli: float
    be: bool


@dataclass(frozen=True)
class CPUInfo:
    cpu: int
    core: int
    socket: int = 0
    numa: int = 0


def suppress_milli(
    capacity_milli: int,
    threshold_percent: int,
    node_used_milli: float,
    pods: Iterable[UsageOf],
    host_apps: Iterable[UsageOf] = (),
    reserved_milli: float = 0.0,
    min_percent: int | None = None,
) -> int:
    pods, host_apps = list(pods), list(host_apps)
    sys = max(node_used_milli - sum(p.milli for p in pods) - sum(a.milli for a in host_apps), 0.0)
    sys = max(sys, reserved_milli)
    suppress = (
        capacity_milli * threshold_percent / 100
        - sum(p.milli for p in pods if not p.be)
        - sum(a.milli for a in host_apps if not a.be)
        - sys
    )
    if min_percent is not None and min_percent > 0:
        suppress = max(suppress, capacity_milli * min_percent / 100)
    return int(suppress)


def cfs_quota(suppress: int, current_quota: int, cores: int) -> int | None:
    """The besteffort cgroup's new quota in µs, None when the change is too small to write."""
    quota = max(suppress * CFS_PERIOD_US // 1000, MIN_QUOTA_US)
    node_quota = cores * CFS_PERIOD_US
    if current_quota > 0 and quota - current_quota > _MAX_INCREASE * node_quota:
        quota = current_quota + int(_MAX_INCREASE * node_quota)
    if current_quota > 0 and abs(quota - current_quota) < _MIN_DELTA * node_quota and quota != MIN_QUOTA_US:
        return None
    return quota


def cpuset_size(suppress: int, old_size: int, logical_cpus: int) -> int:
    size = max(math.ceil(suppress / 1000), _MIN_CPUS)
    if old_size > 0:
        size = min(size, old_size + math.ceil(_MAX_INCREASE * logical_cpus))
    return min(size, logical_cpus)


def split_lsr(size: int, lsr: int, rest: int) -> int:
    """How many of ``size`` CPUs come from the LSR-bound ones (none when there are no candidates:
    Koordinator divides by zero there)."""
    if lsr + rest == 0:
        return 0
    return size * lsr // (lsr + rest)


def select_cpus(candidates: Sequence[CPUInfo], count: int) -> list[int]:
    """``count`` CPUs: per (NUMA, socket) bucket, largest first, round-robin, whole cores first."""
    buckets: dict[tuple[int, int], dict[int, list[int]]] = {}
    for info in sorted(candidates, key=lambda c: c.cpu):
        buckets.setdefault((info.numa, info.socket), {}).setdefault(info.core, []).append(info.cpu)
    ordered = sorted(buckets.items(), key=lambda kv: (-sum(len(c) for c in kv[1].values()), kv[0]))
    cores = [[cpus for _, cpus in sorted(b.items())] for _, b in ordered]
    chosen: list[int] = []
    taken: set[int] = set()
    progress = True
    while len(chosen) < count and progress:
        progress = False
        for bucket in cores:
            for core in bucket:
                if taken.intersection(core) or len(core) < 2 or len(core) > count - len(chosen):
                    continue
                chosen += core
                taken.update(core)
                progress = True
                break
    progress = True
    while len(chosen) < count and progress:
        progress = False
        for bucket in cores:
            free = [cpu for core in bucket for cpu in core if cpu not in taken]
            if free and len(chosen) < count:
                chosen.append(free[0])
                taken.add(free[0])
                progress = True
    return sorted(chosen)
