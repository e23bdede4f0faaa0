"""The benchmark suite's options and results: every figure with its baseline from the same run."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = [
    "BENCHES",
    "FULL_ONLY",
    "Better",
    "Figure",
    "Machine",
    "SuiteOptions",
    "SuiteResults",
    "default_options",
]

Better = Literal["higher", "lower"]

BENCHES = (
    "throughput",
    "identical",
    "perf-harness",
    "rss",
    "latency",
    "startup",
    "gang",
    "victims",
    "preemption",
    "openb",
)
"""In the order they run: the cluster benches first, then the in-process solver benches, then the
in-process trace replay."""
FULL_ONLY = ("openb",)
"""Benches only ``--full`` (or ``--only``) runs: the OpenB replay takes about ten minutes a strategy."""


class SuiteOptions(BaseModel, frozen=True):
    only: tuple[str, ...] = tuple(b for b in BENCHES if b not in FULL_ONLY)
    full: bool = False
    out: Path = Path("bench-results")
    cluster_prefix: str = "bench-suite"
    """Clusters are ``<prefix>-<bench>``: two suites on one machine need different prefixes."""
    throughput_nodes: tuple[int, ...] = (200,)
    throughput_pods: int = 2000
    """Pods per scheduler in each throughput run."""
    identical_nodes: int = 200
    identical_pods: int = 2000
    """The identical-pods workload (every pod a replica of one Deployment): pods per scheduler."""
    rss_nodes: int = 200
    rss_pods: int = 2000
    """RSS comes from a throughput run at this size (the throughput bench's own when it ran it)."""
    perf_nodes: int = 100
    perf_pods: int = 1000
    perf_qps: float = 100.0
    latency_nodes: int = 100
    latency_pods: int = 300
    latency_rate: float = 20.0
    startup_nodes: int = 200
    startup_pending: int = 2000
    startup_bound: int = 2000
    """Start-up with this backlog: pending pods of the scheduler, and pods already on the nodes."""
    gang_nodes: tuple[int, ...] = (1000, 5000)
    gang_sizes: tuple[int, ...] = (8, 64, 256)
    gang_trials: int = 3
    solver_seconds: float = 1.0
    """Time limit of each CP-SAT solve (gang placement and victim selection)."""
    victim_sizes: tuple[str, ...] = ("100x16", "1000x64", "5000x256")
    victim_trials: int = 3
    preemption_nodes: int = 8
    preemption_timeout: float = 30.0
    preemption_repeat: int = 3
    """Runs of each preemption scenario per scheduler: one job's time to run moves with the
    machine's load (the median run is reported)."""
    openb_strategies: tuple[str, ...] = ("Fragmentation", "MostAllocated", "LeastAllocated")
    openb_seed: int = 42
    openb_limit: int | None = None
    """Replay only the first N pods of the OpenB trace (None: all of them, to 130% of the GPUs)."""
    openb_nodes: int | None = None
    """Replay on N of the trace's nodes (None: all 1,213)."""


def default_options(full: bool) -> dict[str, Any]:
    """The sizes of a run: small enough for a 2-core machine in a few minutes, or issue 20's."""
    if not full:
        return {}
    return {
        "full": True,
        "only": BENCHES,
        "throughput_nodes": (1000, 5000),
        "throughput_pods": 10000,
        "identical_nodes": 1000,
        "identical_pods": 20000,
        "rss_nodes": 5000,
        "rss_pods": 50000,
        "latency_nodes": 1000,
        "latency_pods": 6000,
        "latency_rate": 100.0,
        "startup_nodes": 5000,
        "startup_pending": 25000,
        "startup_bound": 25000,
        "gang_nodes": (1000, 5000),
        "gang_sizes": (8, 64, 256, 1024),
        "gang_trials": 5,
        "victim_sizes": ("100x16", "1000x64", "5000x256"),
        "victim_trials": 10,
        "preemption_timeout": 60.0,
    }


class Figure(BaseModel):
    """One measured figure beside its baseline, both from the same run."""

    bench: str
    metric: str
    size: str
    unit: str
    better: Better
    ours: float | None
    baseline: float | None
    ours_label: str = "koord-scheduler"
    baseline_label: str = "kube-scheduler"

    @property
    def ratio(self) -> float | None:
        """Ours over the baseline, when both are finite and the baseline is not zero."""
        if self.ours is None or self.baseline is None or not self.baseline:
            return None
        value = self.ours / self.baseline
        return value if math.isfinite(value) else None


class Machine(BaseModel):
    cpus: int
    load_average: tuple[float, float, float]
    """At the start of the run: other work on the machine moves every figure."""
    platform: str


class SuiteResults(BaseModel):
    command: str
    started_at: str
    seconds: float = 0.0
    machine: Machine
    options: SuiteOptions
    figures: list[Figure] = Field(default_factory=list)
    latency_ms: dict[str, list[float]] = Field(default_factory=dict)
    """Every pod's create -> bound latency per scheduler, sorted (the CDF plot)."""
    bench_seconds: dict[str, float] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)
    """Each bench's own report as its ``-o json`` gives it."""
    plots: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
