"""The openb trace's parsing and the paper's submission order (``e2e.bench.openb_trace``): rows as
the public CSVs have them, errors that name the line, and a seeded, deterministic shuffle and
inflation to the target GPU request."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from e2e.bench.openb_trace import (
    TraceNode,
    TraceTask,
    gpu_capacity_milli,
    load_nodes,
    load_tasks,
    sample_nodes,
    submission_order,
)

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time"
)
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"


def _csv(tmp_path: Path, name: str, header: str, *rows: str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join((header, *rows)) + "\n", encoding="utf-8")
    return path


def _task(name: str, num_gpu: int = 1, gpu_milli: int = 1000) -> TraceTask:
    return TraceTask(name, cpu_milli=4000, memory_mib=8192, num_gpu=num_gpu, gpu_milli=gpu_milli)


def test_nodes_are_read_in_file_order_with_their_gpus_and_model(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "nodes.csv",
        NODE_HEADER,
        "openb-node-0000,64000,262144,2,P100",
        "openb-node-0001,96000,786432,8,V100M32",
    )

    assert load_nodes(path) == [
        TraceNode("openb-node-0000", 64000, 262144, 2, "P100"),
        TraceNode("openb-node-0001", 96000, 786432, 8, "V100M32"),
    ]


def test_tasks_are_read_with_shares_whole_gpus_cpu_only_and_gpu_spec(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "pods.csv",
        POD_HEADER,
        "openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061",
        "openb-pod-0002,88000,327680,8,1000,,LS,Running,0,1,0",
        "openb-pod-0005,20000,65536,0,0,,LS,Running,2759674,12902960,2759676",
        "openb-pod-0009,8000,30517,1,1000,V100M16|V100M32,BE,Failed,1,2,1",
    )

    share, eight, cpu_only, pinned = load_tasks(path)

    assert share == TraceTask("openb-pod-0001", 6000, 12288, 1, 460)
    assert share.shares_a_gpu
    assert share.total_gpu_milli == 460
    assert (eight.total_gpu_milli, eight.shares_a_gpu) == (8000, False)
    assert (cpu_only.total_gpu_milli, cpu_only.shares_a_gpu, cpu_only.gpu_models) == (0, False, ())
    assert pinned.gpu_models == ("V100M16", "V100M32")
    assert not pinned.shares_a_gpu


def test_a_pod_list_without_gpu_spec_has_no_model_bound_tasks(tmp_path: Path) -> None:
    """The paper's ``multigpu`` workloads have only the first five columns."""
    path = _csv(tmp_path, "pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", "p,12000,16384,2,1000")

    assert load_tasks(path) == [TraceTask("p", 12000, 16384, 2, 1000)]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        pytest.param("p,1000,1024,1,-5,,LS,Running,0,0,0", "gpu_milli -5 is negative", id="negative"),
        pytest.param("p,lots,1024,1,500,,LS,Running,0,0,0", "cpu_milli 'lots'", id="not-a-number"),
        pytest.param("p,1000,1024,0,500,,LS,Running,0,0,0", "gpu_milli 500 without a GPU", id="milli-no-gpu"),
        pytest.param("p,1000,1024,2,500,,LS,Running,0,0,0", "2 GPUs of 500 milli", id="shared-multi"),
        pytest.param("p,1000,1024,1,1500,,LS,Running,0,0,0", "gpu_milli 1500 is not in", id="over-one"),
    ],
)
def test_a_bad_task_row_is_refused_naming_its_line(tmp_path: Path, row: str, message: str) -> None:
    path = _csv(tmp_path, "pods.csv", POD_HEADER, "ok,1000,1024,1,1000,,LS,Running,0,0,0", row)

    with pytest.raises(ValueError, match=message) as error:
        load_tasks(path)

    assert f"{path}:3" in str(error.value)


