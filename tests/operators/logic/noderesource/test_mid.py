"""mid-cpu / mid-memory (v1.6 formula with NodeAllocatable, algorithms.md 10.3), by hand.

The node of ``builders.node``: capacity 16 / 100Gi, allocatable 15 / 98Gi. nodeUsage 8 / 30Gi, so
NodeUnused = 8000m / 70Gi. Prod pods request 7 cores / 16Gi; a mid pod requests 1 / 1Gi.
ProdUnallocated = capacity - max(kubelet 1000m/2Gi, system 500m/1Gi) - 7000m/16Gi = 8000m / 82Gi.
"""

from __future__ import annotations

from typing import Any

import pytest

from apis.slo.sloconfig.colocation import default_colocation_strategy
from apis.slo.sloconfig.merge import merge_cfg
from operators.logic.noderesource.inputs import CpuMem, node_inputs
from operators.logic.noderesource.mid import mid_resources, prod_unallocated
from tests.operators.logic.noderesource.builders import metric, node, pod

GI = 1024**3


def _pods() -> list[Any]:
    return [
        pod("a", "4", "10Gi"),
        pod("b", "2", "4Gi", priority_class="koord-prod", qos="LSE"),
        pod("c", "1", "2Gi"),
        pod("m", "1", "1Gi", priority_class="koord-mid"),
        pod("d", priority_class="koord-batch", qos="BE"),
    ]


def _mid(fields: dict[str, Any], **metric_kw: Any) -> CpuMem:
    strategy = merge_cfg(default_colocation_strategy(), {"enable": True, **fields})
    return mid_resources(node_inputs(node(), _pods(), metric(**metric_kw)), strategy)


def test_unallocated_excludes_mid_batch_and_free_pods() -> None:
    assert prod_unallocated(node_inputs(node(), _pods(), metric())) == CpuMem(8000, 82 * GI)


@pytest.mark.parametrize(
    ("fields", "metric_kw", "expected"),
    [
        pytest.param({}, {"reclaimable": ("3", "10Gi")}, CpuMem(3000, 10 * GI), id="reclaimable"),
        pytest.param(
            {"midUnallocatedPercent": 50},
            {"reclaimable": ("3", "10Gi")},
            CpuMem(7000, 51 * GI),
            id="unallocated",
        ),
        pytest.param(
            # cap 10 % of allocatable (1500m, 9.8Gi) on the reclaimed part only
            {"midUnallocatedPercent": 50, "midCPUThresholdPercent": 10, "midMemoryThresholdPercent": 10},
            {"reclaimable": ("3", "10Gi")},
            CpuMem(1500 + 4000, int(98 * GI * 10 // 100) + 41 * GI),
            id="threshold-of-allocatable",
        ),
        pytest.param(
            {},
            {"reclaimable": ("3", "10Gi"), "node_usage": ("15", "95Gi")},
            CpuMem(1000, 5 * GI),
            id="node-unused",
        ),
        pytest.param(
            {}, {"reclaimable": ("3", "10Gi"), "node_usage": None}, CpuMem(0, 0), id="no-node-usage"
        ),
        pytest.param(
            {"midUnallocatedPercent": 10}, {}, CpuMem(800, int(82 * GI * 10 // 100)), id="no-reclaimable"
        ),
        pytest.param(
            {
                "midReclaimMode": "static",
                "midStaticCPUReservedPercent": 10,
                "midStaticMemoryReservedPercent": 20,
            },
            {"reclaimable": ("3", "10Gi")},
            CpuMem(1600, 20 * GI),
            id="static",
        ),
        pytest.param(
            {
                "midReclaimMode": "static",
                "midStaticCPUReservedPercent": 50,
                "midStaticMemoryReservedPercent": 50,
                "midCPUThresholdPercent": 20,
            },
            {},
            CpuMem(3000, 50 * GI),  # cpu capped at 20 % of 15 cores
            id="static-capped",
        ),
    ],
)
def test_mid(fields: dict[str, Any], metric_kw: dict[str, Any], expected: CpuMem) -> None:
    assert _mid(fields, **metric_kw) == expected


def test_prod_host_applications_reserve_from_unallocated() -> None:
    apps = {"db": ("3", "10Gi", "koord-prod"), "mid-app": ("4", "4Gi", "koord-mid")}
    # systemUsed = 500m/1Gi + 3/10Gi (prod only) = 3500m / 11Gi, above kubelet's reservation
    assert _mid({"midUnallocatedPercent": 100}, host_apps=apps) == CpuMem(
        16000 - 3500 - 7000, (100 - 11 - 16) * GI
    )
