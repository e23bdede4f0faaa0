"""The FGD paper's published allocation curves for an openb workload.

``fgd_paper_allocation_default.csv`` (the artifact's ``analysis_allo_discrete.csv``, default-workload
rows) holds, per policy and seed, the GPU allocation ratio in % at each arrived-workload percentage
0..130 of the cluster's GPU capacity. The replay sets its own curve beside the mean over the seeds.
For another workload the data directory may hold ``fgd_paper_allocation_<workload>.csv``, or the
artifact's whole ``analysis_allo_discrete.csv``, of which the workload's rows are read.
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

from pydantic import BaseModel

from e2e.bench.openb_trace import pod_file

__all__ = ["ARTIFACT_FILE", "PAPER_FILE", "PaperPolicy", "closest_policy", "load_paper", "paper_file"]

PAPER_FILE = "fgd_paper_allocation_default.csv"
ARTIFACT_FILE = "analysis_allo_discrete.csv"
"""The artifact's results for every workload (a ``workload`` column names each row's)."""

_CLOSEST = {"Fragmentation": "FGD", "MostAllocated": "GpuPacking", "LeastAllocated": "Random"}
"""The paper's policy nearest to each DeviceShare strategy: Fragmentation is ours in the spirit of
FGD; MostAllocated packs onto the most used cards, as GpuPacking does; LeastAllocated spreads, and
the paper has no spreading policy, so its weakest baseline (Random) stands beside it."""


class PaperPolicy(BaseModel, frozen=True):
    name: str
    """As the paper names it (``FGD``, ``BestFit``, ...), without the artifact's ``06-`` prefix."""
    seeds: int
    allocation: tuple[float, ...]
    """Mean over the seeds of the allocation % at arrived 0, 1, ... percent of GPU capacity."""

    def at(self, arrived_percent: int) -> float | None:
        if 0 <= arrived_percent < len(self.allocation):
            return self.allocation[arrived_percent]
        return None


def paper_file(data: Path, workload: str) -> Path | None:
    """The file of ``data`` with the paper's figures for ``workload``; None when it has none."""
    for name in (f"fgd_paper_allocation_{workload}.csv", ARTIFACT_FILE):
        if (data / name).is_file():
            return data / name
    return None


def load_paper(path: Path, workload: str = "default") -> list[PaperPolicy]:
    """Every policy of the CSV, in the artifact's order (weakest first, FGD last), for the rows of
    ``workload`` when the CSV has a ``workload`` column."""
    curves: dict[str, list[list[float]]] = {}
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or "sc_policy" not in header:
            raise ValueError(f"{path}: no sc_policy column")
        policy_at = header.index("sc_policy")
        workload_at = header.index("workload") if "workload" in header else None
        percents = [i for i, h in enumerate(header) if h.isdigit()]
        if [int(header[i]) for i in percents] != list(range(len(percents))):
            raise ValueError(f"{path}: the percentage columns are not 0, 1, 2, ...")
        for line, row in enumerate(reader, start=2):
            if workload_at is not None and row[workload_at] != Path(pod_file(workload)).stem:
                continue
            policy = row[policy_at].split("-", 1)[-1]
            try:
                values = [float(row[i]) for i in percents]
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{line}: a percentage column is missing or not a number") from None
            curves.setdefault(policy, []).append(values)
    return [
        PaperPolicy(
            name=name,
            seeds=len(rows),
            allocation=tuple(round(statistics.fmean(column), 3) for column in zip(*rows, strict=True)),
        )
        for name, rows in curves.items()
    ]


def closest_policy(strategy: str) -> str | None:
    """The paper policy a DeviceShare strategy is set beside in the suite (None: none fits)."""
    return _CLOSEST.get(strategy)
