"""batch-cpu / batch-memory per policy, against figures computed by hand from algorithms.md 10.2.

The node: capacity 16 cores / 100Gi, allocatable 15 / 98Gi (kubelet reserves 1 core, 2Gi); default
strategy: margin 40 % of cpu (6400m) and 35 % of memory (35Gi). systemUsage 500m / 1Gi, so
sysUsed' = max(system, reserved) = 1000m / 2Gi.

Pods (Running unless said):
- ``a`` prod (LS) requests 4 / 10Gi, uses 1 / 4Gi;
- ``b`` prod LSE requests 2 / 4Gi, uses 500m / 1Gi: its cpu counts as the request (2000m);
- ``c`` prod requests 1 / 2Gi, no metric yet: counts with its request everywhere;
- ``d`` koord-batch (batch resources, uses 3 / 5Gi): not HP;
- ``g`` prod, Succeeded, still reported at 300m / 512Mi: dangling;
- metric ``e`` (prod, 700m / 1Gi) without a pod: dangling; metric ``f`` (batch, 2 / 2Gi): ignored.

HPRequest = 7000m / 16Gi; HPUsed = 1000+2000+1000+700+300 = 5000m, 4+1+2+1+0.5 = 8.5Gi;
HPMaxUsedReq = 4000+2000+1000+700+300 = 8000m, 10+4+2+1+0.5 = 17.5Gi.
"""

from __future__ import annotations

from typing import Any

import pytest

from apis.slo.sloconfig.colocation import ColocationStrategy, default_colocation_strategy
from apis.slo.sloconfig.merge import merge_cfg
from operators.logic.noderesource.batch import batch_resources
from operators.logic.noderesource.inputs import CpuMem, node_inputs
from tests.operators.logic.noderesource.builders import metric, node, pod

GI = 1024**3


def _pods() -> list[Any]:
    return [
        pod("a", "4", "10Gi"),
        pod("b", "2", "4Gi", priority_class="koord-prod", qos="LSE"),
        pod("c", "1", "2Gi"),
        pod("d", priority_class="koord-batch", qos="BE", resources={"kubernetes.io/batch-cpu": "3000"}),
        pod("g", "1", "1Gi", phase="Succeeded"),
    ]


def _metric(**kw: Any) -> Any:
    pods = {
        "a": ("1", "4Gi", "koord-prod"),
        "b": ("500m", "1Gi", "koord-prod"),
        "d": ("3", "5Gi", "koord-batch"),
        "g": ("300m", "512Mi", "koord-prod"),
        "e": ("700m", "1Gi", "koord-prod"),
        "f": ("2", "2Gi", "koord-batch"),
    }
    return metric(pods=pods, **kw)


def _strategy(**fields: Any) -> ColocationStrategy:
    return merge_cfg(default_colocation_strategy(), {"enable": True, **fields})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({}, CpuMem(3600, int(54.5 * GI)), id="usage"),
        pytest.param({"memoryCalculatePolicy": "request"}, CpuMem(3600, 47 * GI), id="memory-request"),
        pytest.param(
            {"cpuCalculatePolicy": "maxUsageRequest", "memoryCalculatePolicy": "maxUsageRequest"},
            CpuMem(600, int(45.5 * GI)),
            id="maxUsageRequest",
        ),
        # CPU has no request policy: it falls back to usage, as any unknown value does.
        pytest.param(
            {"cpuCalculatePolicy": "request"}, CpuMem(3600, int(54.5 * GI)), id="cpu-request-is-usage"
        ),
        pytest.param({"cpuCalculatePolicy": "bogus"}, CpuMem(3600, int(54.5 * GI)), id="unknown-is-usage"),
        pytest.param(
            {"batchCPUThresholdPercent": 20, "batchMemoryThresholdPercent": 50},
            CpuMem(3200, 50 * GI),
            id="thresholds",
        ),
        pytest.param(
            {"cpuReclaimThresholdPercent": 70, "memoryReclaimThresholdPercent": 80},
            # margin 4800m / 20Gi
            CpuMem(16000 - 4800 - 1000 - 5000, int((100 - 20 - 2 - 8.5) * GI)),
            id="reclaim-percents",
        ),
    ],
)
def test_batch_by_policy(fields: dict[str, Any], expected: CpuMem) -> None:
    inputs = node_inputs(node(), _pods(), _metric())
    assert batch_resources(inputs, _strategy(**fields)) == expected


