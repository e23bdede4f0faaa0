"""LoadAwareScheduling against Koordinator's documented behaviour (algorithms 7), with the numbers
worked by hand: cases in the spirit of Koordinator's load_aware_test.go, plus a randomized check of
the vectorised Filter and Score against a per-node computation written from the spec."""

from __future__ import annotations

import json
import random

import pytest
from pydantic import ValidationError

from apis.core import Node
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.plugins.load_aware import LoadAwareSchedulingArgs
from scheduler.plugins.load_aware.estimator import Estimator, priority_class
from tests.scheduler.builders import make_node
from tests.scheduler.plugins.helpers import filter_reasons, scores
from tests.scheduler.plugins.load_aware_helpers import NOW, Rig, node_metric, pod

GI = 1024**3
USAGE_THRESHOLDS = {"usageThresholds": {"cpu": 65, "memory": 95}}


def nodes(*names: str, cpu: str = "100", memory: str = "100Gi") -> list[Node]:
    return [make_node(name).alloc(cpu=cpu, memory=memory).obj() for name in names]


def args(**fields: object) -> LoadAwareSchedulingArgs:
    return LoadAwareSchedulingArgs.model_validate(fields)


# ---- args ------------------------------------------------------------------------------------


def test_args_defaults_are_koordinators() -> None:
    a = LoadAwareSchedulingArgs()
    assert a.filter_expired_node_metrics is True
    assert a.node_metric_expiration_seconds == 180
    assert a.enable_schedule_when_node_metrics_expired is False
    assert a.usage_thresholds == {"cpu": 65, "memory": 95}
    assert a.resource_weights == {"cpu": 1, "memory": 1}
    assert a.estimated_scaling_factors == {"cpu": 85, "memory": 70}
    assert a.prod_usage_thresholds == {}
    assert a.dominant_resource_weight == 0
    assert a.estimated_seconds_after_pod_scheduled is None
    assert a.aggregated is None


def test_args_defaults_fill_only_what_is_empty() -> None:
    a = args(estimatedScalingFactors={"cpu": 50}, dominantResourceWeight=2, usageThresholds={"memory": 80})
    assert a.estimated_scaling_factors == {"cpu": 50, "memory": 70}
    assert a.resource_weights == {}  # no default weights beside a dominant weight
    assert a.usage_thresholds == {"memory": 80}


@pytest.mark.parametrize(
    "fields",
    [
        {"usageThresholds": {"cpu": 101}},
        {"resourceWeights": {"cpu": 0}},
        {"estimatedScalingFactors": {"cpu": 120}},
        {"nodeMetricExpirationSeconds": 0},
        {"dominantResourceWeight": 101},
        {"aggregated": {"usageAggregationType": "p42"}},
        {"aggregated": {"scoreAggregatedDuration": "-5m"}},
        {"estimator": "other"},
        {"usageTreshold": {"cpu": 1}},
    ],
)
def test_args_invalid(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        LoadAwareSchedulingArgs.model_validate(fields)


# ---- estimator -------------------------------------------------------------------------------


def estimate(obj_args: LoadAwareSchedulingArgs, **pod_fields: object) -> dict[str, int]:
    resources = obj_args.tracked_resources()
    values = Estimator(obj_args, resources).estimate(PodInfo.of(pod("p", **pod_fields)))  # type: ignore[arg-type]
    return dict(zip(resources, values.tolist(), strict=True))


def test_estimate_scales_the_larger_of_request_and_limit() -> None:
    a = LoadAwareSchedulingArgs()
    assert estimate(a, requests={"cpu": "4", "memory": "8Gi"}) == {"cpu": 3400, "memory": round(8 * GI * 0.7)}
    # limit above request: 85% of the limit (2 cpu), never above the limit
    assert (
        estimate(a, requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "2", "memory": "1Gi"})["cpu"]
        == 1700
    )


