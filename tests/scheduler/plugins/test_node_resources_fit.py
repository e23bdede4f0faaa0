"""NodeResourcesFit: the vectorized Filter agrees with kube-scheduler's per-node check, and the three
scoring strategies give kube-scheduler's integers (values computed by hand below)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scheduler.cache.node_table import NodeTable
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent
from scheduler.plugins import node_resources_fit as fit
from scheduler.plugins.node_resources_fit import NodeResourcesFitArgs, non_zero_requests
from tests.examples import examples
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import filter_reasons, scores

GPU = "nvidia.com/gpu"


def plugin(**args: Any) -> fit.NodeResourcesFit:
    return fit.new(NodeResourcesFitArgs.model_validate(args), handle=None)  # type: ignore[arg-type]


# ---- Filter -------------------------------------------------------------------------------------

FILTER_CASES = [
    pytest.param(
        make_pod("p").req(cpu="2", memory="4Gi"),
        {
            "n1": [],
            "n2": ["Insufficient cpu"],
            "n3": ["Too many pods", "Insufficient cpu", "Insufficient memory"],
        },
        {},
        id="cpu-and-memory",
    ),
    pytest.param(
        make_pod("p").req({GPU: "1"}, cpu="1"),
        {"n1": [f"Insufficient {GPU}"], "n2": [], "n3": ["Too many pods", f"Insufficient {GPU}"]},
        {},
        id="resource-the-node-lacks-is-insufficient",
    ),
    pytest.param(
        make_pod("p").req({GPU: "1"}, cpu="1"),
        {"n1": [], "n2": [], "n3": ["Too many pods"]},
        {"ignoredResources": [GPU]},
        id="ignored-resource",
    ),
    pytest.param(
        make_pod("p").req({GPU: "1"}, cpu="1"),
        {"n1": [], "n2": [], "n3": ["Too many pods"]},
        {"ignoredResourceGroups": ["nvidia.com"]},
        id="ignored-resource-group",
    ),
    pytest.param(
        make_pod("p").req(),
        {"n1": [], "n2": [], "n3": ["Too many pods"]},
        {},
        id="no-requests-still-needs-a-pod-slot",
    ),
    pytest.param(
        make_pod("p").req(cpu="1").init_req(cpu="3"),
        {"n1": [], "n2": ["Insufficient cpu"], "n3": ["Too many pods", "Insufficient cpu"]},
        {},
        id="init-container-peak",
    ),
    pytest.param(
        make_pod("p").req({"example.com/unknown": "1"}, ephemeral_storage="1Gi"),
        {
            "n1": ["Insufficient ephemeral-storage", "Insufficient example.com/unknown"],
            "n2": ["Insufficient ephemeral-storage"],
            "n3": ["Too many pods"],
        },
        {"ignoredResourceGroups": ["example.org"]},
        id="ephemeral-storage-and-unknown-extended",
    ),
]


def filter_snapshot() -> Any:
    return make_snapshot(
        [
            make_node("n1").alloc(cpu="8", memory="16Gi").obj(),
            make_node("n2").alloc({GPU: "4", "example.com/unknown": "2"}, cpu="4", memory="16Gi").obj(),
            make_node("n3")
            .alloc({"example.com/unknown": "1"}, cpu="1", memory="2Gi", pods="1", ephemeral_storage="10Gi")
            .obj(),
        ],
        assigned=[
            make_pod("used2").req(cpu="3", memory="1Gi").on("n2").obj(),
            make_pod("used3").req(memory="1Gi").on("n3").obj(),
        ],
    )


@pytest.mark.parametrize(("pod", "expected", "args"), FILTER_CASES)
def test_filter_reasons(pod: Any, expected: dict[str, list[str]], args: dict[str, Any]) -> None:
    assert filter_reasons(plugin(**args), pod.info(), filter_snapshot()) == expected


def test_filter_only_sees_the_rows_it_is_given() -> None:
    snapshot = filter_snapshot()
    p = plugin()
    pod = make_pod("p").req(cpu="2").info()
    state = CycleState()
    p.pre_filter(state, pod, snapshot)
    rows = snapshot.candidate_rows()[:2][::-1]  # n2, then n1
    result = p.filter(state, pod, snapshot, rows)
    assert result.feasible.tolist() == [False, True]
    assert [(reason, mask.tolist()) for reason, mask in result.rejections] == [
        ("Insufficient cpu", [True, False])
    ]


def test_events() -> None:
    assert (
        plugin().events_to_register()
        == ClusterEvent.NODE_ADD | ClusterEvent.NODE_UPDATE | ClusterEvent.POD_DELETE
    )


# ---- the property: vectorized Filter == a straightforward per-node check ---------------------------

RESOURCES = ("cpu", "memory", GPU, "example.com/fpga")


def reference_reasons(
    request: dict[str, int], allocatable: dict[str, int], used: dict[str, int], ignored: set[str]
) -> list[str]:
    reasons = []
    if used.get("pods", 0) + 1 > allocatable.get("pods", 0):
        reasons.append("Too many pods")
    for name in RESOURCES:
        amount = request.get(name, 0)
        if amount <= 0 or name in ignored:
            continue
        if amount > allocatable.get(name, 0) - used.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def _quantity(name: str, amount: int) -> str:
    return f"{amount}m" if name == "cpu" else str(amount)


requests_st = st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 12), max_size=4)
node_st = st.tuples(
    st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 16), max_size=4),
    st.integers(0, 4),
    st.lists(requests_st, max_size=4),
)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(node_st, min_size=1, max_size=8),
    request=requests_st,
    ignore_fpga=st.booleans(),
)
def test_vectorized_filter_matches_per_node_reference(
    nodes: list[tuple[dict[str, int], int, list[dict[str, int]]]], request: dict[str, int], ignore_fpga: bool
) -> None:
    built_nodes, assigned, expected = [], [], {}
    ignored = {"example.com/fpga"} if ignore_fpga else set()
    for i, (allocatable, pod_slots, pods) in enumerate(nodes):
        name = f"n{i}"
        alloc = {r: _quantity(r, a) for r, a in allocatable.items()}
        alloc["pods"] = str(pod_slots)
        built_nodes.append(make_node(name).alloc(alloc).obj())
        used: dict[str, int] = {"pods": len(pods)}
        for j, pod_request in enumerate(pods):
            assigned.append(
                make_pod(f"{name}-p{j}")
                .req({r: _quantity(r, a) for r, a in pod_request.items()})
                .on(name)
                .obj()
            )
            for r, a in pod_request.items():
                used[r] = used.get(r, 0) + a
        expected[name] = reference_reasons(request, {**allocatable, "pods": pod_slots}, used, ignored)
    snapshot = make_snapshot(built_nodes, assigned)
    pod = make_pod("incoming").req({r: _quantity(r, a) for r, a in request.items()}).info()
    got = filter_reasons(plugin(ignoredResources=sorted(ignored)), pod, snapshot)
    assert {n: sorted(r) for n, r in got.items()} == {n: sorted(r) for n, r in expected.items()}


# ---- Score ----------------------------------------------------------------------------------------


def score_snapshot() -> Any:
    return make_snapshot(
        [
            make_node("n1").alloc(cpu="4", memory="10Gi").obj(),
            make_node("n2").alloc({GPU: "8"}, cpu="8", memory="20Gi").obj(),
        ],
        assigned=[make_pod("used").req(cpu="1", memory="3Gi").on("n1").obj()],
    )


SHAPE_UP = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
SHAPE_DOWN = {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}

SCORE_CASES = [
    # n1: cpu (4000-2000)*100/4000 = 50, memory (10-5)*100/10 = 50 -> 50
    # n2: cpu (8000-1000)*100/8000 = 87, memory (20-2)*100/20 = 90 -> 177/2 = 88
    pytest.param(
        {"type": "LeastAllocated"}, make_pod("p").req(cpu="1", memory="2Gi"), {"n1": 50, "n2": 88}, id="least"
    ),
    # n2 with cpu:1, memory:2: (87 + 2*90) / 3 = 89
    pytest.param(
        {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 2}],
        },
        make_pod("p").req(cpu="1", memory="2Gi"),
        {"n1": 50, "n2": 89},
        id="least-weighted",
    ),
    # n1: 2000*100/4000 = 50, 5*100/10 = 50 -> 50; n2: 1000*100/8000 = 12, 2*100/20 = 10 -> 11
    pytest.param(
        {"type": "MostAllocated"}, make_pod("p").req(cpu="1", memory="2Gi"), {"n1": 50, "n2": 11}, id="most"
    ),
    # over capacity: n1 cpu min(6000, 4000) -> 100, memory 5Gi -> 50 -> 75;
    # n2 cpu 5000*100/8000 = 62, memory 10 -> 36
    pytest.param(
        {"type": "MostAllocated"},
        make_pod("p").req(cpu="5", memory="2Gi"),
        {"n1": 75, "n2": 36},
        id="most-over",
    ),
    # utilizations n1 (50, 50), n2 (12, 10): shape up -> round((12+10)/2) = 11
    pytest.param(
        {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": SHAPE_UP},
        make_pod("p").req(cpu="1", memory="2Gi"),
        {"n1": 50, "n2": 11},
        id="ratio-binpack",
    ),
    # shape down: n2 cpu 100-12 = 88, memory 90 -> round(178/2) = 89; n1 50
    pytest.param(
        {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": SHAPE_DOWN},
        make_pod("p").req(cpu="1", memory="2Gi"),
        {"n1": 50, "n2": 89},
        id="ratio-spread",
    ),
    # rounding half up: n2 cpu 12 (w1) + memory 10 (w3) = 42/4 = 10.5 -> 11
    pytest.param(
        {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 3}],
            "requestedToCapacityRatio": SHAPE_UP,
        },
        make_pod("p").req(cpu="1", memory="2Gi"),
        {"n1": 50, "n2": 11},
        id="ratio-rounds-half-up",
    ),
    # Go truncates toward zero on a falling segment: n2 cpu util 1300*100/8000 = 16,
    # shape (0,10)->(30,0): 100 + (-100*16)/30 = 100 - 53 = 47 (floor division would give 46);
    # n1 util (1000+1300)*100/4000 = 57 > 30 -> 0, which does not count -> 0
    pytest.param(
        {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 1}],
            "requestedToCapacityRatio": {
                "shape": [{"utilization": 0, "score": 10}, {"utilization": 30, "score": 0}]
            },
        },
        make_pod("p").req(cpu="1300m", memory="2Gi"),
        {"n1": 0, "n2": 47},
        id="ratio-truncates-toward-zero",
    ),
    # a request-less pod scores as 100m / 200Mi: n2 cpu (8000-100)*100/8000 = 98,
    # memory (20Gi-200Mi)*100/20Gi = 99 -> 98; n1 cpu (4000-1100)*100/4000 = 72, memory
    # (10Gi-3Gi-200Mi)*100/10Gi = 68 -> 70
    pytest.param(
        {"type": "LeastAllocated"}, make_pod("p").req(), {"n1": 70, "n2": 98}, id="non-zero-defaults"
    ),
    # gpu is scored only when requested: n2 gpu (8-2)*100/8 = 75, cpu 87 -> 81; n1 has no gpu: cpu 50 only
    pytest.param(
        {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 1}]},
        make_pod("p").req({GPU: "2"}, cpu="1"),
        {"n1": 50, "n2": 81},
        id="extended-requested",
    ),
    pytest.param(
        {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 1}]},
        make_pod("p").req(cpu="1"),
        {"n1": 50, "n2": 87},
        id="extended-not-requested-is-skipped",
    ),
]


@pytest.mark.parametrize(("strategy", "pod", "expected"), SCORE_CASES)
@pytest.mark.parametrize("pre_score", [True, False], ids=["with-prescore", "score-only"])
def test_scores(strategy: dict[str, Any], pod: Any, expected: dict[str, int], pre_score: bool) -> None:
    p = plugin(scoringStrategy=strategy)
    assert scores(p, pod.info(), score_snapshot(), pre_score=pre_score) == expected


# ---- the pod's scored request and args ------------------------------------------------------------

MI = 1024 * 1024


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod("p").req(), {"cpu": 100, "memory": 200 * MI}, id="no-requests"),
        pytest.param(make_pod("p").req(cpu="0"), {"cpu": 0, "memory": 200 * MI}, id="explicit-zero-is-kept"),
        pytest.param(make_pod("p").req(cpu="1").req(), {"cpu": 1100, "memory": 400 * MI}, id="per-container"),
        pytest.param(
            make_pod("p").req(cpu="1", memory="1Gi").init_req(cpu="2", memory="1Mi"),
            {"cpu": 2000, "memory": 1024 * MI},
            id="init-peak",
        ),
        pytest.param(
            make_pod("p").req(cpu="1", memory="1Gi").init_req(cpu="500m", memory="1Mi", sidecar=True),
            {"cpu": 1500, "memory": 1025 * MI},
            id="sidecar-adds",
        ),
        pytest.param(
            make_pod("p").req(cpu="1", memory="1Gi").overhead(cpu="250m"),
            {"cpu": 1250, "memory": 1024 * MI},
            id="overhead",
        ),
    ],
)
def test_non_zero_requests(pod: Any, expected: dict[str, int]) -> None:
    assert non_zero_requests(pod.obj()) == expected


def test_args_defaults_follow_kube_scheduler() -> None:
    args = NodeResourcesFitArgs()
    assert args.scoring_strategy.type == "LeastAllocated"
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [("cpu", 1), ("memory", 1)]
    assert args.ignored_resources == []
    assert args.ignored_resource_groups == []
    wire = NodeResourcesFitArgs.model_validate(
        {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": GPU, "weight": 0}]}}
    )
    assert [(r.name, r.weight) for r in wire.scoring_strategy.resources] == [(GPU, 1)]
    empty = NodeResourcesFitArgs.model_validate(
        {"scoringStrategy": {"type": "MostAllocated", "resources": []}}
    )
    assert [r.name for r in empty.scoring_strategy.resources] == ["cpu", "memory"]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({"scoringStrategy": {"type": "Balanced"}}, id="unknown-type"),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}}, id="weight-too-big"
        ),
        pytest.param({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, id="ratio-without-shape"),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 50, "score": 1}, {"utilization": 10}]
                    },
                }
            },
            id="ratio-bad-shape",
        ),
        pytest.param({"ignoredResourceGroups": ["example.com/x"]}, id="group-with-slash"),
    ],
)
def test_args_rejected(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        NodeResourcesFitArgs.model_validate(raw)


def test_prescore_skips_a_best_effort_pod_over_extended_resources_only() -> None:
    p = plugin(scoringStrategy={"resources": [{"name": GPU, "weight": 1}]})
    snapshot = score_snapshot()
    status = p.pre_score(
        CycleState(), PodInfo.of(make_pod("p").req(cpu="1").obj()), snapshot, snapshot.candidate_rows()
    )
    assert status.code.name == "SKIP"


# ---- the node side counts its pods with the non-zero defaults too (NodeInfo.NonZeroRequested) -----


def test_pods_without_requests_on_a_node_count_as_100m_and_200mi_when_scoring() -> None:
    snapshot = make_snapshot(
        [
            make_node("busy").alloc(cpu="4", memory="10Gi").obj(),
            make_node("idle").alloc(cpu="4", memory="10Gi").obj(),
        ],
        assigned=[make_pod(f"be{i}").req().on("busy").obj() for i in range(10)],
    )
    pod = make_pod("p").req(cpu="1", memory="2Gi").info()
    # busy: cpu (4000 - 10*100 - 1000)*100/4000 = 50, memory (10240 - 10*200 - 2048)*100/10240 = 60 -> 55
    # idle: cpu 75, memory 80 -> 77. Counting only real requests, both nodes would score 77.
    assert scores(plugin(), pod, snapshot) == {"busy": 55, "idle": 77}
    # MostAllocated: busy cpu 50, memory 4048*100/10240 = 39 -> 44; idle cpu 25, memory 20 -> 22
    assert scores(plugin(scoringStrategy={"type": "MostAllocated"}), pod, snapshot) == {
        "busy": 44,
        "idle": 22,
    }
    # Filter still sees the real requests: the best-effort pods take no cpu.
    assert filter_reasons(plugin(), make_pod("big").req(cpu="4").info(), snapshot) == {"busy": [], "idle": []}


def test_fit_state_is_kept_per_requests_and_per_table() -> None:
    """Pods of equal requests share one FitState; another node table (its columns in another
    order) gets its own."""
    p = plugin()
    gpu_first, cpu_first = NodeTable(), NodeTable()
    for table, names in ((gpu_first, (GPU, "pods", "cpu")), (cpu_first, ("pods", "cpu", GPU))):
        for name in names:
            table.column_of(name)
    pods = [make_pod(name).req({GPU: "1"}, cpu="1").info() for name in ("p", "q")]
    first = p.fit_state(pods[0], gpu_first)
    assert p.fit_state(pods[1], gpu_first) is first
    assert first.cols.tolist() == [1, 2, 0]
    assert p.fit_state(pods[1], cpu_first).cols.tolist() == [0, 1, 2]
    assert p.fit_state(pods[0], gpu_first).cols.tolist() == [1, 2, 0]
    assert not first.amounts.flags.writeable
