"""Prod peak and Prod reclaimable for NodeMetric (algorithms.md 10.3, "Where ProdReclaimable comes from").

Koordinator's priority predictor, over the samples the metric cache holds (the longest aggregation
window, 30 minutes by default)::

    peak        = (p95 cpu / p98 memory of the system + the same of each Prod or no-class pod) x 1.10
    reclaimable = min(max(sum of the requests of those pods - peak, 0), allocatable - peak)

``allocatable`` is the node's ``node.koordinator.sh/raw-allocatable`` annotation when present (the
value before amplification), else ``status.allocatable``. Terminating and finished pods take no
part. The result is reported as ``prodReclaimableMetric`` and the peak as ``prodPeakMetric``.

Simplifications against Koordinator (docs/colocation.md says the same):

- Koordinator keeps decaying histograms over days (half-life 12 h for CPU, 24 h for memory) and
  checkpoints them; here the percentiles are taken over the metric cache's window, so a restarted
  koordlet predicts from what it has seen since.
- Koordinator's cold start keeps a pod created less than 24 h ago out of the reclaimable part (its
  pod predictor); here a pod without samples in the window is kept out: its request counts as its
  peak, so a pod reclaims nothing until koordlet has seen it use something.
- The peak adds each pod's percentile instead of taking the percentile of the pods' summed usage
  (the cache keeps one series per pod); for pods that peak together the two are equal, otherwise
  this peak is the higher, so less is reclaimed.
- Reclaimable is floored at 0 where Koordinator may report a negative value (mid then counts it
  as 0 either way).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apis.core import Node
from apis.errors import InvalidValue
from apis.extension.priority import PRIORITY_NONE, PRIORITY_PROD
from apis.extension.qosannotations import ANNOTATION_NODE_RAW_ALLOCATABLE
from apis.quantity import Format, Quantity
from apis.resources import parse_resource_list
from apis.slo.nodemetric import NodeMetricStatus, ReclaimableMetric, ResourceMap
from koordlet.collectors import series
from koordlet.metric_cache import Aggregate, MetricSource
from koordlet.reporter import PodMeta

__all__ = [
    "CPU_PERCENTILE",
    "MEMORY_PERCENTILE",
    "SAFETY_MARGIN_PERCENT",
    "Prediction",
    "node_allocatable",
    "predict",
    "with_prediction",
]

CPU_PERCENTILE = 0.95
MEMORY_PERCENTILE = 0.98
SAFETY_MARGIN_PERCENT = 10


def percentile(aggregate: Aggregate, p: float) -> float:
    """The nearest-rank percentile, as the metric cache computes p95."""
    rank = max(math.ceil(p * aggregate.count), 1)
    seen = 0
    for value, count in aggregate.levels:
        seen += count
        if seen >= rank:
            return value
    return aggregate.levels[-1][0]


@dataclass(frozen=True)
class Prediction:
    cpu_milli: tuple[int, int]
    """(reclaimable, peak) in milli-cores."""
    memory_bytes: tuple[int, int]
    """(reclaimable, peak) in bytes."""

    @staticmethod
    def _metric(cpu: int, memory: int) -> ReclaimableMetric:
        return ReclaimableMetric(
            resource=ResourceMap(
                resources={
                    "cpu": Quantity.from_milli(cpu),
                    "memory": Quantity.from_int(memory, Format.BINARY_SI),
                }
            )
        )

    @property
    def reclaimable(self) -> ReclaimableMetric:
        return self._metric(self.cpu_milli[0], self.memory_bytes[0])

    @property
    def peak(self) -> ReclaimableMetric:
        return self._metric(self.cpu_milli[1], self.memory_bytes[1])


def _usage(
    source: MetricSource, key: tuple[str, ...], start: float, end: float, p: float, scale: int
) -> int | None:
    window = source.query(key, start, end)
    return None if window is None else round(percentile(window, p) * scale)


def _one(requests: int, predicted: int, unpredicted: int, allocatable: int) -> tuple[int, int]:
    peak = predicted * (100 + SAFETY_MARGIN_PERCENT) // 100 + unpredicted
    reclaimable = min(max(requests - peak, 0), allocatable - peak)
    return max(reclaimable, 0), peak


def predict(
    source: MetricSource,
    pods: Sequence[PodMeta],
    allocatable: Mapping[str, Quantity],
    *,
    memory_series: str,
    window_seconds: float,
    now: float,
) -> Prediction:
    """``memory_series``: the pod memory series the reporter uses for the node's policy."""
    start = now - window_seconds
    cpu_used = _usage(source, (series.SYSTEM_CPU,), start, now, CPU_PERCENTILE, 1000) or 0
    memory_used = _usage(source, (series.SYSTEM_MEMORY,), start, now, MEMORY_PERCENTILE, 1) or 0
    requested_cpu = requested_memory = unpredicted_cpu = unpredicted_memory = 0
    for pod in pods:
        if pod.terminating or pod.priority not in (PRIORITY_PROD, PRIORITY_NONE):
            continue
        request_cpu = pod.requests["cpu"].milli_value() if "cpu" in pod.requests else 0
        request_memory = pod.requests["memory"].value() if "memory" in pod.requests else 0
        requested_cpu += request_cpu
        requested_memory += request_memory
        pod_cpu = _usage(source, (series.POD_CPU, pod.uid), start, now, CPU_PERCENTILE, 1000)
        pod_memory = _usage(source, (memory_series, pod.uid), start, now, MEMORY_PERCENTILE, 1)
        if pod_cpu is None or pod_memory is None:
            unpredicted_cpu += request_cpu
            unpredicted_memory += request_memory
            continue
        cpu_used += pod_cpu
        memory_used += pod_memory
    alloc_cpu = allocatable["cpu"].milli_value() if "cpu" in allocatable else 0
    alloc_memory = allocatable["memory"].value() if "memory" in allocatable else 0
    return Prediction(
        cpu_milli=_one(requested_cpu, cpu_used, unpredicted_cpu, alloc_cpu),
        memory_bytes=_one(requested_memory, memory_used, unpredicted_memory, alloc_memory),
    )


def node_allocatable(node: Node) -> dict[str, Quantity]:
    """``raw-allocatable`` when it parses (the allocatable before amplification), else the status's."""
    raw = (node.metadata.annotations or {}).get(ANNOTATION_NODE_RAW_ALLOCATABLE)
    if raw is not None:
        try:
            parsed = json.loads(raw)
            if isinstance(parsed, dict):
                return parse_resource_list(parsed)
        except (ValueError, InvalidValue):
            pass  # written by koord-manager's webhook; a broken one falls back to the status
    return dict(node.status.allocatable or {})


def with_prediction(
    status: NodeMetricStatus,
    source: MetricSource,
    pods: Sequence[PodMeta],
    node: Node | None,
    *,
    memory_series: str,
    window_seconds: float,
    now: float,
) -> NodeMetricStatus:
    """``status`` with ``prodReclaimableMetric`` and ``prodPeakMetric``; unchanged without the node."""
    if node is None:
        return status
    prediction = predict(
        source,
        pods,
        node_allocatable(node),
        memory_series=memory_series,
        window_seconds=window_seconds,
        now=now,
    )
    return status.model_copy(
        update={"prod_reclaimable_metric": prediction.reclaimable, "prod_peak_metric": prediction.peak}
    )
