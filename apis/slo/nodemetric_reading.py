"""Reading a NodeMetric's report: whether it is still fresh, and the pods' usage by pod key."""

from __future__ import annotations

from datetime import datetime

from apis.podkey import namespaced_key
from apis.slo.nodemetric import NodeMetricStatus, PodMetricInfo

__all__ = ["is_expired", "pods_metric_by_key"]


def is_expired(update_time: datetime | None, now: datetime, expiration_seconds: float) -> bool:
    """Never reported (no ``updateTime``), or reported at least ``expiration_seconds`` ago."""
    return update_time is None or (now - update_time).total_seconds() >= expiration_seconds


def pods_metric_by_key(status: NodeMetricStatus | None) -> dict[str, PodMetricInfo]:
    """``status.podsMetric`` by ``apis.podkey`` key."""
    pods = (status.pods_metric if status is not None else None) or ()
    return {namespaced_key(p.namespace, p.name): p for p in pods}