def test_estimate_of_a_pod_without_requests_is_250m_and_200Mi() -> None:
    assert estimate(LoadAwareSchedulingArgs()) == {"cpu": 250, "memory": 200 * 1024 * 1024}


def test_estimate_of_a_batch_pod_reads_its_batch_resources() -> None:
    batch = {"koordinator.sh/priority-class": "koord-batch"}
    got = estimate(
        LoadAwareSchedulingArgs(),
        requests={"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "4Gi"},
        labels=batch,
    )
    assert got == {"cpu": 1700, "memory": round(4 * GI * 0.7)}


def test_custom_scaling_factors_need_allow_customize_estimation() -> None:
    factors = {"scheduling.koordinator.sh/load-estimated-scaling-factors": json.dumps({"cpu": 50})}
    requests = {"cpu": "4", "memory": "1Gi"}
    assert estimate(LoadAwareSchedulingArgs(), requests=requests, annotations=factors)["cpu"] == 3400
    allowed = args(allowCustomizeEstimation=True)
    assert estimate(allowed, requests=requests, annotations=factors)["cpu"] == 2000


# ---- filter ----------------------------------------------------------------------------------


def test_hot_node_is_filtered_with_koordinators_reason() -> None:
    # 60 + 0.85 * 8 = 66.8 cpu of 100: round(66.8) = 67 > 65
    rig = Rig(
        nodes("hot", "cool"),
        metrics=[node_metric("hot", {"cpu": "60", "memory": "10Gi"}), node_metric("cool", {"cpu": "20"})],
    )
    got = filter_reasons(rig.plugin, PodInfo.of(pod("p", {"cpu": "8"})), rig.snapshot)
    assert got == {"hot": ["node(s) cpu usage exceed threshold"], "cool": []}
    # 60 + 0.85 * 5 = 64.25: fits
    assert filter_reasons(rig.plugin, PodInfo.of(pod("q", {"cpu": "5"})), rig.snapshot)["hot"] == []


def test_memory_threshold_and_zero_disables() -> None:
    rig = Rig(nodes("n"), metrics=[node_metric("n", {"cpu": "1", "memory": "96Gi"})])
    assert filter_reasons(rig.plugin, PodInfo.of(pod("p")), rig.snapshot)["n"] == [
        "node(s) memory usage exceed threshold"
    ]
    off = Rig(
        nodes("n"),
        args(usageThresholds={"cpu": 0, "memory": 0}),
        metrics=[node_metric("n", {"memory": "99Gi"})],
    )
    assert filter_reasons(off.plugin, PodInfo.of(pod("p")), off.snapshot)["n"] == []


def test_node_without_node_metric_passes_and_scores_zero() -> None:
    rig = Rig(nodes("bare"))
    p = PodInfo.of(pod("p", {"cpu": "90"}))
    assert filter_reasons(rig.plugin, p, rig.snapshot) == {"bare": []}
    assert scores(rig.plugin, p, rig.snapshot) == {"bare": 0}


def test_daemonset_pods_bypass_the_filter() -> None:
    rig = Rig(nodes("hot"), metrics=[node_metric("hot", {"cpu": "99"})])
    assert filter_reasons(rig.plugin, PodInfo.of(pod("ds", daemonset=True)), rig.snapshot) == {"hot": []}


def test_expired_metric_keeps_pods_off_by_default() -> None:
    stale = node_metric("stale", {"cpu": "1"}, updated=NOW - 180)
    never = node_metric("never", {"cpu": "1"}, updated=None)
    fresh = node_metric("fresh", {"cpu": "1"}, updated=NOW - 179)
    rig = Rig(nodes("stale", "never", "fresh"), metrics=[stale, never, fresh])
    p = PodInfo.of(pod("p"))
    assert filter_reasons(rig.plugin, p, rig.snapshot) == {
        "stale": ["node(s) nodeMetric expired"],
        "never": ["node(s) nodeMetric expired"],
        "fresh": [],
    }
    assert scores(rig.plugin, p, rig.snapshot)["stale"] == 0


def test_expired_metric_degrades_to_passing_when_allowed() -> None:
    hot_and_stale = node_metric("n", {"cpu": "99"}, updated=NOW - 3600)
    allowed = Rig(nodes("n"), args(enableScheduleWhenNodeMetricsExpired=True), metrics=[hot_and_stale])
    assert filter_reasons(allowed.plugin, PodInfo.of(pod("p")), allowed.snapshot) == {"n": []}
    # not filtering on expiry at all: the stale usage is still judged (Koordinator's order)
    judged = Rig(nodes("n"), args(filterExpiredNodeMetrics=False), metrics=[hot_and_stale])
    assert filter_reasons(judged.plugin, PodInfo.of(pod("p")), judged.snapshot) == {
        "n": ["node(s) cpu usage exceed threshold"]
    }


def test_node_annotation_overrides_thresholds() -> None:
    custom = {"scheduling.koordinator.sh/usage-thresholds": json.dumps({"usageThresholds": {"cpu": 30}})}
    annotated = make_node("strict").alloc(cpu="100", memory="100Gi").obj()
    annotated.metadata.annotations = custom
    rig = Rig(
        [annotated, *nodes("plain")],
        metrics=[node_metric("strict", {"cpu": "40"}), node_metric("plain", {"cpu": "40"})],
    )
    assert filter_reasons(rig.plugin, PodInfo.of(pod("p")), rig.snapshot) == {
        "strict": ["node(s) cpu usage exceed threshold"],
        "plain": [],
    }


@pytest.mark.parametrize("threshold", [-50, 1000])
def test_a_threshold_outside_0_to_100_is_ignored_with_one_warning(
    threshold: int, caplog: pytest.LogCaptureFixture
) -> None:
    custom = {
        "scheduling.koordinator.sh/usage-thresholds": json.dumps({"usageThresholds": {"cpu": threshold}})
    }
    annotated = make_node("odd").alloc(cpu="100", memory="100Gi").obj()
    annotated.metadata.annotations = custom
    rig = Rig(
        [annotated, *nodes("plain")],
        metrics=[node_metric("odd", {"cpu": "70"}), node_metric("plain", {"cpu": "70"})],
    )
    # The plugin's 65% applies to both, as if the annotation were absent.
    for _ in range(2):
        assert filter_reasons(rig.plugin, PodInfo.of(pod("p")), rig.snapshot) == {
            "odd": ["node(s) cpu usage exceed threshold"],
            "plain": ["node(s) cpu usage exceed threshold"],
        }
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "node odd: usage thresholds ignored" in warnings[0]
    assert "usageThresholds.cpu" in warnings[0]


def test_a_changed_node_annotation_takes_effect() -> None:
    rig = Rig(nodes("n"), metrics=[node_metric("n", {"cpu": "40"})])
    p = PodInfo.of(pod("p"))
    assert filter_reasons(rig.plugin, p, rig.snapshot) == {"n": []}
    strict = make_node("n").alloc(cpu="100", memory="100Gi").obj()
    strict.metadata.annotations = {
        "scheduling.koordinator.sh/usage-thresholds": json.dumps({"usageThresholds": {"cpu": 30}})
    }
    rig.cache.upsert_node(strict)
    assert filter_reasons(rig.plugin, p, rig.snapshot) == {"n": ["node(s) cpu usage exceed threshold"]}
    rig.cache.upsert_node(make_node("n").alloc(cpu="100", memory="100Gi").obj())
    assert filter_reasons(rig.plugin, p, rig.snapshot) == {"n": []}


def test_default_priority_class_follows_the_qos_class() -> None:
    assert priority_class(pod("burstable", {"cpu": "1"})) == "koord-prod"
    assert priority_class(
        pod("guaranteed", {"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})
    ) == ("koord-prod")
    assert priority_class(pod("best-effort")) == "koord-batch"
    assert priority_class(
        pod("labelled", {"cpu": "1"}, labels={"koordinator.sh/priority-class": "koord-mid"})
    ) == ("koord-mid")
    assert priority_class(pod("ranged", priority=5500)) == "koord-batch"
    assert (
        priority_class(pod("be-label", {"cpu": "1"}, labels={"koordinator.sh/qosClass": "BE"}))
        == "koord-batch"
    )


def test_prod_pods_are_judged_on_prod_usage() -> None:
    prod_args = args(prodUsageThresholds={"cpu": 50})
    prod_labels = {"koordinator.sh/priority-class": "koord-prod"}
    batch_labels = {"koordinator.sh/priority-class": "koord-batch"}
    running = [
        pod("web", {"cpu": "10"}, labels=prod_labels, node="n", scheduled_at=NOW - 3600),
        pod(
            "job",
            {"kubernetes.io/batch-cpu": "40000"},
            labels=batch_labels,
            node="n",
            scheduled_at=NOW - 3600,
        ),
    ]
    # node at 62 cpu (over 65 with any pod of 3+ cpu), of which the prod pod uses 45
    metric = node_metric(
        "n",
        {"cpu": "62"},
        pods=[("default/web", {"cpu": "45"}, "koord-prod"), ("default/job", {"cpu": "17"}, "koord-batch")],
    )
    rig = Rig(nodes("n"), prod_args, assigned=running, metrics=[metric])
    # prod: 45 + 0.85 * 4 = 48.4 -> 48 <= 50
    assert filter_reasons(
        rig.plugin, PodInfo.of(pod("p", {"cpu": "4"}, labels=prod_labels)), rig.snapshot
    ) == {"n": []}
    # prod: 45 + 0.85 * 8 = 51.8 -> 52 > 50
    assert filter_reasons(
        rig.plugin, PodInfo.of(pod("p", {"cpu": "8"}, labels=prod_labels)), rig.snapshot
    ) == {"n": ["node(s) cpu usage exceed threshold"]}
    # a batch pod is judged on the whole node: 62 + 0.85 * 4 = 65.4 -> 65, fits; 5 cpu: 66.25 -> 66
    batch = {"kubernetes.io/batch-cpu": "5000"}
    assert filter_reasons(rig.plugin, PodInfo.of(pod("b", batch, labels=batch_labels)), rig.snapshot) == {
        "n": ["node(s) cpu usage exceed threshold"]
    }


def test_prod_usage_include_sys() -> None:
    prod_labels = {"koordinator.sh/priority-class": "koord-prod"}
    metric = node_metric("n", {"cpu": "30"}, system={"cpu": "20"})
    p = PodInfo.of(pod("p", {"cpu": "4"}, labels=prod_labels))
    without = Rig(nodes("n"), args(prodUsageThresholds={"cpu": 20}), metrics=[metric])
    assert filter_reasons(without.plugin, p, without.snapshot) == {"n": []}  # 3.4 cpu of prod use
    with_sys = Rig(
        nodes("n"), args(prodUsageThresholds={"cpu": 20}, prodUsageIncludeSys=True), metrics=[metric]
    )
    assert filter_reasons(with_sys.plugin, p, with_sys.snapshot) == {
        "n": ["node(s) cpu usage exceed threshold"]
    }


def test_aggregated_thresholds_replace_the_plain_ones() -> None:
    agg = args(
        aggregated={
            "usageThresholds": {"cpu": 60},
            "usageAggregationType": "p95",
            "usageAggregatedDuration": "5m",
        }
    )
    metric = node_metric(
        "n",
        {"cpu": "10"},
        aggregated=[
            ("5m0s", {"p95": {"cpu": "70"}, "avg": {"cpu": "20"}}),
            ("10m0s", {"p95": {"cpu": "10"}}),
        ],
    )
    rig = Rig(nodes("n"), agg, metrics=[metric])
    assert filter_reasons(rig.plugin, PodInfo.of(pod("p")), rig.snapshot) == {
        "n": ["node(s) cpu aggregated usage exceed threshold"]
    }
    avg = args(
        aggregated={
            "usageThresholds": {"cpu": 60},
            "usageAggregationType": "avg",
            "usageAggregatedDuration": "5m",
        }
    )
    rig = Rig(nodes("n"), avg, metrics=[metric])
    assert filter_reasons(rig.plugin, PodInfo.of(pod("p")), rig.snapshot) == {"n": []}


def test_aggregated_duration_zero_takes_the_longest_window() -> None:
    agg = args(aggregated={"usageThresholds": {"cpu": 60}, "usageAggregationType": "p95"})
    metric = node_metric(
        "n", {"cpu": "10"}, aggregated=[("5m0s", {"p95": {"cpu": "10"}}), ("30m0s", {"p95": {"cpu": "90"}})]
    )
    rig = Rig(nodes("n"), agg, metrics=[metric])
    assert filter_reasons(rig.plugin, PodInfo.of(pod("p")), rig.snapshot)["n"] == [
        "node(s) cpu aggregated usage exceed threshold"
    ]


# ---- score -----------------------------------------------------------------------------------


def test_cooler_node_is_preferred() -> None:
    rig = Rig(
        nodes("busy", "idle", cpu="32", memory="64Gi"),
        metrics=[
            node_metric("busy", {"cpu": "16", "memory": "32Gi"}),
            node_metric("idle", {"cpu": "4", "memory": "8Gi"}),
        ],
    )
    got = scores(rig.plugin, PodInfo.of(pod("p", {"cpu": "2", "memory": "4Gi"})), rig.snapshot)
    # busy: cpu (32000 - 17700) * 100 // 32000 = 44; memory 64Gi - 34.8Gi -> 45; (44 + 45) // 2
    # idle: cpu (32000 - 5700) -> 82; memory 64Gi - 10.8Gi -> 83; (82 + 83) // 2
    assert got == {"busy": 44, "idle": 82}


def test_dominant_resource_weight() -> None:
    metric = node_metric("n", {"cpu": "24", "memory": "8Gi"})
    p = PodInfo.of(pod("p", {"cpu": "0", "memory": "0"}))  # estimate 250m, 200Mi
    rig = Rig(nodes("n", cpu="32", memory="64Gi"), args(dominantResourceWeight=2), metrics=[metric])
    # cpu least = (32000 - 24250) * 100 // 32000 = 24; memory = 87; weights cpu 0, memory 0 (none given):
    # (0 + 2 * min(24, 87)) // 2 = 24
    assert scores(rig.plugin, p, rig.snapshot) == {"n": 24}
    both = Rig(
        nodes("n", cpu="32", memory="64Gi"),
        args(dominantResourceWeight=2, resourceWeights={"cpu": 1, "memory": 1}),
        metrics=[metric],
    )
    assert scores(both.plugin, p, both.snapshot) == {"n": (24 + 87 + 2 * 24) // 4}


def test_supported_resources_are_tracked_and_weigh_in_the_dominant_term() -> None:
    node = make_node("n").alloc({"ephemeral-storage": "100Gi"}, cpu="32", memory="64Gi").obj()
    metric = node_metric("n", {"cpu": "8", "memory": "16Gi", "ephemeral-storage": "90Gi"})
    p = PodInfo.of(pod("p", {"cpu": "0", "memory": "0"}))
    plain = Rig([node], args(dominantResourceWeight=1), metrics=[metric])
    # min over cpu (32000 - 8250 -> 74) and memory (64Gi - 16.2Gi -> 74)
    assert scores(plain.plugin, p, plain.snapshot) == {"n": 74}
    storage = Rig(
        [node], args(dominantResourceWeight=1, supportedResources=["ephemeral-storage"]), metrics=[metric]
    )
    assert storage.plugin.resources == ("cpu", "memory", "ephemeral-storage")
    assert scores(storage.plugin, p, storage.snapshot) == {"n": 10}  # 10Gi of 100Gi free


def test_score_according_prod_usage() -> None:
    prod_labels = {"koordinator.sh/priority-class": "koord-prod"}
    running = [pod("web", {"cpu": "10"}, labels=prod_labels, node="n", scheduled_at=NOW - 3600)]
    metric = node_metric("n", {"cpu": "80"}, pods=[("default/web", {"cpu": "8"}, "koord-prod")])
    p = PodInfo.of(pod("p", {"cpu": "4"}, labels=prod_labels))
    plain = Rig(nodes("n"), assigned=running, metrics=[metric])
    prod = Rig(nodes("n"), args(scoreAccordingProdUsage=True), assigned=running, metrics=[metric])
    # memory: estimate 200Mi of 100Gi -> 99 both times; cpu: 83.4 of 100 -> 16 vs 8 + 3.4 -> 88
    assert scores(plain.plugin, p, plain.snapshot) == {"n": (16 + 99) // 2}
    assert scores(prod.plugin, p, prod.snapshot) == {"n": (88 + 99) // 2}


def test_aggregated_score() -> None:
    metric = node_metric("n", {"cpu": "10"}, aggregated=[("10m0s", {"p90": {"cpu": "50"}})])
    p = PodInfo.of(pod("p", {"cpu": "0"}))
    rig = Rig(
        nodes("n"),
        args(aggregated={"scoreAggregationType": "p90", "scoreAggregatedDuration": "10m"}),
        metrics=[metric],
    )
    # cpu (100000 - 50250) -> 49; memory 99
    assert scores(rig.plugin, p, rig.snapshot) == {"n": (49 + 99) // 2}


# ---- just-assigned pods ----------------------------------------------------------------------


def test_burst_within_the_report_interval_spreads() -> None:
    """Pods placed since the last report are estimated: the node that looked idle fills up in the
    scores (and then the filter) instead of taking the whole burst."""
    rig = Rig(
        nodes("idle", "warm", cpu="16", memory="64Gi"),
        metrics=[node_metric("idle", {"cpu": "0"}), node_metric("warm", {"cpu": "4"})],
    )
    placed: list[str] = []
    for i in range(6):
        p = PodInfo.of(pod(f"burst-{i}", {"cpu": "2", "memory": "1Gi"}))
        fits = [n for n, reasons in filter_reasons(rig.plugin, p, rig.snapshot).items() if not reasons]
        got = scores(rig.plugin, p, rig.snapshot)
        best = max(fits, key=lambda n: got[n])
        rig.assume(pod(f"burst-{i}", {"cpu": "2", "memory": "1Gi"}), best)
        placed.append(best)
    assert placed[:2] == ["idle", "idle"]  # 1.7 cpu each: after two the idle node is at 3.4 of 16
    assert set(placed) == {"idle", "warm"}
    # without the estimate every pod would have gone to "idle": 6 * 1.7 = 10.2 cpu of 16 = 64%
    assert placed.count("idle") <= 4


def test_burst_hits_the_threshold() -> None:
    rig = Rig(nodes("n", cpu="10", memory="64Gi"), metrics=[node_metric("n", {"cpu": "3"})])
    for i in range(2):  # 3 + 2 * 1.7 = 6.4 cpu
        rig.assume(pod(f"b{i}", {"cpu": "2"}), "n")
    p = PodInfo.of(pod("next", {"cpu": "2"}))  # 6.4 + 1.7 = 8.1 -> 81% > 65
    assert filter_reasons(rig.plugin, p, rig.snapshot) == {"n": ["node(s) cpu usage exceed threshold"]}
    rig.cache.forget("b0")  # its binding failed
    # one estimate gone: 3 + 1.7 + 1.7 = 6.4 -> 64%
    assert filter_reasons(rig.plugin, p, rig.snapshot) == {"n": []}


def test_reported_pods_are_not_estimated_twice() -> None:
    """A pod assigned before the last report, and listed in it, counts by its reported usage."""
    running = [pod("old", {"cpu": "8"}, node="n", scheduled_at=NOW - 600)]
    metric = node_metric("n", {"cpu": "50"}, pods=[("default/old", {"cpu": "1"}, None)], updated=NOW - 10)
    rig = Rig(nodes("n"), assigned=running, metrics=[metric])
    p = PodInfo.of(pod("p", {"cpu": "10"}))  # 50 + 8.5 = 58.5 -> 59: fits (with the old pod estimated: 65)
    assert filter_reasons(rig.plugin, p, rig.snapshot) == {"n": []}
    assert scores(rig.plugin, p, rig.snapshot)["n"] == (41 + 99) // 2


def test_pod_assigned_within_the_report_interval_is_estimated() -> None:
    """Assigned 30 s before a report that comes every 60 s: its reported usage is not trusted."""
    running = [pod("young", {"cpu": "8"}, node="n", scheduled_at=NOW - 40)]
    metric = node_metric("n", {"cpu": "50"}, pods=[("default/young", {"cpu": "1"}, None)], updated=NOW - 10)
    rig = Rig(nodes("n"), assigned=running, metrics=[metric])
    p = PodInfo.of(pod("p", {"cpu": "10"}))  # 50 + (6.8 - 1) + 8.5 = 64.3 -> 64
    assert scores(rig.plugin, p, rig.snapshot)["n"] == (35 + 99) // 2


def test_estimated_seconds_after_pod_scheduled_extends_the_estimate() -> None:
    running = [pod("warming", {"cpu": "8"}, node="n", scheduled_at=NOW - 600)]
    metric = node_metric("n", {"cpu": "50"}, pods=[("default/warming", {"cpu": "1"}, None)])
    p = PodInfo.of(pod("p", {"cpu": "10"}))
    short = Rig(nodes("n"), args(estimatedSecondsAfterPodScheduled=300), assigned=running, metrics=[metric])
    assert scores(short.plugin, p, short.snapshot)["n"] == (41 + 99) // 2  # window over: trusted
    long = Rig(nodes("n"), args(estimatedSecondsAfterPodScheduled=900), assigned=running, metrics=[metric])
    assert scores(long.plugin, p, long.snapshot)["n"] == (35 + 99) // 2  # still estimated
    initialized = [pod("warming", {"cpu": "8"}, node="n", scheduled_at=NOW - 600, initialized_at=NOW - 100)]
    after_init = Rig(
        nodes("n"), args(estimatedSecondsAfterInitialized=60), assigned=initialized, metrics=[metric]
    )
    assert scores(after_init.plugin, p, after_init.snapshot)["n"] == (41 + 99) // 2
    custom = {"scheduling.koordinator.sh/load-estimated-seconds-after-initialized": "300"}
    annotated = [
        pod(
            "warming",
            {"cpu": "8"},
            node="n",
            scheduled_at=NOW - 600,
            initialized_at=NOW - 100,
            annotations=custom,
        )
    ]
    own = Rig(
        nodes("n"),
        args(estimatedSecondsAfterInitialized=60, allowCustomizeEstimation=True),
        assigned=annotated,
        metrics=[metric],
    )
    assert scores(own.plugin, p, own.snapshot)["n"] == (35 + 99) // 2


def test_metric_update_and_deletion_are_followed() -> None:
    rig = Rig(nodes("n"), metrics=[node_metric("n", {"cpu": "90"})])
    p = PodInfo.of(pod("p"))
    assert filter_reasons(rig.plugin, p, rig.snapshot)["n"] == ["node(s) cpu usage exceed threshold"]
    rig.publish(node_metric("n", {"cpu": "10"}))
    assert filter_reasons(rig.plugin, p, rig.snapshot)["n"] == []
    rig.publish(node_metric("n", {"cpu": "90"}))
    rig.publish(node_metric("n", {"cpu": "90"}), deleted=True)
    assert filter_reasons(rig.plugin, p, rig.snapshot)["n"] == []


def test_pre_filter_state_is_computed_once_per_cycle() -> None:
    rig = Rig(nodes("n"), metrics=[node_metric("n", {"cpu": "10"})])
    p = PodInfo.of(pod("p", {"cpu": "1"}))
    state = CycleState()
    rig.plugin.pre_filter(state, p, rig.snapshot)
    rig.publish(node_metric("n", {"cpu": "99"}))  # arrives mid-cycle: judged next cycle
    rows = rig.snapshot.candidate_rows()
    assert rig.plugin.filter(state, p, rig.snapshot, rows).feasible.tolist() == [True]
    assert filter_reasons(rig.plugin, p, rig.snapshot)["n"] == ["node(s) cpu usage exceed threshold"]


# ---- vectorised against a per-node computation -----------------------------------------------


def _reference(
    alloc: tuple[int, int], usage: tuple[int, int], pods_est: list[tuple[int, int]], pod_est: tuple[int, int]
) -> tuple[bool, int]:
    """Per node, from algorithms 7.3-7.5: (passes the default thresholds, score with weights 1/1)."""
    used = [usage[i] + sum(e[i] for e in pods_est) + pod_est[i] for i in range(2)]
    thresholds = (65, 95)
    passes = True
    for i in range(2):
        percent = used[i] / alloc[i] * 100
        rounded = int(percent // 1 + (1 if percent % 1 >= 0.5 else 0))
        if rounded > thresholds[i]:
            passes = False
            break
    least = [0 if used[i] > alloc[i] else (alloc[i] - used[i]) * 100 // alloc[i] for i in range(2)]
    return passes, sum(least) // 2


def test_vectorised_filter_and_score_agree_with_a_per_node_computation() -> None:
    rnd = random.Random(15)
    node_objs = []
    metrics = []
    assumed: list[tuple[str, int, int]] = []
    expected_inputs = {}
    for i in range(150):
        cpu, mem = rnd.choice([8, 16, 64]), rnd.choice([32, 128])
        name = f"n{i}"
        node_objs.append(make_node(name).alloc(cpu=str(cpu), memory=f"{mem}Gi").obj())
        used_cpu, used_mem = rnd.randint(0, cpu * 1000), rnd.randint(0, mem) * GI
        metrics.append(node_metric(name, {"cpu": f"{used_cpu}m", "memory": str(used_mem)}))
        extra = [(rnd.randint(0, 4), rnd.randint(0, 4)) for _ in range(rnd.randint(0, 3))]
        expected_inputs[name] = ((cpu * 1000, mem * GI), (used_cpu, used_mem), extra)
    rig = Rig(node_objs, metrics=metrics)
    for name, (_, _, extra) in expected_inputs.items():
        for j, (c, m) in enumerate(extra):
            requests = {"cpu": str(c), "memory": f"{m}Gi"}
            rig.assume(pod(f"{name}-{j}", requests), name)
            assumed.append((name, c, m))
    p = PodInfo.of(pod("p", {"cpu": "3", "memory": "5Gi"}))
    got_filter = filter_reasons(rig.plugin, p, rig.snapshot)
    got_scores = scores(rig.plugin, p, rig.snapshot)

    def est(cpu: int, mem: int) -> tuple[int, int]:
        return (
            250 if cpu == 0 else round(cpu * 1000 * 0.85),
            200 * 1024 * 1024 if mem == 0 else round(mem * GI * 0.7),
        )

    for name, (alloc, usage, extra) in expected_inputs.items():
        passes, score = _reference(alloc, usage, [est(c, m) for c, m in extra], est(3, 5))
        assert (got_filter[name] == []) == passes, (name, got_filter[name])
        assert got_scores[name] == score, name
