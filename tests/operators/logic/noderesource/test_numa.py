"""NUMA-level batch resources per NodeResourceTopology zone, against figures computed by hand from
algorithms.md 10.2.4 step 4 (Koordinator's ``calculateOnNUMALevel``).

The node: capacity 16 cores / 100Gi, allocatable 15 / 98Gi, so reserved 1000m / 2Gi, split 500m /
1Gi per zone of two; systemUsage 500m / 1Gi, split 250m / 512Mi, so max(system, reserved) per zone
is 500m / 1Gi. Default strategy: margin 40 % of the zone's cpu, 35 % of its memory.

Pods (all Running):
- ``pinned`` prod, bound to NUMA node 0, requests 4 / 10Gi, uses 2 / 6Gi: all of it on node-0;
- ``spread`` prod, no resource-status, requests 2 / 4Gi, uses 1 / 2Gi: 500m / 1Gi used per zone;
- ``fresh`` prod, no metric yet, requests 1 / 2Gi: 500m / 1Gi per zone, as used and as request;
- ``batch`` koord-batch bound to node 1: not HP;
- metric ``gone`` (prod, 600m / 1Gi) without a pod: dangling, 300m / 512Mi per zone.
"""

from __future__ import annotations

import json
from typing import Any

from apis.extension.colocation import BATCH_CPU, BATCH_MEMORY
from apis.quantity import Quantity
from apis.slo.sloconfig.colocation import ColocationStrategy, default_colocation_strategy
from apis.slo.sloconfig.merge import merge_cfg
from operators.logic.noderesource.batch import batch_resources
from operators.logic.noderesource.inputs import CpuMem, node_inputs
from operators.logic.noderesource.node_resources import compute
from operators.logic.noderesource.numa import numa_zones, zone_batch_resources, zone_outcome
from tests.operators.logic.noderesource.builders import NOW, metric, node, numa_pinned, pod, topology

GI = 1024**3
MI = 1024**2
TWO_ZONES = {"node-0": ("8", "50Gi"), "node-1": ("8", "50Gi")}


def _strategy(**fields: Any) -> ColocationStrategy:
    return merge_cfg(default_colocation_strategy(), {"enable": True, **fields})


def _pods(pinned_to: tuple[int, ...] = (0,), pinned_qos: str | None = None) -> list[Any]:
    return [
        pod(
            "pinned",
            "4",
            "10Gi",
            priority_class="koord-prod",
            qos=pinned_qos,
            annotations=numa_pinned(*pinned_to),
        ),
        pod("spread", "2", "4Gi"),
        pod("fresh", "1", "2Gi"),
        pod(
            "batch",
            priority_class="koord-batch",
            qos="BE",
            resources={"kubernetes.io/batch-cpu": "3000"},
            annotations=numa_pinned(1),
        ),
    ]


def _metric(**kw: Any) -> Any:
    return metric(
        pods={
            "pinned": ("2", "6Gi", "koord-prod"),
            "spread": ("1", "2Gi", "koord-prod"),
            "batch": ("3", "5Gi", "koord-batch"),
            "gone": ("600m", "1Gi", "koord-prod"),
        },
        **kw,
    )


def _zones(
    zones: dict[str, tuple[str, str]], pods: list[Any], strategy: ColocationStrategy
) -> dict[str, CpuMem]:
    inputs = node_inputs(node(), pods, _metric())
    return zone_batch_resources(inputs, numa_zones(topology(zones)), strategy)


def test_two_zones_with_a_pinned_pod_and_unpinned_ones() -> None:
    got = _zones(TWO_ZONES, _pods(), _strategy())
    # node-0: 8000 - 3200 - 500 - (2000 + 500 + 500 + 300); 50Gi - 17.5Gi - 1Gi - (6 + 1 + 1 + 0.5)Gi
    # node-1: 8000 - 3200 - 500 - (500 + 500 + 300);        50Gi - 17.5Gi - 1Gi - (1 + 1 + 0.5)Gi
    assert got == {"node-0": CpuMem(1000, 23 * GI), "node-1": CpuMem(3000, 29 * GI)}
    # the zones add up to the node's own result here (no zone floored at 0, no rounding)
    node_level = batch_resources(node_inputs(node(), _pods(), _metric()), _strategy())
    assert node_level == CpuMem(4000, 52 * GI)


def test_a_pod_bound_to_both_numa_nodes_is_split_over_them() -> None:
    got = _zones(TWO_ZONES, _pods(pinned_to=(0, 1)), _strategy())
    # pinned: 1000m / 3Gi used on each zone instead of all on node-0
    assert got == {"node-0": CpuMem(2000, 26 * GI), "node-1": CpuMem(2000, 26 * GI)}


def test_a_numa_node_the_nrt_does_not_have_counts_as_unbound() -> None:
    assert _zones(TWO_ZONES, _pods(pinned_to=(7,)), _strategy()) == _zones(
        TWO_ZONES, _pods(pinned_to=(0, 1)), _strategy()
    )


def test_uneven_zones_each_take_their_own_margin_and_floor_at_zero() -> None:
    zones = {"node-0": ("12", "60Gi"), "node-1": ("4", "40Gi")}
    got = _zones(zones, _pods(pinned_to=(1,)), _strategy())
    # node-0: 12000 - 4800 - 500 - (500 + 500 + 300) = 5400; 60Gi - 21Gi - 1Gi - 2.5Gi = 35.5Gi
    # node-1: 4000 - 1600 - 500 - (2000 + 1300) < 0 -> 0;   40Gi - 14Gi - 1Gi - (6 + 2.5)Gi = 16.5Gi
    assert got == {"node-0": CpuMem(5400, 35 * GI + 512 * MI), "node-1": CpuMem(0, 16 * GI + 512 * MI)}


