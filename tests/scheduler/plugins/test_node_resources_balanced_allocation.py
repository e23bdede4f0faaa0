"""NodeResourcesBalancedAllocation: the cases of kube-scheduler v1.35's balanced_allocation_test.go
(expected scores copied from there), its args validation, and agreement with a per-node float
reference written the way the Go scorer is."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.plugins import node_resources_balanced_allocation as ba
from tests.examples import examples
from tests.scheduler.builders import NodeBuilder, PodBuilder, make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import scores

GPU = "nvidia.com/gpu"
DEFAULT = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
WITH_GPU = [*DEFAULT, {"name": GPU, "weight": 1}]


def plugin(resources: list[dict[str, Any]] | None = None) -> ba.NodeResourcesBalancedAllocation:
    args = ba.NodeResourcesBalancedAllocationArgs.model_validate({"resources": resources or []})
    return ba.new(args, handle=None)  # type: ignore[arg-type]


def node(name: str, milli_cpu: int, memory: int, gpus: int = 0) -> NodeBuilder:
    """upstream's ``makeNode``: cpu in millicores, memory in bytes, optional nvidia.com/gpu."""
    return make_node(name).alloc({GPU: str(gpus)} if gpus else None, cpu=f"{milli_cpu}m", memory=str(memory))


# upstream's pod specs: two containers each
def cpu_only(name: str) -> PodBuilder:
    return make_pod(name).req(cpu="1000m", memory="0").req(cpu="2000m", memory="0")


def cpu_and_memory(name: str) -> PodBuilder:
    return make_pod(name).req(cpu="1000m", memory="2000").req(cpu="2000m", memory="3000")


def memory_only(name: str) -> PodBuilder:
    return make_pod(name).req(cpu="0", memory="2000").req(cpu="0", memory="3000")


def cpu_memory_gpu(name: str) -> PodBuilder:
    return make_pod(name).req(cpu="1000m", memory="2000").req({GPU: "3"}, cpu="2000m", memory="3000")


CASES = [
    # cpu 3000/4000, memory 5000/10000: std 0.125 -> 87; node2 0.5/0.5 -> 100
    pytest.param(
        cpu_and_memory("p"),
        [node("node1", 4000, 10000), node("node2", 6000, 10000)],
        [],
        DEFAULT,
        {"node1": 87, "node2": 100},
        id="nothing scheduled, resources requested, differently sized nodes",
    ),
    # node1 cpu 0.6 memory 0.25 -> 82; node2 0.6 / 0.5 -> 95
    pytest.param(
        cpu_and_memory("p"),
        [node("node1", 10000, 20000), node("node2", 10000, 20000)],
        [cpu_only("a").on("node1"), cpu_and_memory("b").on("node2")],
        DEFAULT,
        {"node1": 82, "node2": 95},
        id="resources requested, pods scheduled with resources",
    ),
    pytest.param(
        cpu_and_memory("p"),
        [node("node1", 10000, 20000), node("node2", 10000, 50000)],
        [cpu_only("a").on("node1"), cpu_and_memory("b").on("node2")],
        DEFAULT,
        {"node1": 82, "node2": 80},
        id="resources requested, pods scheduled with resources, differently sized nodes",
    ),
    # cpu fractions are capped at 1: node1 (1, 0) -> 50; node2 (1, 0.5) -> 75
    pytest.param(
        cpu_only("p"),
        [node("node1", 6000, 10000), node("node2", 6000, 10000)],
        [cpu_only("a").on("node1"), cpu_and_memory("b").on("node2")],
        DEFAULT,
        {"node1": 50, "node2": 75},
        id="requested resources at node capacity",
    ),
    # three resources: the standard deviation
    pytest.param(
        make_pod("p").req({GPU: "1"}, memory="0"),
        [node("node1", 3500, 40000, gpus=8), node("node2", 3500, 40000, gpus=8)],
        [cpu_and_memory("a").on("node2"), cpu_memory_gpu("b").on("node1")],
        WITH_GPU,
        {"node1": 70, "node2": 65},
        id="include scalar resource on a node for balanced resource allocation",
    ),
    pytest.param(
        cpu_and_memory("p"),
        [node("node1", 3500, 40000, gpus=8), node("node2", 3500, 40000)],
        [],
        WITH_GPU,
        {"node1": 63, "node2": 63},
        id="node without the scalar resource should skip the scalar resource",
    ),
    # memory-only pod: node1 holds cpu 3000/3000 already, memory 5000/5000 -> both 1 -> 100;
    # node2 cpu 0, memory 1 -> 50
    pytest.param(
        memory_only("p"),
        [node("node1", 3000, 5000), node("node2", 3000, 5000)],
        [cpu_only("a").on("node1")],
        DEFAULT,
        {"node1": 100, "node2": 50},
        id="real requests on both sides (no non-zero defaults)",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "assigned", "resources", "expected"), CASES)
