"""Properties of the batch and mid results over random nodes, pods and metrics."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.core import Node, Pod
from apis.quantity import Quantity
from apis.slo.nodemetric import NodeMetric
from apis.slo.sloconfig.colocation import ColocationStrategy, default_colocation_strategy
from apis.slo.sloconfig.merge import merge_cfg
from operators.logic.noderesource.batch import batch_resources, percent_of
from operators.logic.noderesource.damping import need_sync
from operators.logic.noderesource.inputs import node_inputs
from operators.logic.noderesource.mid import mid_resources
from tests.examples import examples

GI = 1024**3
milli = st.integers(min_value=0, max_value=64_000)
mem = st.integers(min_value=0, max_value=256 * GI)
percent = st.integers(min_value=0, max_value=100)


def _cpu(m: int) -> str:
    return f"{m}m"


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Node, list[Pod], NodeMetric, ColocationStrategy]:
    cap_cpu, cap_mem = draw(milli), draw(mem)
    node = Node.model_validate(
        {
            "metadata": {"name": "n1"},
            "status": {
                "capacity": {"cpu": _cpu(cap_cpu), "memory": str(cap_mem)},
                "allocatable": {"cpu": _cpu(draw(milli)), "memory": str(draw(mem))},
            },
        }
    )
    classes = st.sampled_from(["koord-prod", "koord-mid", "koord-batch", "koord-free", None])
    pods, pod_metrics = [], []
    for i in range(draw(st.integers(0, 6))):
        klass = draw(classes)
        pods.append(
            Pod.model_validate(
                {
                    "metadata": {
                        "name": f"p{i}",
                        "namespace": "default",
                        "labels": {"koordinator.sh/priority-class": klass} if klass else {},
                    },
                    "spec": {
                        "nodeName": "n1",
                        "containers": [
                            {
                                "name": "c",
                                "resources": {
                                    "requests": {"cpu": _cpu(draw(milli)), "memory": str(draw(mem))}
                                },
                            }
                        ],
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
                "podUsage": {"resources": {"cpu": _cpu(draw(milli)), "memory": str(draw(mem))}},
                "priority": draw(classes) or "",
            }
        )
    metric = NodeMetric.model_validate(
        {
            "metadata": {"name": "n1"},
            "status": {
                "updateTime": "2026-11-25T12:00:00Z",
                "nodeMetric": {
                    "nodeUsage": {"resources": {"cpu": _cpu(draw(milli)), "memory": str(draw(mem))}},
                    "systemUsage": {"resources": {"cpu": _cpu(draw(milli)), "memory": str(draw(mem))}},
                },
                "podsMetric": pod_metrics,
                "prodReclaimableMetric": {
                    "resource": {"resources": {"cpu": _cpu(draw(milli)), "memory": str(draw(mem))}}
                },
            },
        }
    )
    fields = {
        "enable": True,
        "cpuReclaimThresholdPercent": draw(percent),
        "memoryReclaimThresholdPercent": draw(percent),
        "cpuCalculatePolicy": draw(st.sampled_from(["usage", "maxUsageRequest"])),
        "memoryCalculatePolicy": draw(st.sampled_from(["usage", "request", "maxUsageRequest"])),
        "midCPUThresholdPercent": draw(percent),
        "midMemoryThresholdPercent": draw(percent),
        "midUnallocatedPercent": draw(percent),
    }
    if draw(st.booleans()):
        fields["batchCPUThresholdPercent"] = draw(percent)
        fields["batchMemoryThresholdPercent"] = draw(percent)
    return node, pods, metric, merge_cfg(default_colocation_strategy(), fields)


@settings(max_examples=examples(200), deadline=None)
@given(scenarios())
def test_batch_is_never_negative_nor_above_what_the_formula_allows(
    scenario: tuple[Node, list[Pod], NodeMetric, ColocationStrategy],
) -> None:
    node, pods, metric, strategy = scenario
    inputs = node_inputs(node, pods, metric)
    batch = batch_resources(inputs, strategy)
    cap = inputs.capacity
    assert batch.cpu >= 0
    assert batch.memory >= 0
    # Never above capacity minus the safety margin minus the kubelet/annotation reservation.
    margin_cpu = percent_of(cap.cpu, 100 - (strategy.cpu_reclaim_threshold_percent or 0))
    margin_memory = percent_of(cap.memory, 100 - (strategy.memory_reclaim_threshold_percent or 0))
    assert batch.cpu <= max(cap.cpu - margin_cpu - inputs.reserved.cpu, 0)
    assert batch.memory <= max(cap.memory - margin_memory - inputs.reserved.memory, 0)
    if strategy.batch_cpu_threshold_percent is not None:
        assert batch.cpu <= percent_of(cap.cpu, strategy.batch_cpu_threshold_percent)
    if strategy.batch_memory_threshold_percent is not None:
        assert batch.memory <= percent_of(cap.memory, strategy.batch_memory_threshold_percent)


@settings(max_examples=examples(200), deadline=None)
@given(scenarios())
def test_mid_is_never_negative_nor_above_what_the_formula_allows(
    scenario: tuple[Node, list[Pod], NodeMetric, ColocationStrategy],
) -> None:
    node, pods, metric, strategy = scenario
    inputs = node_inputs(node, pods, metric)
    mid = mid_resources(inputs, strategy)
    assert mid.cpu >= 0
    assert mid.memory >= 0
    unallocated_cpu = percent_of(
        max(inputs.capacity.cpu - inputs.reserved.cpu, 0), strategy.mid_unallocated_percent or 0
    )
    unallocated_mem = percent_of(
        max(inputs.capacity.memory - inputs.reserved.memory, 0), strategy.mid_unallocated_percent or 0
    )
    assert (
        mid.cpu
        <= percent_of(inputs.allocatable.cpu, strategy.mid_cpu_threshold_percent or 0) + unallocated_cpu
    )
    assert mid.memory <= (
        percent_of(inputs.allocatable.memory, strategy.mid_memory_threshold_percent or 0) + unallocated_mem
    )
    assert inputs.node_usage is not None
    unused = inputs.capacity - inputs.node_usage
    assert mid.cpu <= max(unused.cpu, 0) + unallocated_cpu
    assert mid.memory <= max(unused.memory, 0) + unallocated_mem


NAMES = ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory")


@settings(max_examples=examples(300), deadline=None)
@given(
    old=st.integers(0, 10**12),
    change=st.floats(-0.1, 0.1),
    threshold=st.floats(0.01, 1.0),
    elapsed=st.floats(0, 300),
)
def test_damping_writes_no_change_under_the_threshold_before_the_interval(
    old: int, change: float, threshold: float, elapsed: float
) -> None:
    new = int(old * (1 + change * threshold * 10))  # within +-threshold, and beyond by truncation only
    small = abs(new - old) * 1000 <= old * 1000 * threshold
    current = {name: Quantity.from_int(old) for name in NAMES}
    desired: dict[str, Quantity | None] = {name: Quantity.from_int(new) for name in NAMES}
    synced = need_sync(
        NAMES,
        current,
        desired,
        last_write=1000.0,
        now=1000.0 + elapsed,
        update_time_threshold_seconds=300,
        resource_diff_threshold=threshold,
    )
    assert synced == (not small)


def test_damping_writes_after_the_interval_and_on_appearance() -> None:
    current = {NAMES[0]: Quantity.from_int(1000)}
    same: dict[str, Quantity | None] = {NAMES[0]: Quantity.from_int(1001), NAMES[1]: None}
    kw = {"update_time_threshold_seconds": 300.0, "resource_diff_threshold": 0.1}
    assert not need_sync(NAMES, current, same, last_write=0.0, now=300.0, **kw)
    assert need_sync(NAMES, current, same, last_write=0.0, now=300.5, **kw)
    assert need_sync(NAMES, current, same, last_write=None, now=1.0, **kw)
    appeared: dict[str, Quantity | None] = {NAMES[0]: Quantity.from_int(1000), NAMES[1]: Quantity.from_int(5)}
    assert need_sync(NAMES, current, appeared, last_write=0.0, now=1.0, **kw)
    removed: dict[str, Quantity | None] = {NAMES[0]: None, NAMES[1]: None}
    assert need_sync(NAMES, current, removed, last_write=0.0, now=1.0, **kw)
