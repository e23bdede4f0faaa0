"""Metrics carry kube-scheduler's names, labels and buckets, on a private registry per object."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from scheduler.framework.runtime import Observer
from scheduler.metrics import SchedulerMetrics, exponential_buckets, extension_point_label, status_label

KUBE_NAMES = [
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_pending_pods",
    "scheduler_framework_extension_point_duration_seconds",
    "scheduler_plugin_execution_duration_seconds",
    "scheduler_queue_incoming_pods_total",
    "scheduler_preemption_attempts_total",
    "scheduler_preemption_victims",
    "scheduler_pod_scheduling_sli_duration_seconds",
    "scheduler_pod_scheduling_attempts",
    "scheduler_permit_wait_duration_seconds",
    "scheduler_binding_duration_seconds",
    "scheduler_unschedulable_pods",
    "scheduler_scheduler_cache_size",
    "leader_election_master_status",  # client-go's leaderelection metric
]
SOLVER_NAMES = [
    "koord_scheduler_solver_duration_seconds",
    "koord_scheduler_solver_fallbacks_total",
    "koord_scheduler_solver_model_size",
    "koord_scheduler_solver_gap_ratio",
    "koord_scheduler_leadership_losses_total",
    "koord_scheduler_equivalence_class_hits_total",
]


def recorded() -> SchedulerMetrics:
    m = SchedulerMetrics()
    m.attempt("scheduled", "koord-scheduler", 0.003)
    m.attempt("unschedulable", "koord-scheduler", 0.02)
    m.pod_scheduled(attempts=2, seconds_since_first_enqueue=1.5)
    m.observe_plugin("preFilter", "Coscheduling", "UNSCHEDULABLE_AND_UNRESOLVABLE", 0.0004)
    m.observe_extension_point("filter", "SUCCESS", "koord-scheduler", 0.001)
    m.permit_wait("scheduled", 0.5)
    m.binding("scheduled", 0.01)
    m.set_pending(active=3, backoff=2, unschedulable=1, gated=4)
    m.queue_incoming("active", "PodAdd")
    m.set_unschedulable_pods({("koord-scheduler", "ElasticQuota"): 5})
    m.set_cache_size(nodes=10, pods=20, assumed_pods=1)
    m.preemption(victims=3)
    m.solver_solve("gang_placement", "OPTIMAL", 0.02)
    m.solver_fallback("gang_placement", "timeout")
    m.solver_model("gang_placement", variables=120, constraints=40)
    m.solved("cpsat", "OPTIMAL", 0.03, fell_back=False, gap=0.004)
    m.set_leader("koordinator-system/koord-scheduler", True)
    m.leadership_lost()
    m.count_class_hits(5)
    return m


def test_every_metric_name_is_exposed() -> None:
    m = recorded()
    text = m.exposition().decode()
    for name in KUBE_NAMES + SOLVER_NAMES:
        assert f"\n{name}" in text or text.startswith(name), name
    assert set(KUBE_NAMES + SOLVER_NAMES) == set(m.names())


@pytest.mark.parametrize(
    ("sample", "labels", "value"),
    [
        pytest.param(
            "scheduler_schedule_attempts_total",
            {"result": "scheduled", "profile": "koord-scheduler"},
            1.0,
            id="attempts",
        ),
        pytest.param(
            "scheduler_scheduling_attempt_duration_seconds_count",
            {"result": "unschedulable", "profile": "koord-scheduler"},
            1.0,
            id="attempt-duration",
        ),
        pytest.param(
            "scheduler_plugin_execution_duration_seconds_count",
            {
                "plugin": "Coscheduling",
                "extension_point": "PreFilter",
                "status": "UnschedulableAndUnresolvable",
            },
            1.0,
            id="plugin-labels-in-kube-spelling",
        ),
        pytest.param(
            "scheduler_framework_extension_point_duration_seconds_count",
            {"extension_point": "Filter", "status": "Success", "profile": "koord-scheduler"},
            1.0,
            id="extension-point",
        ),
        pytest.param("scheduler_pending_pods", {"queue": "active"}, 3.0, id="pending-active"),
        pytest.param("scheduler_pending_pods", {"queue": "backoff"}, 2.0, id="pending-backoff"),
        pytest.param("scheduler_pending_pods", {"queue": "unschedulable"}, 1.0, id="pending-unschedulable"),
        pytest.param("scheduler_pending_pods", {"queue": "gated"}, 4.0, id="pending-gated"),
        pytest.param(
            "scheduler_queue_incoming_pods_total", {"queue": "active", "event": "PodAdd"}, 1.0, id="incoming"
        ),
        pytest.param("scheduler_preemption_attempts_total", {}, 1.0, id="preemption-attempts"),
        pytest.param("scheduler_preemption_victims_sum", {}, 3.0, id="preemption-victims"),
        pytest.param("scheduler_pod_scheduling_sli_duration_seconds_count", {"attempts": "2"}, 1.0, id="sli"),
        pytest.param("scheduler_pod_scheduling_attempts_sum", {}, 2.0, id="pod-attempts"),
        pytest.param(
            "scheduler_permit_wait_duration_seconds_count", {"result": "scheduled"}, 1.0, id="permit-wait"
        ),
        pytest.param("scheduler_binding_duration_seconds_count", {"result": "scheduled"}, 1.0, id="binding"),
        pytest.param(
            "scheduler_unschedulable_pods",
            {"plugin": "ElasticQuota", "profile": "koord-scheduler"},
            5.0,
            id="unsched",
        ),
        pytest.param("scheduler_scheduler_cache_size", {"type": "assumed_pods"}, 1.0, id="cache-size"),
        pytest.param(
            "koord_scheduler_solver_duration_seconds_count",
            {"solver": "gang_placement", "status": "OPTIMAL"},
            1.0,
            id="solver-duration",
        ),
        pytest.param(
            "koord_scheduler_solver_fallbacks_total",
            {"solver": "gang_placement", "reason": "timeout"},
            1.0,
            id="solver-fallbacks",
        ),
        pytest.param(
            "koord_scheduler_solver_model_size",
            {"solver": "gang_placement", "kind": "variables"},
            120.0,
            id="solver-variables",
        ),
        pytest.param(
            "koord_scheduler_solver_model_size",
            {"solver": "gang_placement", "kind": "constraints"},
            40.0,
            id="solver-constraints",
        ),
    ],
)
def test_samples_carry_kube_scheduler_labels(sample: str, labels: dict[str, str], value: float) -> None:
    assert recorded().registry.get_sample_value(sample, labels) == value


def test_attempt_duration_uses_kube_buckets() -> None:
    m = SchedulerMetrics()
    m.attempt("scheduled", "p", 0.0015)
    bounds = [
        sample.labels["le"]
        for family in m.registry.collect()
        if family.name == "scheduler_scheduling_attempt_duration_seconds"
        for sample in family.samples
        if sample.name.endswith("_bucket")
    ]
    assert len(bounds) == 16  # 15 exponential buckets + Inf
    assert float(bounds[0]) == 0.001
    assert float(bounds[14]) == pytest.approx(0.001 * 2**14)
    assert bounds[15] == "+Inf"
    assert (
        m.registry.get_sample_value(
            "scheduler_scheduling_attempt_duration_seconds_bucket",
            {"result": "scheduled", "profile": "p", "le": "0.002"},
        )
        == 1.0
    )


def test_pending_gauges_exist_before_the_first_update() -> None:
    text = SchedulerMetrics().exposition().decode()
    for queue in ("active", "backoff", "unschedulable", "gated"):
        assert f'scheduler_pending_pods{{queue="{queue}"}} 0.0' in text


def test_each_object_has_its_own_registry() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.attempt("error", "p", 0.1)
    assert a.registry is not b.registry
    assert (
        a.registry.get_sample_value("scheduler_schedule_attempts_total", {"result": "error", "profile": "p"})
        == 1
    )
    assert (
        b.registry.get_sample_value("scheduler_schedule_attempts_total", {"result": "error", "profile": "p"})
        is None
    )


def test_a_given_registry_is_used() -> None:
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    assert m.registry is registry
    assert registry.get_sample_value("scheduler_pending_pods", {"queue": "active"}) == 0.0


def test_observe_plugin_matches_the_runtime_observer_signature() -> None:
    observer: Observer = SchedulerMetrics().observe_plugin
    observer("score", "Reservation", "SUCCESS", 0.001)


@pytest.mark.parametrize(
    ("given", "want"),
    [("preFilter", "PreFilter"), ("PreFilter", "PreFilter"), ("postBind", "PostBind"), ("score", "Score")],
)
def test_extension_point_label(given: str, want: str) -> None:
    assert extension_point_label(given) == want


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ("SUCCESS", "Success"),
        ("UNSCHEDULABLE_AND_UNRESOLVABLE", "UnschedulableAndUnresolvable"),
        ("Unschedulable", "Unschedulable"),
        ("SKIP", "Skip"),
    ],
)
def test_status_label(given: str, want: str) -> None:
    assert status_label(given) == want


def test_exponential_buckets() -> None:
    assert exponential_buckets(1, 2, 4) == (1, 2, 4, 8)


def test_a_solve_records_its_gap_and_a_greedy_one_none() -> None:
    m = SchedulerMetrics()
    m.solved("cpsat", "OPTIMAL", 0.03, fell_back=False, gap=0.004)
    m.solved("greedy", "GREEDY", 0.01, fell_back=False)
    text = m.exposition().decode()
    assert 'koord_scheduler_solver_gap_ratio_count{solver="cpsat"} 1.0' in text
    assert 'koord_scheduler_solver_gap_ratio_bucket{le="0.005",solver="cpsat"} 1.0' in text
    assert 'koord_scheduler_solver_gap_ratio_bucket{le="0.001",solver="cpsat"} 0.0' in text
    assert 'solver_gap_ratio_count{solver="greedy"}' not in text


def test_an_unschedulable_gauge_no_longer_rejecting_anyone_reads_zero() -> None:
    m = SchedulerMetrics(CollectorRegistry())
    m.set_unschedulable_pods(
        {("koord-scheduler", "ElasticQuota"): 5, ("koord-scheduler", "NodeResourcesFit"): 1}
    )
    m.set_unschedulable_pods({("koord-scheduler", "NodeResourcesFit"): 2})
    text = m.exposition().decode()
    assert 'scheduler_unschedulable_pods{plugin="ElasticQuota",profile="koord-scheduler"} 0.0' in text
    assert 'scheduler_unschedulable_pods{plugin="NodeResourcesFit",profile="koord-scheduler"} 2.0' in text


def test_class_hits_are_counted_from_the_loops_running_total() -> None:
    m = SchedulerMetrics()

    def hits() -> float:
        value = m.registry.get_sample_value("koord_scheduler_equivalence_class_hits_total")
        return value or 0.0

    m.count_class_hits(3)
    m.count_class_hits(3)
    m.count_class_hits(10)
    assert hits() == 10
    m.count_class_hits(2)  # a new classes object (a reloaded loop) counts from zero
    assert hits() == 12
