"""The NodeMetric status koordlet writes, shaped as Koordinator's koordlet fills it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from apis.slo.nodemetric import AggregatePolicy, NodeMetricCollectPolicy, NodeMetricSpec
from koordlet.collectors import series
from koordlet.metric_cache import MetricCache
from koordlet.policy import effective_policy
from koordlet.reporter import PodMeta, build_status

GI = 1 << 30
NOW = 10_000.0
POD = PodMeta(uid="uid-1", name="web", namespace="default", priority="koord-prod", qos="LS")


def _cache(seconds: int, node_cpu: float = 2.0) -> MetricCache:
    """``seconds`` of samples up to NOW: node 2 cores / 6Gi, a pod 0.5 / 1Gi, its system share."""
    cache = MetricCache(retention_seconds=10_000)
    for age in range(seconds):
        t = NOW - age
        cache.append((series.NODE_CPU,), t, node_cpu)
        cache.append((series.NODE_MEMORY,), t, 6.0 * GI)
        cache.append((series.NODE_MEMORY_WITH_PAGE_CACHE,), t, 9.0 * GI)
        cache.append((series.NODE_MEMORY_WITH_HOT_PAGE,), t, 7.0 * GI)
        cache.append((series.SYSTEM_CPU,), t, node_cpu - 0.5)
        cache.append((series.SYSTEM_MEMORY,), t, 5.0 * GI)
        cache.append((series.POD_CPU, "uid-1"), t, 0.5)
        cache.append((series.POD_MEMORY, "uid-1"), t, 1.0 * GI)
        cache.append((series.POD_MEMORY_WITH_PAGE_CACHE, "uid-1"), t, 2.0 * GI)
        cache.append((series.POD_MEMORY_WITH_HOT_PAGE, "uid-1"), t, 1.5 * GI)
    return cache


def _spec(**policy: Any) -> NodeMetricSpec:
    return NodeMetricSpec(metric_collect_policy=NodeMetricCollectPolicy(**policy))


def test_status_has_koordlets_shape() -> None:
    status = build_status(_cache(2000), effective_policy(None), [POD], NOW)
    assert status is not None
    wire = status.to_wire()
    assert wire["updateTime"] == datetime.fromtimestamp(NOW, UTC).isoformat().replace("+00:00", "Z")
    node = wire["nodeMetric"]
    assert node["nodeUsage"] == {"resources": {"cpu": "2", "memory": "6Gi"}}
    assert node["systemUsage"] == {"resources": {"cpu": "1500m", "memory": "5Gi"}}
    assert [entry["duration"] for entry in node["aggregatedNodeUsages"]] == ["5m0s", "10m0s", "30m0s"]
    for entry in node["aggregatedNodeUsages"]:
        assert set(entry["usage"]) == {"p50", "p90", "p95", "p99"}
        assert entry["usage"]["p95"] == {"resources": {"cpu": "2", "memory": "6Gi"}}
    assert [entry["duration"] for entry in node["aggregatedSystemUsages"]] == ["5m0s", "10m0s", "30m0s"]
    assert wire["podsMetric"] == [
        {
            "name": "web",
            "namespace": "default",
            "podUsage": {"resources": {"cpu": "500m", "memory": "1Gi"}},
            "priority": "koord-prod",
            "qos": "LS",
        }
    ]


def test_usage_is_the_average_over_the_aggregate_duration() -> None:
    cache = _cache(0)
    for age in range(122):  # 61 samples at 1 core, then 61 at 3 cores up to now
        cache.append((series.NODE_CPU,), NOW - age, 3.0 if age <= 60 else 1.0)
        cache.append((series.NODE_MEMORY,), NOW - age, float(GI))
    status = build_status(cache, effective_policy(_spec(aggregate_duration_seconds=60)), [], NOW)
    assert status is not None
    assert status.node_metric is not None
    assert status.to_wire()["nodeMetric"]["nodeUsage"]["resources"]["cpu"] == "3"
    status = build_status(cache, effective_policy(_spec(aggregate_duration_seconds=300)), [], NOW)
    assert status is not None
    assert status.to_wire()["nodeMetric"]["nodeUsage"]["resources"]["cpu"] == "2"


def test_percentiles_per_window() -> None:
    cache = MetricCache(retention_seconds=10_000)
    for age in range(600):  # the last 61 samples hot (4 cores), the rest 1 core
        cache.append((series.NODE_CPU,), NOW - age, 4.0 if age <= 60 else 1.0)
        cache.append((series.NODE_MEMORY,), NOW - age, float(GI))
    spec = _spec(node_aggregate_policy=AggregatePolicy(durations=["2m", "10m"]))
    status = build_status(cache, effective_policy(spec), [], NOW)
    assert status is not None
    windows = status.to_wire()["nodeMetric"]["aggregatedNodeUsages"]
    two, ten = windows
    assert two["duration"] == "2m"
    assert two["usage"]["p50"]["resources"]["cpu"] == "4"  # 61 of 121 samples are hot
    assert ten["usage"]["p50"]["resources"]["cpu"] == "1"
    assert ten["usage"]["p90"]["resources"]["cpu"] == "4"  # 61 of 600 hot: the 540th smallest is hot


def test_a_window_not_yet_half_covered_is_reported_empty() -> None:
    status = build_status(_cache(400), effective_policy(None), [], NOW)  # 400 s of samples
    assert status is not None
    windows = {
        entry["duration"]: entry["usage"] for entry in status.to_wire()["nodeMetric"]["aggregatedNodeUsages"]
    }
    assert windows["5m0s"]["p99"] == {"resources": {"cpu": "2", "memory": "6Gi"}}
    assert windows["10m0s"]["p99"] == {"resources": {"cpu": "2", "memory": "6Gi"}}  # 400 s >= half of 600
    assert windows["30m0s"] == {"p50": {}, "p90": {}, "p95": {}, "p99": {}}  # 400 s < 900 s: cold start


def test_memory_collect_policies() -> None:
    cache = _cache(100)

    def memory(policy: str, cold_supported: bool) -> tuple[str, str]:
        status = build_status(
            cache, effective_policy(_spec(node_memory_collect_policy=policy)), [POD], NOW, cold_supported
        )
        assert status is not None
        wire = status.to_wire()
        return wire["nodeMetric"]["nodeUsage"]["resources"]["memory"], wire["podsMetric"][0]["podUsage"][
            "resources"
        ]["memory"]

    assert memory("usageWithoutPageCache", True) == ("6Gi", "1Gi")
    assert memory("usageWithPageCache", False) == ("9Gi", "2Gi")
    assert memory("usageWithHotPageCache", True) == ("7Gi", "1536Mi")
    # a kernel without kidled: the hot page policy falls back to usage without page cache
    assert memory("usageWithHotPageCache", False) == ("6Gi", "1Gi")


def test_pods_without_samples_are_left_out_and_no_node_samples_means_no_report() -> None:
    other = PodMeta(uid="uid-2", name="new", namespace="default", priority="", qos="")
    status = build_status(_cache(100), effective_policy(None), [POD, other], NOW)
    assert status is not None
    assert status.pods_metric is not None
    assert [pod.name for pod in status.pods_metric] == ["web"]
    assert build_status(MetricCache(), effective_policy(None), [POD], NOW) is None


def test_policy_defaults_and_floors() -> None:
    policy = effective_policy(None)
    assert (policy.report_interval_seconds, policy.aggregate_duration_seconds) == (60, 300)
    assert [text for text, _ in policy.windows] == ["5m0s", "10m0s", "30m0s"]
    assert policy.memory_policy == "usageWithoutPageCache"
    floored = effective_policy(_spec(report_interval_seconds=5, aggregate_duration_seconds=10))
    assert (floored.report_interval_seconds, floored.aggregate_duration_seconds) == (30, 60)
    assert (
        effective_policy(_spec(report_interval_seconds=5), report_interval_override=2).report_interval_seconds
        == 2
    )