def test_maximum_of_usage_and_request_and_request_policies_per_zone() -> None:
    strategy = _strategy(cpuCalculatePolicy="maxUsageRequest", memoryCalculatePolicy="request")
    got = _zones(TWO_ZONES, _pods(), strategy)
    # cpu, max(request, usage): node-0 4000 + 1000 + 500 (no metric: request) + 300 = 5800,
    #   8000 - 3200 - 500 - 5800 < 0; node-1 1000 + 500 + 300 = 1800 -> 2500
    # memory, request: node-0 50Gi - 17.5Gi - 1Gi (reserved) - (10 + 2 + 1)Gi = 18.5Gi;
    #   node-1 - (2 + 1)Gi = 28.5Gi
    assert got == {"node-0": CpuMem(0, 18 * GI + 512 * MI), "node-1": CpuMem(2500, 28 * GI + 512 * MI)}
    memory_max = _zones(TWO_ZONES, _pods(), _strategy(memoryCalculatePolicy="maxUsageRequest"))
    # node-0 50Gi - 17.5Gi - 1Gi - (10 + 2 + 1 + 0.5)Gi = 18Gi; node-1 - (2 + 1 + 0.5)Gi = 28Gi
    assert {k: v.memory for k, v in memory_max.items()} == {"node-0": 18 * GI, "node-1": 28 * GI}


def test_an_lse_pod_counts_its_cpu_request_on_its_zone() -> None:
    ls = _zones(TWO_ZONES, _pods(pinned_to=(1,)), _strategy())
    lse = _zones(TWO_ZONES, _pods(pinned_to=(1,), pinned_qos="LSE"), _strategy())
    # on node-1: 8000 - 3200 - 500 - (2000 used + 1300) = 1000 as LS; with its 4000 request as LSE < 0
    # memory as used either way: 50Gi - 17.5Gi - 1Gi - (6 + 2.5)Gi = 23Gi
    assert ls["node-1"] == CpuMem(1000, 23 * GI)
    assert lse["node-1"] == CpuMem(0, 23 * GI)
    assert lse["node-0"] == ls["node-0"] == CpuMem(3000, 29 * GI)


def test_splits_are_rounded_up() -> None:
    zones = {"node-0": ("4", "32Gi"), "node-1": ("4", "32Gi"), "node-2": ("4", "32Gi")}
    n = node(cpu="12", memory="96Gi", alloc_cpu="12", alloc_memory="96Gi")
    inputs = node_inputs(
        n, [pod("p", "1", "1")], metric(pods={"p": ("100m", "1", "koord-prod")}, system=("500m", "0"))
    )
    got = zone_batch_resources(inputs, numa_zones(topology(zones)), _strategy())
    # system 500m / 3 -> 167m; the pod's 100m / 3 -> 34m and 1 byte / 3 -> 1 byte per zone
    assert got["node-0"] == CpuMem(4000 - 1600 - 167 - 34, 32 * GI - 32 * GI * 35 // 100 - 1)
    assert set(got) == {"node-0", "node-1", "node-2"}


def test_thresholds_are_taken_of_the_zone() -> None:
    got = _zones(TWO_ZONES, _pods(), _strategy(batchCPUThresholdPercent=20, batchMemoryThresholdPercent=50))
    # min(3000, 8000 x 20 %) on node-1; min(23Gi, 25Gi) and min(29Gi, 25Gi) for memory
    assert got == {"node-0": CpuMem(1000, 23 * GI), "node-1": CpuMem(1600, 25 * GI)}


def _outcome(nrt: Any, *, annotations: dict[str, str] | None = None, **kw: Any) -> Any:
    n = node(annotations=annotations)
    inputs = node_inputs(n, _pods(), _metric(**kw))
    outcome = compute(inputs, _strategy(), NOW, annotations)
    return zone_outcome(outcome, inputs, nrt, _strategy(), annotations)


def test_zone_quantities_as_written_with_cpu_normalization() -> None:
    got = _outcome(topology(TWO_ZONES), annotations={"node.koordinator.sh/cpu-normalization-ratio": "1.5"})
    assert got == {
        "node-0": {BATCH_CPU: Quantity.parse("1500"), BATCH_MEMORY: Quantity.parse("23Gi")},
        "node-1": {BATCH_CPU: Quantity.parse("4500"), BATCH_MEMORY: Quantity.parse("29Gi")},
    }
    assert str(got["node-1"][BATCH_MEMORY]) == "29Gi"


def test_a_degraded_node_removes_every_zone_resource() -> None:
    assert _outcome(topology(TWO_ZONES), age_minutes=20) == {}


def test_zones_without_cpu_or_memory_are_left_alone() -> None:
    nrt = topology(TWO_ZONES).model_copy(update={"zones": []})
    assert _outcome(nrt) is None
    bare = json.loads(topology(TWO_ZONES).model_dump_json(by_alias=True))
    for zone in bare["zones"]:
        zone["resources"] = [r for r in zone["resources"] if r["name"] not in ("cpu", "memory")]
    assert _outcome(topology(TWO_ZONES).model_validate(bare)) is None


def test_a_malformed_resource_status_counts_on_every_zone_and_says_why() -> None:
    bad = pod("pinned", "4", "10Gi", annotations={"scheduling.koordinator.sh/resource-status": "{not json"})
    inputs = node_inputs(node(), [bad, *_pods()[1:]], _metric())
    entry = inputs.pods[0]
    assert entry.numa_nodes == ()
    assert entry.numa_problem is not None
    assert "scheduling.koordinator.sh/resource-status" in entry.numa_problem
    got = zone_batch_resources(inputs, numa_zones(topology(TWO_ZONES)), _strategy())
    assert got == _zones(TWO_ZONES, _pods(pinned_to=(0, 1)), _strategy())
