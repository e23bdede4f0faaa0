"""The Alibaba openb GPU trace (cluster-trace-gpu-v2023): its nodes and tasks, and the submission
order of the FGD paper's method.

The node list (``sn, cpu_milli, memory_mib, gpu, model``) and the pod list (``name, cpu_milli,
memory_mib, num_gpu, gpu_milli, gpu_spec, ...``) are read as they are in the public CSVs; columns
the replay does not use (qos, phase, times) are ignored. A task asks for ``num_gpu`` GPUs of
``gpu_milli`` thousandths each: below 1000 with one GPU it is a share of one card.

The submission order follows the paper artifact (hkust-adsl/kubernetes-scheduler-simulator): the
tasks sorted by name and shuffled with the seed, then, while their total GPU request is under the
target (130% of the cluster's GPUs), tasks drawn with replacement from them are appended, until the
first draw that would go over it. The shuffle and the draws use Python's ``random.Random(seed)``, not
Go's ``math/rand``: the method is the artifact's, the sequence for a given seed is not. A cluster
smaller than the trace (a node subset) gets the shuffled tasks up to the last one that keeps the
request under the target.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FULL_GPU_MILLI",
    "NODE_FILE",
    "POD_FILE",
    "WORKLOADS",
    "Submission",
    "TraceNode",
    "TraceTask",
    "gpu_capacity_milli",
    "load_nodes",
    "load_tasks",
    "pod_file",
    "sample_nodes",
    "submission_order",
]

NODE_FILE = "openb_node_list_gpu_node.csv"
WORKLOADS = (
    "default",
    *(f"cpu{p}" for p in ("0", "037", "050", "072", "100", "200", "235", "250", "300")),
    *(f"gpushare{p}" for p in (20, 40, 60, 80, 100)),
    *(f"gpuspec{p}" for p in ("05", 10, 20, 25, 33)),
    *(f"multigpu{p}" for p in (20, 30, 40, 50)),
)
"""The trace's workloads: ``openb_pod_list_<workload>.csv``. Beside the production tasks
(``default``), the paper's variants: more CPU-only tasks (``cpuNNN``), more GPU-sharing tasks
(``gpushareNN``), more tasks restricted to a GPU model (``gpuspecNN``), more multi-GPU tasks
(``multigpuNN``)."""


def pod_file(workload: str) -> str:
    """The pod list of ``workload`` (one of ``WORKLOADS`` or another of the same form)."""
    return f"openb_pod_list_{workload}.csv"


POD_FILE = pod_file("default")
FULL_GPU_MILLI = 1000
"""One whole GPU in the trace's unit."""

_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
"""Required; ``gpu_spec`` is read where the file has it (the ``multigpu`` workloads do not)."""


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class TraceTask:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    """Thousandths of one GPU, on each of the ``num_gpu`` GPUs."""
    gpu_models: tuple[str, ...] = ()
    """The GPU models the task may run on (``gpu_spec``); empty: any."""

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def shares_a_gpu(self) -> bool:
        """A share of one card (rather than whole cards)."""
        return self.num_gpu == 1 and self.gpu_milli < FULL_GPU_MILLI


@dataclass(frozen=True, slots=True)
class Submission:
    """One pod of the replay: a task of the trace under a name of its own (drawn tasks are copies)."""

    pod_name: str
    task: TraceTask


