"""What the throughput benchmark measures: its options, one row per scheduler, and the report with
its ratio and targets (rendered by ``throughput_table``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from e2e.bench.processes import KOORD, KUBE

__all__ = [
    "KOORD_NAMESPACE",
    "KUBE_NAMESPACE",
    "SIMULATE",
    "SIMULATE_ALONE",
    "TARGET_NODES",
    "TARGET_RATIO",
    "TARGET_SUSTAINED",
    "WORKLOADS",
    "Options",
    "PlacementResult",
    "Report",
    "RunResult",
    "WorkloadKind",
]

SIMULATE = "koordctl simulate"
SIMULATE_ALONE = "koordctl simulate, pod by pod"
"""The same in-process run with the equivalence classes off: every pod filtered and scored alone."""
KOORD_NAMESPACE = "bench-koord"
KUBE_NAMESPACE = "bench-kube"
TARGET_RATIO = 1.0
TARGET_SUSTAINED = 300.0
TARGET_NODES = 5000

WorkloadKind = Literal["mixed", "identical"]
WORKLOADS: tuple[WorkloadKind, ...] = ("mixed", "identical")


@dataclass(frozen=True)
class Options:
    nodes: int = 1000
    pods: int = 10000
    qps: float = 1000.0
    burst: int = 2000
    parallelism: int | None = None
    """KubeSchedulerConfiguration.parallelism of both schedulers; None: their default (16)."""
    skip_upstream: bool = False
    skip_simulate: bool = False
    cluster_name: str = "bench"
    concurrency: int = 32
    """Create requests in flight while creating nodes and pods."""
    node_cpu: str = "32"
    node_memory: str = "128Gi"
    node_pods: int = 110
    ready_timeout: float = 600.0
    """Seconds a scheduler may take from process start to ready."""
    stall_timeout: float = 120.0
    """Seconds without a new binding after which a run is given up (its pods left unbound)."""
    keep: bool = False
    """Leave the cluster running at the end (for looking around)."""
    load_aware: bool = False
    """Give every node a fresh NodeMetric before koord-scheduler runs, so that LoadAwareScheduling
    (in its default profile) filters and scores on reported usage rather than passing every node."""
    reservations: int = 0
    """Reservations placed by koord-scheduler before the pods are created (``throughput_reservations``)."""
    owner_share: float = 0.0
    """Share of the measured pods that are owners of one of the reservations."""
    workload: WorkloadKind = "mixed"
    """``mixed`` requests, or ``identical``: the replicas of one Deployment (``throughput_workload``)."""


@dataclass
class PlacementResult:
    """koord-scheduler placing the reservations, before the measured pods exist."""

    reservations: int
    placed: int = 0
    seconds: float = 0.0
    per_second: float = 0.0
    startup_seconds: float | None = None
    error: str = ""


@dataclass
class RunResult:
    scheduler: str
    nodes: int
    pods: int
    bound: int = 0
    seconds: float = 0.0
    pods_per_second: float = 0.0
    sustained_pods_per_second: float | None = None
    startup_seconds: float | None = None
    clock_started_at: str = ""
    """What started the clock: ``readyz``, ``first binding`` or ``pods submitted`` (simulate)."""
    cpu_percent: dict[str, float] = field(default_factory=dict)
    peak_rss_mib: float | None = None
    """The scheduler process's peak resident memory (``VmHWM``) when its run ended."""
    first_binding_seconds: float | None = None
    """Start of the clock to the first binding (koord-scheduler cycles its whole backlog first)."""
    profile: list[int] = field(default_factory=list)
    """Bindings per 0.5 s from the start of the clock to the last binding (``bindings.binding_profile``)."""
    log: str = ""
    error: str = ""

    @property
    def complete(self) -> bool:
        return not self.error and self.bound >= self.pods


@dataclass
class Report:
    nodes: int
    pods: int
    qps: float
    burst: int
    parallelism: int | None = None
    workload: WorkloadKind = "mixed"
    load_aware: bool = False
    """Every node had a fresh NodeMetric during koord-scheduler's run (``--load-aware``)."""
    reservations: int = 0
    owner_share: float = 0.0
    placement: PlacementResult | None = None
    owners_allocated: int | None = None
    """koord-scheduler's pods that allocated from a reservation (``reservation-allocated``)."""
    results: list[RunResult] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def result(self, scheduler: str) -> RunResult | None:
        return next((r for r in self.results if r.scheduler == scheduler), None)

    def _ratio(self, attr: str) -> float | None:
        koord, kube = self.result(KOORD), self.result(KUBE)
        if koord is None or kube is None or not koord.complete or not kube.complete:
            return None
        a, b = getattr(koord, attr), getattr(kube, attr)
        return a / b if a and b else None

    @property
    def ratio(self) -> float | None:
        """koord-scheduler's pods/s over kube-scheduler's."""
        return self._ratio("pods_per_second")

    @property
    def sustained_ratio(self) -> float | None:
        return self._ratio("sustained_pods_per_second")

    def targets(self) -> dict[str, bool | None]:
        koord = self.result(KOORD)
        sustained = koord.sustained_pods_per_second if koord is not None and koord.complete else None
        at_least = None if sustained is None else sustained >= TARGET_SUSTAINED
        return {
            "ratioAtLeast1": None if self.ratio is None else self.ratio >= TARGET_RATIO,
            "sustainedAtLeast300": at_least,
            "sustainedAtLeast300At5000Nodes": at_least if self.nodes >= TARGET_NODES else None,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "pods": self.pods,
            "qps": self.qps,
            "burst": self.burst,
            "parallelism": self.parallelism,
            "workload": self.workload,
            "loadAware": self.load_aware,
            "reservations": self.reservations,
            "ownerShare": self.owner_share,
            "placement": None if self.placement is None else asdict(self.placement),
            "ownersAllocated": self.owners_allocated,
            "results": [asdict(r) for r in self.results],
            "ratio": self.ratio,
            "sustainedRatio": self.sustained_ratio,
            "targets": self.targets(),
            "phases": self.phases,
            "errors": self.errors,
        }
