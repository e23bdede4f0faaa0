"""BE CPU eviction by satisfaction (Koordinator's ``qosmanager/plugins/cpuevict``, ``BECPUEvict``).

The BE satisfaction rate is ``limit / request``: the limit is the BE pods' real CPU limit (the
besteffort cgroup's cpuset size or cfs quota), or with ``cpuEvictPolicy: evictByAllocatable`` the
node's ``kubernetes.io/batch-cpu`` allocatable (0 counts as 1 milli-core); the request is the sum of
the BE pods' batch-cpu requests. When BE usage is high (limit under one core, or usage / limit at
least ``cpuEvictBEUsageThresholdPercent``, 90 by default) and the rate is at or below the lower
percent, ``request x (upper% - rate)`` milli-cores of batch-cpu requests are released, taking the
smaller of the window average's and the latest sample's answer. Victims: BE pods by ``spec.priority``
ascending, then usage / request descending, until their batch-cpu requests cover the release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apis.slo.nodeslo import ResourceThresholdStrategy
from koordlet.qos.memory_evict import covering
from koordlet.qos.pods import QoSPod

__all__ = [
    "EVICT_BY_ALLOCATABLE",
    "REASON_BE_CPU",
    "BECPUSample",
    "CPUEviction",
    "cpu_eviction",
    "milli_to_release",
    "satisfaction_config_error",
]

REASON_BE_CPU = "EvictPodByBECPUSatisfaction"
EVICT_BY_ALLOCATABLE = "evictByAllocatable"
_LOWER_MAX = 60
_UPPER_MAX = 100
_USAGE_THRESHOLD_DEFAULT = 90
MIN_ALLOCATABLE_MILLI = 1.0


@dataclass(frozen=True)
class BECPUSample:
    """Milli-cores of the BE pods together: used, requested (batch-cpu) and their limit."""

    usage: float
    request: float
    limit: float


@dataclass(frozen=True)
class CPUEviction:
    release_milli: int
    victims: tuple[QoSPod, ...]
    candidates: tuple[tuple[QoSPod, float], ...] = ()
    """Every BE pod in eviction order with its batch-cpu request."""

    @property
    def message(self) -> str:
        return f"cpuEvict by BE satisfaction, need to release batch-cpu request: {self.release_milli}m"


def satisfaction_config_error(strategy: ResourceThresholdStrategy) -> str | None:
    """Why the satisfaction fields cannot be used (Koordinator's checks), None when they can."""
    lower = strategy.cpu_evict_be_satisfaction_lower_percent
    upper = strategy.cpu_evict_be_satisfaction_upper_percent
    if lower is None or upper is None:
        return "cpuEvictBESatisfactionLowerPercent or cpuEvictBESatisfactionUpperPercent not set"
    if not 0 < lower <= _LOWER_MAX:
        return f"cpuEvictBESatisfactionLowerPercent({lower}) must be in (0,{_LOWER_MAX}]"
    if not 0 < upper < _UPPER_MAX:
        return f"cpuEvictBESatisfactionUpperPercent({upper}) must be in (0,{_UPPER_MAX})"
    if upper < lower:
        return f"cpuEvictBESatisfactionUpperPercent({upper}) < cpuEvictBESatisfactionLowerPercent({lower})"
    return None


def _usage_high(sample: BECPUSample, threshold: int | None) -> bool:
    if sample.limit <= 0:
        return False
    if sample.limit < 1000:
        return True
    return (
        sample.usage / sample.limit
        >= (threshold if threshold is not None else _USAGE_THRESHOLD_DEFAULT) / 100
    )


def milli_to_release(strategy: ResourceThresholdStrategy, sample: BECPUSample) -> int:
    """The batch-cpu request to release for one sample (0 when satisfied or usage is low)."""
    if sample.request <= 0 or not _usage_high(sample, strategy.cpu_evict_be_usage_threshold_percent):
        return 0
    lower = strategy.cpu_evict_be_satisfaction_lower_percent or 0
    upper = strategy.cpu_evict_be_satisfaction_upper_percent or 0
    rate = sample.limit / sample.request
    if rate > lower / 100:
        return 0
    gap = upper / 100 - rate
    return int(sample.request * gap) if gap > 0 else 0


def order_by_cpu(pods: Sequence[QoSPod], used_milli: Mapping[str, float]) -> list[QoSPod]:
    def usage(pod: QoSPod) -> float:
        request = pod.batch_cpu_request_milli
        return used_milli.get(pod.uid, 0.0) / request if request > 0 else 0.0

    return sorted(pods, key=lambda p: (p.priority, -usage(p), p.key))


def cpu_eviction(
    strategy: ResourceThresholdStrategy,
    average: BECPUSample,
    latest: BECPUSample,
    pods: Sequence[QoSPod],
    used_milli: Mapping[str, float],
) -> CPUEviction | None:
    by_average = milli_to_release(strategy, average)
    if by_average <= 0:
        return None
    if (latest.request, latest.limit) == (average.request, average.limit):
        release = by_average if _usage_high(latest, strategy.cpu_evict_be_usage_threshold_percent) else 0
    else:
        release = min(by_average, milli_to_release(strategy, latest))
    if release <= 0:
        return None
    ordered = order_by_cpu([p for p in pods if p.raw_qos == "BE" and not p.terminating], used_milli)
    candidates = tuple((pod, float(pod.batch_cpu_request_milli)) for pod in ordered)
    return CPUEviction(release, covering(candidates, release), candidates)