def _rows(path: Path, columns: Sequence[str]) -> Iterable[tuple[int, dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: no column {', '.join(missing)} (header: {reader.fieldnames})")
        yield from enumerate(reader, start=2)


def _int(path: Path, line: int, row: dict[str, str], column: str) -> int:
    text = (row.get(column) or "").strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{path}:{line}: {column} {text!r} is not a whole number") from None
    if value < 0:
        raise ValueError(f"{path}:{line}: {column} {value} is negative")
    return value


def load_nodes(path: Path) -> list[TraceNode]:
    """The nodes of a node-list CSV, in file order."""
    nodes = []
    for line, row in _rows(path, _NODE_COLUMNS):
        model = row["model"].strip()
        gpus = _int(path, line, row, "gpu")
        if gpus and not model:
            raise ValueError(f"{path}:{line}: {gpus} GPUs of no model")
        nodes.append(
            TraceNode(
                name=row["sn"].strip(),
                cpu_milli=_int(path, line, row, "cpu_milli"),
                memory_mib=_int(path, line, row, "memory_mib"),
                gpus=gpus,
                model=model,
            )
        )
    return nodes


def _task(path: Path, line: int, row: dict[str, str]) -> TraceTask:
    num_gpu = _int(path, line, row, "num_gpu")
    gpu_milli = _int(path, line, row, "gpu_milli")
    if num_gpu == 0 and gpu_milli:
        raise ValueError(f"{path}:{line}: gpu_milli {gpu_milli} without a GPU")
    if num_gpu and not 0 < gpu_milli <= FULL_GPU_MILLI:
        raise ValueError(f"{path}:{line}: gpu_milli {gpu_milli} is not in 1..{FULL_GPU_MILLI}")
    if num_gpu > 1 and gpu_milli != FULL_GPU_MILLI:
        raise ValueError(f"{path}:{line}: {num_gpu} GPUs of {gpu_milli} milli each (only one GPU is shared)")
    spec = row.get("gpu_spec") or ""
    return TraceTask(
        name=row["name"].strip(),
        cpu_milli=_int(path, line, row, "cpu_milli"),
        memory_mib=_int(path, line, row, "memory_mib"),
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        gpu_models=tuple(m.strip() for m in spec.split("|") if m.strip()),
    )


def load_tasks(path: Path) -> list[TraceTask]:
    """The tasks of a pod-list CSV, in file order."""
    return [_task(path, line, row) for line, row in _rows(path, _POD_COLUMNS)]


def gpu_capacity_milli(nodes: Iterable[TraceNode]) -> int:
    return sum(n.gpus for n in nodes) * FULL_GPU_MILLI


def sample_nodes(nodes: Sequence[TraceNode], count: int) -> list[TraceNode]:
    """``count`` nodes spread evenly over the list (every model keeps its share), in list order."""
    if not 0 < count <= len(nodes):
        raise ValueError(f"cannot take {count} of {len(nodes)} nodes")
    return [nodes[i * len(nodes) // count] for i in range(count)]


def submission_order(
    tasks: Sequence[TraceTask], seed: int, capacity_milli: int, ratio: float = 1.3
) -> list[Submission]:
    """The pods of a replay, in submission order: ``tasks`` sorted by name, shuffled, then inflated
    by tasks drawn with replacement (or cut) so that their GPU request stays at most ``ratio`` times
    ``capacity_milli``, as close to it as the draws get."""
    if not tasks:
        raise ValueError("no tasks to replay")
    if ratio <= 0 or capacity_milli <= 0:
        raise ValueError(f"the target ({ratio} x {capacity_milli} GPU milli) must be positive")
    if not any(t.total_gpu_milli for t in tasks):
        raise ValueError("no task asks for a GPU: the GPU request never reaches the target")
    rng = random.Random(seed)
    shuffled = sorted(tasks, key=lambda t: t.name)
    rng.shuffle(shuffled)
    target = ratio * capacity_milli
    order: list[Submission] = []
    requested = 0
    for task in shuffled:
        if requested + task.total_gpu_milli > target:
            return order  # a cluster smaller than the trace: the shuffled tasks, cut
        requested += task.total_gpu_milli
        order.append(Submission(task.name, task))
    copies = 0
    while True:
        task = shuffled[rng.randrange(len(shuffled))]
        if requested + task.total_gpu_milli > target:
            return order
        requested += task.total_gpu_milli
        order.append(Submission(f"{task.name}-copy-{copies}", task))
        copies += 1