def test_a_missing_column_is_named(tmp_path: Path) -> None:
    path = _csv(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,model", "n,1000,1024,T4")

    with pytest.raises(ValueError, match="no column gpu"):
        load_nodes(path)


def test_nodes_are_sampled_evenly_over_the_list() -> None:
    nodes = [TraceNode(f"n{i}", 1000, 1024, 1, "T4") for i in range(10)]

    assert [n.name for n in sample_nodes(nodes, 5)] == ["n0", "n2", "n4", "n6", "n8"]
    assert sample_nodes(nodes, 10) == nodes
    assert gpu_capacity_milli(nodes) == 10_000
    with pytest.raises(ValueError, match="cannot take 11 of 10"):
        sample_nodes(nodes, 11)


TASKS = [
    *(_task(f"whole-{i:02d}") for i in range(20)),
    *(_task(f"share-{i:02d}", gpu_milli=250 + 10 * i) for i in range(20)),
    *(_task(f"eight-{i}", num_gpu=8) for i in range(3)),
    *(_task(f"cpu-{i}", num_gpu=0, gpu_milli=0) for i in range(5)),
]
TASK_MILLI = sum(t.total_gpu_milli for t in TASKS)


def test_the_order_is_every_task_shuffled_then_draws_up_to_the_target() -> None:
    capacity = TASK_MILLI  # the trace asks for 100% of the cluster: inflated to 130%

    order = submission_order(TASKS, seed=42, capacity_milli=capacity)

    originals, copies = order[: len(TASKS)], order[len(TASKS) :]
    assert sorted(s.pod_name for s in originals) == sorted(t.name for t in TASKS)
    assert [s.pod_name for s in originals] != sorted(t.name for t in TASKS)  # shuffled
    assert copies
    assert [s.pod_name for s in copies] == [f"{s.task.name}-copy-{i}" for i, s in enumerate(copies)]
    assert all(s.task in TASKS for s in copies)
    requested = sum(s.task.total_gpu_milli for s in order)
    assert capacity < requested <= 1.3 * capacity
    assert len({s.pod_name for s in order}) == len(order)


def test_the_same_seed_gives_the_same_order_whatever_order_the_tasks_come_in() -> None:
    shuffled = list(TASKS)
    random.Random(7).shuffle(shuffled)

    first = submission_order(TASKS, seed=43, capacity_milli=TASK_MILLI)
    again = submission_order(shuffled, seed=43, capacity_milli=TASK_MILLI)
    other = submission_order(TASKS, seed=44, capacity_milli=TASK_MILLI)

    assert first == again
    assert [s.pod_name for s in first] != [s.pod_name for s in other]


def test_a_cluster_smaller_than_the_trace_gets_the_shuffled_tasks_cut_under_the_target() -> None:
    capacity = TASK_MILLI // 10

    order = submission_order(TASKS, seed=42, capacity_milli=capacity)
    full = submission_order(TASKS, seed=42, capacity_milli=TASK_MILLI)

    assert order == full[: len(order)]
    assert all("-copy-" not in s.pod_name for s in order)
    assert sum(s.task.total_gpu_milli for s in order) <= 1.3 * capacity
    assert sum(s.task.total_gpu_milli for s in full[: len(order) + 1]) > 1.3 * capacity


def test_the_ratio_sets_the_target() -> None:
    order = submission_order(TASKS, seed=1, capacity_milli=TASK_MILLI, ratio=2.0)

    assert 1.3 * TASK_MILLI < sum(s.task.total_gpu_milli for s in order) <= 2.0 * TASK_MILLI


@pytest.mark.parametrize(
    ("tasks", "capacity", "message"),
    [
        pytest.param([], 1000, "no tasks", id="empty"),
        pytest.param([_task("cpu", num_gpu=0, gpu_milli=0)], 1000, "no task asks for a GPU", id="cpu-only"),
        pytest.param([_task("t")], 0, "must be positive", id="no-capacity"),
    ],
)
def test_an_order_that_cannot_reach_its_target_is_refused(
    tasks: list[TraceTask], capacity: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        submission_order(tasks, seed=0, capacity_milli=capacity)
