"""Properties of the NUMA-level batch resources against the node-level ones.

The zones never promise more than the node, up to rounding (each zone truncates its own margin, so
at most 1 milli-core or byte per zone), and never a negative amount. A zone is floored at 0 on its
own (as Koordinator floors it), so where one zone is overcommitted by pods bound to it and another
is not, the zones may together exceed the node-level figure, which nets the two; the bound is
therefore checked where no zone was floored: always when every pod is split evenly over equal
zones, and for pinned pods and uneven zones whenever every zone came out above 0.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.core import Node, Pod
from apis.slo.nodemetric import NodeMetric
from apis.slo.sloconfig.colocation import ColocationStrategy, default_colocation_strategy
from apis.slo.sloconfig.merge import merge_cfg
from apis.topology import NodeResourceTopology
from operators.logic.noderesource.batch import batch_resources
from operators.logic.noderesource.inputs import CpuMem, node_inputs
from operators.logic.noderesource.numa import numa_zones, zone_batch_resources
from tests.examples import examples

GI = 1024**3
milli = st.integers(min_value=0, max_value=32_000)
mem = st.integers(min_value=0, max_value=128 * GI)
percent = st.integers(min_value=0, max_value=100)

Scenario = tuple[Node, list[Pod], NodeMetric, NodeResourceTopology, ColocationStrategy]


def _usage(draw: st.DrawFn) -> dict[str, str]:
    return {"cpu": f"{draw(milli)}m", "memory": str(draw(mem))}


@st.composite
def scenarios(draw: st.DrawFn, *, even: bool) -> Scenario:
    count = draw(st.integers(1, 4))
    zones = [(draw(milli), draw(mem)) for _ in range(1 if even else count)]
    zones = zones * count if even else zones
    cap = CpuMem.total(CpuMem(c, m) for c, m in zones)
    node = Node.model_validate(
        {
            "metadata": {"name": "n1"},
            "status": {
                "capacity": {"cpu": f"{cap.cpu}m", "memory": str(cap.memory)},
                "allocatable": {
                    "cpu": f"{draw(st.integers(0, cap.cpu))}m",
                    "memory": str(draw(st.integers(0, cap.memory))),
                },
            },
        }
    )

    def info(name: str, value: str) -> dict[str, str]:
        return {"name": name, "capacity": value, "allocatable": value, "available": value}

    nrt = NodeResourceTopology.model_validate(
        {
            "metadata": {"name": "n1"},
            "zones": [
                {
                    "name": f"node-{i}",
                    "type": "Node",
                    "resources": [info("cpu", f"{c}m"), info("memory", str(m))],
                }
                for i, (c, m) in enumerate(zones)
            ],
        }
    )
    classes = st.sampled_from(["koord-prod", "koord-mid", "koord-batch", "koord-free", None])
    pods, pod_metrics = [], []
    for i in range(draw(st.integers(0, 6))):
        klass = draw(classes)
        labels = {"koordinator.sh/priority-class": klass} if klass else {}
        if draw(st.booleans()):
            labels["koordinator.sh/qosClass"] = "LSE"
        annotations = {}
        if not even and draw(st.booleans()):
            numa = draw(st.sets(st.integers(0, count), min_size=1))  # count itself is no zone
            status = {"numaNodeResources": [{"node": n} for n in sorted(numa)]}
            annotations["scheduling.koordinator.sh/resource-status"] = json.dumps(status)
        pods.append(
            Pod.model_validate(
                {
                    "metadata": {
                        "name": f"p{i}",
                        "namespace": "default",
                        "labels": labels,
                        "annotations": annotations,
                    },
                    "spec": {
                        "nodeName": "n1",
                        "containers": [{"name": "c", "resources": {"requests": _usage(draw)}}],
                    },
                    "status": {"phase": draw(st.sampled_from(["Running", "Pending", "Succeeded"]))},
                }
            )
        )
    for i in range(draw(st.integers(0, 8))):
        pod_metrics.append(
            {
                "name": f"p{i}",
                "namespace": "default",
                "podUsage": {"resources": _usage(draw)},
                "priority": draw(classes) or "",
            }
        )
    metric = NodeMetric.model_validate(
        {
            "metadata": {"name": "n1"},
            "status": {
                "updateTime": "2026-11-25T12:00:00Z",
                "nodeMetric": {"systemUsage": {"resources": _usage(draw)}},
                "podsMetric": pod_metrics,
            },
        }
    )
    fields = {
        "enable": True,
        "cpuReclaimThresholdPercent": draw(percent),
        "memoryReclaimThresholdPercent": draw(percent),
        "cpuCalculatePolicy": draw(st.sampled_from(["usage", "maxUsageRequest"])),
        "memoryCalculatePolicy": draw(st.sampled_from(["usage", "request", "maxUsageRequest"])),
    }
    if draw(st.booleans()):
        fields["batchCPUThresholdPercent"] = draw(percent)
        fields["batchMemoryThresholdPercent"] = draw(percent)
    return node, pods, metric, nrt, merge_cfg(default_colocation_strategy(), fields)


def _both(scenario: Scenario) -> tuple[CpuMem, list[CpuMem]]:
    node, pods, metric, nrt, strategy = scenario
    inputs = node_inputs(node, pods, metric)
    zones = zone_batch_resources(inputs, numa_zones(nrt), strategy)
    assert len(zones) == len(nrt.zones)
    return batch_resources(inputs, strategy), list(zones.values())


@settings(max_examples=examples(300), deadline=None)
@given(scenarios(even=True))
def test_evenly_split_zones_never_exceed_the_node_by_more_than_rounding(scenario: Scenario) -> None:
    node_level, zones = _both(scenario)
    rounding = len(zones)
    assert all(z.cpu >= 0 and z.memory >= 0 for z in zones)
    assert sum(z.cpu for z in zones) <= node_level.cpu + rounding
    assert sum(z.memory for z in zones) <= node_level.memory + rounding


@settings(max_examples=examples(300), deadline=None)
@given(scenarios(even=False))
def test_pinned_pods_and_uneven_zones_never_exceed_the_node_unless_a_zone_is_floored(
    scenario: Scenario,
) -> None:
    node_level, zones = _both(scenario)
    rounding = len(zones)
    assert all(z.cpu >= 0 and z.memory >= 0 for z in zones)
    if all(z.cpu > 0 for z in zones):
        assert sum(z.cpu for z in zones) <= node_level.cpu + rounding
    if all(z.memory > 0 for z in zones):
        assert sum(z.memory for z in zones) <= node_level.memory + rounding
