"""NodeResourcesFit's Filter and Score and NodeResourcesBalancedAllocation's Score on a few rows (an
equivalence class's changed ones) are computed in Python numbers instead of arrays: the answers
equal the arrays' on the same rows, to the last bit, whatever the nodes, the pods they hold and the
pod's requests (resources the node lacks, request-less containers, over-full nodes, weights)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.plugins import node_resources_balanced_allocation as balanced
from scheduler.plugins import node_resources_fit as fit
from scheduler.plugins.helper.resources import FEW_ROWS
from tests.scheduler.builders import make_node, make_pod, make_snapshot

GPU = "nvidia.com/gpu"
MOST_FEW_ROWS = max(FEW_ROWS, fit.FEW_SCORE_ROWS)
STORAGE = "ephemeral-storage"

amounts = st.one_of(st.just(0), st.integers(1, 64), st.integers(10**9, 10**13))
node_resources = st.fixed_dictionaries(
    {},
    optional={
        "cpu": amounts,
        "memory": amounts,
        "pods": st.integers(0, 8),
        GPU: st.integers(0, 8),
        STORAGE: amounts,
    },
)
pod_resources = st.fixed_dictionaries(
    {}, optional={"cpu": amounts, "memory": amounts, GPU: st.integers(0, 3), STORAGE: amounts}
)
scored = st.lists(
    st.tuples(st.sampled_from(["cpu", "memory", GPU, STORAGE]), st.integers(1, 100)),
    min_size=1,
    max_size=4,
    unique_by=lambda spec: spec[0],
)


def _snapshot(nodes: list[dict[str, int]], held: list[tuple[int, dict[str, int]]]) -> Any:
    built = [make_node(f"n{i}").alloc({k: str(v) for k, v in r.items()}).obj() for i, r in enumerate(nodes)]
    pods = [
        make_pod(f"q{j}").req({k: str(v) for k, v in r.items()}).on(f"n{i % len(nodes)}").obj()
        for j, (i, r) in enumerate(held)
    ]
    return make_snapshot(built, pods)


def _same_answers(plugin: Any, snapshot: Any, pod: Any, rows: np.ndarray[Any, Any]) -> None:
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        plugin.pre_filter(state, pod, snapshot)
    plugin.pre_score(state, pod, snapshot, rows)
    many = np.tile(rows, MOST_FEW_ROWS + 1)  # past every few-row path: the arrays' answer on the same rows
    assert (
        plugin.score(state, pod, snapshot, rows).tolist()
        == plugin.score(state, pod, snapshot, many)[: rows.size].tolist()
    )
    if isinstance(plugin, balanced.NodeResourcesBalancedAllocation):
        # The two-resource shortcut of the arrays answers as their general rows x resources path.
        requests = plugin._pod_requests(pod)
        fractions, used = plugin._fractions(snapshot.table, many, requests)
        general = ((1.0 - balanced._deviation(fractions, used)) * 100.0).astype(np.int64)
        answered = plugin.score(state, pod, snapshot, many) if requests.any() else general
        assert answered.tolist() == general.tolist()
    if hasattr(plugin, "filter"):
        few, all_ = plugin.filter(state, pod, snapshot, rows), plugin.filter(state, pod, snapshot, many)
        assert few.feasible.tolist() == all_.feasible[: rows.size].tolist()
        assert [(r, m.tolist()) for r, m in few.rejections] == [
            (r, m[: rows.size].tolist()) for r, m in all_.rejections if m[: rows.size].any()
        ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(node_resources, min_size=1, max_size=5),
    held=st.lists(st.tuples(st.integers(0, 4), pod_resources), max_size=8),
    request=pod_resources,
    resources=scored,
    strategy=st.sampled_from(["LeastAllocated", "MostAllocated"]),
    data=st.data(),
)
def test_few_rows_answer_as_the_arrays_do(
    nodes: list[dict[str, int]],
    held: list[tuple[int, dict[str, int]]],
    request: dict[str, int],
    resources: list[tuple[str, int]],
    strategy: str,
    data: st.DataObject,
) -> None:
    snapshot = _snapshot(nodes, held)
    pod = make_pod("p").req({k: str(v) for k, v in request.items()}).info()
    rows = np.asarray(
        data.draw(
            st.lists(st.sampled_from(sorted(snapshot.table.row.values())), min_size=1, max_size=MOST_FEW_ROWS)
        ),
        dtype=np.int64,
    )
    specs = [{"name": name, "weight": weight} for name, weight in resources]
    fit_args = fit.NodeResourcesFitArgs.model_validate(
        {"scoringStrategy": {"type": strategy, "resources": specs}}
    )
    _same_answers(fit.new(fit_args, handle=None), snapshot, pod, rows)  # type: ignore[arg-type]
    balanced_args = balanced.NodeResourcesBalancedAllocationArgs.model_validate(
        {"resources": [{"name": name} for name, _ in resources]}
    )
    _same_answers(balanced.new(balanced_args, handle=None), snapshot, pod, rows)  # type: ignore[arg-type]