def test_an_hp_pod_without_metrics_adds_its_request_under_max_usage_request() -> None:
    """algorithms.md 10.8: Koordinator's node-level code adds nothing for it; we add the request."""
    strategy = _strategy(cpuCalculatePolicy="maxUsageRequest", memoryCalculatePolicy="maxUsageRequest")
    without_c = [p for p in _pods() if p.metadata.name != "c"]
    with_c = batch_resources(node_inputs(node(), _pods(), _metric()), strategy)
    no_c = batch_resources(node_inputs(node(), without_c, _metric()), strategy)
    assert no_c - with_c == CpuMem(1000, 2 * GI)


def test_dangling_metrics_count_unless_batch_or_free() -> None:
    plain = batch_resources(node_inputs(node(), _pods(), metric(pods={})), _strategy())
    # without any pod metric, a/b/c/g... count with requests where Running: a 4, b 2 (LSE), c 1
    assert plain == CpuMem(16000 - 6400 - 1000 - 7000, (100 - 35 - 2 - 16) * GI)
    only_dangling = metric(pods={"e": ("700m", "1Gi", "koord-prod"), "f": ("2", "2Gi", "koord-free")})
    assert plain - batch_resources(node_inputs(node(), _pods(), only_dangling), _strategy()) == CpuMem(
        700, GI
    )


def test_host_applications_of_prod_or_mid_count_as_system_usage() -> None:
    apps = {
        "nginx": ("1", "1Gi", "koord-prod"),
        "agent": ("1", "1Gi", "koord-mid"),
        "be": ("4", "4Gi", "koord-batch"),
    }
    inputs = node_inputs(node(), _pods(), _metric(host_apps=apps))
    # system 500m/1Gi + 2 cores/2Gi of HP host apps = 2500m / 3Gi, above the kubelet reservation
    assert batch_resources(inputs, _strategy()) == CpuMem(
        16000 - 6400 - 2500 - 5000, int((100 - 35 - 3 - 8.5) * GI)
    )


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        pytest.param(
            '{"resources": {"cpu": "2", "memory": "4Gi"}}', CpuMem(2600, int(52.5 * GI)), id="resources"
        ),
        pytest.param(
            '{"resources": {"cpu": "2"}, "reservedCPUs": "0-2"}', CpuMem(1600, int(54.5 * GI)), id="cpus"
        ),
        pytest.param('{"resources": {"cpu": "500m"}}', CpuMem(3600, int(54.5 * GI)), id="below-kubelet"),
    ],
)
def test_the_reservation_annotation_reserves_beyond_kubelet(annotation: str, expected: CpuMem) -> None:
    annotated = node(annotations={"node.koordinator.sh/reservation": annotation})
    assert batch_resources(node_inputs(annotated, _pods(), _metric()), _strategy()) == expected


def test_a_malformed_reservation_annotation_is_skipped_and_reported() -> None:
    annotated = node(annotations={"node.koordinator.sh/reservation": "{not json"})
    inputs = node_inputs(annotated, _pods(), _metric())
    assert batch_resources(inputs, _strategy()) == CpuMem(3600, int(54.5 * GI))
    assert inputs.problems
    assert "node.koordinator.sh/reservation" in inputs.problems[0]


def test_pods_of_other_nodes_and_finished_pods_do_not_count() -> None:
    pods = [pod("x", "8", "50Gi", node_name="n2"), pod("y", "8", "50Gi", phase="Failed")]
    inputs = node_inputs(node(), pods, metric(pods={}))
    assert batch_resources(inputs, _strategy()) == CpuMem(16000 - 6400 - 1000, (100 - 35 - 2) * GI)


def test_never_negative_on_a_full_node() -> None:
    pods = [pod("big", "30", "300Gi")]
    assert batch_resources(node_inputs(node(), pods, metric(pods={})), _strategy()) == CpuMem(0, 0)