@pytest.mark.parametrize("pre_score", [True, False], ids=["with-prescore", "score-only"])
def test_upstream_cases(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    assigned: list[PodBuilder],
    resources: list[dict[str, Any]],
    expected: dict[str, int],
    pre_score: bool,
) -> None:
    snapshot = make_snapshot([n.obj() for n in nodes], [p.obj() for p in assigned])
    assert scores(plugin(resources), pod.info(), snapshot, pre_score=pre_score) == expected


def test_a_best_effort_pod_is_skipped_at_pre_score() -> None:
    snapshot = make_snapshot([node("node1", 4000, 10000).obj(), node("node2", 4000, 10000).obj()])
    pod = make_pod("p").req().info()
    status = plugin().pre_score(CycleState(), pod, snapshot, snapshot.candidate_rows())
    assert status.code == Code.SKIP
    assert scores(plugin(), pod, snapshot, pre_score=False) == {"node1": 0, "node2": 0}


def test_args() -> None:
    assert [(r.name, r.weight) for r in ba.NodeResourcesBalancedAllocationArgs().resources] == [
        ("cpu", 1),
        ("memory", 1),
    ]
    unset = ba.NodeResourcesBalancedAllocationArgs.model_validate({"resources": [{"name": GPU}]})
    assert [(r.name, r.weight) for r in unset.resources] == [(GPU, 1)]
    with pytest.raises(ValidationError, match="must be 1"):
        ba.NodeResourcesBalancedAllocationArgs.model_validate({"resources": [{"name": "cpu", "weight": 2}]})
    with pytest.raises(ValidationError, match="Duplicate"):
        ba.NodeResourcesBalancedAllocationArgs.model_validate(
            {"resources": [{"name": "cpu"}, {"name": "cpu"}]}
        )
    with pytest.raises(ValidationError):
        ba.NodeResourcesBalancedAllocationArgs.model_validate({"resourcez": []})


# ---- the property: vectorized == balancedResourceScorer per node ----------------------------------


def reference(requested: list[int], allocatable: list[int]) -> int:
    """kube-scheduler's ``balancedResourceScorer``, line by line."""
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        fraction = min(float(req) / float(alloc), 1.0)
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        squares = 0.0
        for fraction in fractions:
            squares = squares + (fraction - mean) * (fraction - mean)
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * 100)


amounts = st.integers(0, 40)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(st.tuples(amounts, amounts, amounts, amounts, amounts, amounts), min_size=1, max_size=6),
    request=st.tuples(amounts, amounts, st.integers(1, 4)),
)
def test_vectorized_matches_the_go_scorer(
    nodes: list[tuple[int, int, int, int, int, int]], request: tuple[int, int, int]
) -> None:
    built, assigned, expected = [], [], {}
    for i, (cpu, mem, gpu, used_cpu, used_mem, used_gpu) in enumerate(nodes):
        name = f"n{i}"
        built.append(node(name, cpu, mem, gpus=gpu).obj())
        assigned.append(
            make_pod(f"u{i}")
            .req({GPU: str(used_gpu)}, cpu=f"{used_cpu}m", memory=str(used_mem))
            .on(name)
            .obj()
        )
        expected[name] = reference(
            [used_cpu + request[0], used_mem + request[1], used_gpu + request[2]], [cpu, mem, gpu]
        )
    snapshot = make_snapshot(built, assigned)
    pod = make_pod("p").req({GPU: str(request[2])}, cpu=f"{request[0]}m", memory=str(request[1])).info()
    assert scores(plugin(WITH_GPU), pod, snapshot) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=4, max_size=4), min_size=1, max_size=30
    ),
    st.sampled_from([(0, 1), (0, 3), (1, 2), (2, 3)]),
    st.booleans(),
)
def test_the_two_resource_shortcut_gives_the_per_row_deviation_bit_for_bit(
    table: list[list[float]], pair: tuple[int, int], one_row_short: bool
) -> None:
    """Every row balancing the same two resources takes the shortcut; a row lacking one of them
    (allocatable 0) sends the whole batch the per-row way. Both give exactly the per-row figures."""
    fractions = np.array(table, dtype=np.float64)
    used = np.zeros(fractions.shape, dtype=np.bool_)
    used[:, list(pair)] = True
    if one_row_short:
        used[0, pair[1]] = False
    got = ba._deviation(fractions, used)
    want = ba._deviation_per_row(fractions, used)
    assert got.tobytes() == want.tobytes()
