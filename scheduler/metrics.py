"""Prometheus metrics with kube-scheduler's names, plus koord-scheduler's solver metrics.

A leaf module: it imports nothing of ours but its histogram (``scheduler.lean_histogram``). Each
``SchedulerMetrics`` owns its own ``CollectorRegistry`` (never prometheus-client's global one), so
a process creates one and tests create as many fresh ones as they like. ``scheduler.http``
serves ``exposition()``.

Label values follow kube-scheduler's: extension points are PascalCase (``PreFilter``) and
statuses are the code names kube prints (``Success``, ``UnschedulableAndUnresolvable``); the
framework runtime's ``observe`` hook passes ``preFilter``/``UNSCHEDULABLE`` and is converted here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from scheduler.lean_histogram import LeanHistogram

__all__ = [
    "CONTENT_TYPE",
    "AttemptResult",
    "SchedulerMetrics",
    "exponential_buckets",
    "extension_point_label",
    "status_label",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""Content-Type of ``SchedulerMetrics.exposition()`` (Prometheus text format)."""

AttemptResult = Literal["scheduled", "unschedulable", "error"]


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus' ExponentialBuckets: ``count`` upper bounds ``start * factor**n``."""
    return tuple(start * factor**n for n in range(count))


def extension_point_label(point: str) -> str:
    """``preFilter`` -> ``PreFilter`` (kube-scheduler's label values); PascalCase is kept."""
    return point[:1].upper() + point[1:]


def status_label(status: str) -> str:
    """``UNSCHEDULABLE_AND_UNRESOLVABLE`` -> ``UnschedulableAndUnresolvable``; ``Success`` is kept."""
    if status.isupper() or "_" in status:
        return "".join(part.capitalize() for part in status.split("_"))
    return status


# Buckets, as kube-scheduler's pkg/scheduler/metrics.
_ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)
_EXTENSION_POINT_BUCKETS = exponential_buckets(0.0001, 2, 12)
_PLUGIN_BUCKETS = exponential_buckets(0.00001, 1.5, 20)
_VICTIM_BUCKETS = exponential_buckets(1, 2, 7)
_SLI_BUCKETS = exponential_buckets(0.01, 2, 20)
_POD_ATTEMPTS_BUCKETS = exponential_buckets(1, 2, 5)
_SOLVER_BUCKETS = exponential_buckets(0.001, 2, 15)
_GAP_BUCKETS = (0.0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)


class SchedulerMetrics:
    """Every metric koord-scheduler exports, on one private registry, behind small typed methods."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self._plugin_children: dict[tuple[str, str, str], Any] = {}
        self._unschedulable_keys: set[tuple[str, str]] = set()
        self._point_children: dict[tuple[str, str, str], Any] = {}
        self._children: dict[tuple[object, ...], Any] = {}

        # ---- scheduling attempts ----------------------------------------------------------
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not "
            "be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=r,
        )
        self.scheduling_attempt_duration = LeanHistogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding hand-off).",
            ["result", "profile"],
            buckets=_ATTEMPT_BUCKETS,
            registry=r,
        )
        self.pod_scheduling_sli_duration = LeanHistogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue, "
            "which may include multiple scheduling attempts.",
            ["attempts"],
            buckets=_SLI_BUCKETS,
            registry=r,
        )
        self.pod_scheduling_attempts = LeanHistogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=_POD_ATTEMPTS_BUCKETS,
            registry=r,
        )

        # ---- framework ---------------------------------------------------------------------
        self.extension_point_duration = LeanHistogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=_EXTENSION_POINT_BUCKETS,
            registry=r,
        )
        self.plugin_execution_duration = LeanHistogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=_PLUGIN_BUCKETS,
            registry=r,
        )
        self.permit_wait_duration = LeanHistogram(
            "scheduler_permit_wait_duration_seconds",
            "Duration of waiting on permit (a gang waits here for its members).",
            ["result"],
            buckets=_ATTEMPT_BUCKETS,
            registry=r,
        )
        self.binding_duration = LeanHistogram(
            "scheduler_binding_duration_seconds",
            "Binding latency in seconds (PreBind + Bind, not the wait for a binding slot), by result.",
            ["result"],
            buckets=_ATTEMPT_BUCKETS,
            registry=r,
        )

        # ---- queue and cache ---------------------------------------------------------------
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
            "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
            "unschedulablePods; 'gated' means number of pods held by PreEnqueue.",
            ["queue"],
            registry=r,
        )
        self.queue_incoming_pods = Counter(
            "scheduler_queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=r,
        )
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name.",
            ["plugin", "profile"],
            registry=r,
        )
        self.cache_size = Gauge(
            "scheduler_scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=r,
        )

        # ---- preemption --------------------------------------------------------------------
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now.",
            registry=r,
        )
        self.preemption_victims = LeanHistogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims.",
            buckets=_VICTIM_BUCKETS,
            registry=r,
        )

        # ---- solver (koordinator-py's own) -------------------------------------------------
        self.solver_duration = LeanHistogram(
            "koord_scheduler_solver_duration_seconds",
            "Wall time of one solver call (CP-SAT or greedy), by solver and outcome status.",
            ["solver", "status"],
            buckets=_SOLVER_BUCKETS,
            registry=r,
        )
        self.solver_fallbacks = Counter(
            "koord_scheduler_solver_fallbacks_total",
            "Solver calls answered by the greedy fallback instead, by the reason.",
            ["solver", "reason"],
            registry=r,
        )
        self.solver_gap = LeanHistogram(
            "koord_scheduler_solver_gap_ratio",
            "Proven relative gap of a CP-SAT answer to the best possible one (0: optimal), by solver.",
            ["solver"],
            buckets=_GAP_BUCKETS,
            registry=r,
        )
        self.solver_model_size = Gauge(
            "koord_scheduler_solver_model_size",
            "Size of the last model built by a solver: number of variables or constraints.",
            ["solver", "kind"],
            registry=r,
        )
        self.equivalence_class_hits = Counter(
            "koord_scheduler_equivalence_class_hits_total",
            "Scheduling cycles whose row-local Filter and Score answers came from the pod's "
            "equivalence class (the replicas of one template sharing them) instead of being asked "
            "again for every node.",
            registry=r,
        )
        self._class_hits_seen = 0
        # ---- leader election ---------------------------------------------------------------
        self.leader_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=r,
        )
        self.leadership_losses = Counter(
            "koord_scheduler_leadership_losses_total",
            "Terms of leadership that ended because the lease could not be renewed in time or was "
            "taken over; koord-scheduler stops scheduling and campaigns again.",
            registry=r,
        )
        for queue in ("active", "backoff", "unschedulable", "gated"):
            self.pending_pods.labels(queue=queue).set(0)

    # ---- recording -----------------------------------------------------------------------------

    def attempt(self, result: AttemptResult, profile: str, seconds: float) -> None:
        """One scheduling attempt of one pod (a gang counts one attempt per member)."""
        self._child(self.schedule_attempts, result, profile).inc()
        self._child(self.scheduling_attempt_duration, result, profile).observe(seconds)

    def pod_scheduled(self, attempts: int, seconds_since_first_enqueue: float) -> None:
        """A pod was bound after ``attempts`` attempts, this long after it first entered the queue."""
        self._child(self.pod_scheduling_sli_duration, attempts).observe(seconds_since_first_enqueue)
        self.pod_scheduling_attempts.observe(attempts)

    def _child(self, metric: Any, *values: object) -> Any:
        """``metric.labels(*values)`` (values in the order of its label names), looked up once per
        label set: the per-pod metrics are recorded several times per pod."""
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*(str(v) for v in values))
        return child

    def observe_plugin(self, point: str, plugin: str, status: str, seconds: float) -> None:
        """The framework runtime's ``Observer``: one plugin call at one extension point.

        Called about ten times per pod, so the labelled child is looked up once per label set."""
        key = (point, plugin, status)
        child = self._plugin_children.get(key)
        if child is None:
            child = self.plugin_execution_duration.labels(
                plugin=plugin, extension_point=extension_point_label(point), status=status_label(status)
            )
            self._plugin_children[key] = child
        child.observe(seconds)

    def observe_extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        """All plugins of one extension point for one pod (about ten calls per pod: the labelled
        child is looked up once per label set, as in ``observe_plugin``)."""
        key = (point, status, profile)
        child = self._point_children.get(key)
        if child is None:
            child = self.extension_point_duration.labels(
                extension_point=extension_point_label(point), status=status_label(status), profile=profile
            )
            self._point_children[key] = child
        child.observe(seconds)

    def permit_wait(self, result: str, seconds: float) -> None:
        self._child(self.permit_wait_duration, result).observe(seconds)

    def binding(self, result: str, seconds: float) -> None:
        self._child(self.binding_duration, result).observe(seconds)

    def set_pending(self, active: int, backoff: int, unschedulable: int, gated: int) -> None:
        self.pending_pods.labels(queue="active").set(active)
        self.pending_pods.labels(queue="backoff").set(backoff)
        self.pending_pods.labels(queue="unschedulable").set(unschedulable)
        self.pending_pods.labels(queue="gated").set(gated)

    def queue_incoming(self, queue: str, event: str) -> None:
        """A pod entered ``queue`` (active, backoff, unschedulable, gated) because of ``event``."""
        self._child(self.queue_incoming_pods, queue, event).inc()

    def set_unschedulable_pods(self, counts: Mapping[tuple[str, str], int]) -> None:
        """(profile, plugin) -> unschedulable pods now; a pair no longer rejecting anyone reads 0."""
        for profile, plugin in self._unschedulable_keys - counts.keys():
            self.unschedulable_pods.labels(plugin=plugin, profile=profile).set(0)
        for (profile, plugin), count in counts.items():
            self.unschedulable_pods.labels(plugin=plugin, profile=profile).set(count)
        self._unschedulable_keys = set(counts)

    def set_cache_size(self, nodes: int, pods: int, assumed_pods: int) -> None:
        self.cache_size.labels(type="nodes").set(nodes)
        self.cache_size.labels(type="pods").set(pods)
        self.cache_size.labels(type="assumed_pods").set(assumed_pods)

    def preemption(self, victims: int) -> None:
        """One preemption attempt that selected ``victims`` pods (0 when none would help)."""
        self.preemption_attempts.inc()
        self.preemption_victims.observe(victims)

    def solver_solve(self, solver: str, status: str, seconds: float) -> None:
        """One solver call; ``status`` is OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN, or greedy's outcome."""
        self.solver_duration.labels(solver=solver, status=status).observe(seconds)

    def solved(
        self, solver: str, status: str, seconds: float, fell_back: bool, gap: float | None = None
    ) -> None:
        """``framework.handle.SolverMetrics``: one solve, whether its greedy answer was used, and
        the proven relative gap of its answer (None: nothing bounds it, e.g. greedy)."""
        self.solver_solve(solver, status, seconds)
        if gap is not None:
            self.solver_gap.labels(solver=solver).observe(gap)
        if fell_back:
            self.solver_fallback(solver, "timeout")

    def solver_fallback(self, solver: str, reason: str) -> None:
        """The greedy answer was used because ``solver`` gave none (``timeout``, ``infeasible``, ...)."""
        self.solver_fallbacks.labels(solver=solver, reason=reason).inc()

    def solver_model(self, solver: str, variables: int, constraints: int) -> None:
        self.solver_model_size.labels(solver=solver, kind="variables").set(variables)
        self.solver_model_size.labels(solver=solver, kind="constraints").set(constraints)

    def count_class_hits(self, total: int) -> None:
        """``EquivalenceClasses.hits`` so far (read off the loop every second: no metric call in
        the cycle); a total lower than the last one seen (new classes object) counts from zero."""
        if total < self._class_hits_seen:
            self._class_hits_seen = 0
        if total > self._class_hits_seen:
            self.equivalence_class_hits.inc(total - self._class_hits_seen)
        self._class_hits_seen = total

    def set_leader(self, lease: str, leading: bool) -> None:
        """Whether this process holds ``lease`` now (client-go's leader_election_master_status)."""
        self.leader_status.labels(name=lease).set(1 if leading else 0)

    def leadership_lost(self) -> None:
        self.leadership_losses.inc()

    # ---- exposition ----------------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The registry in Prometheus text format (serve with ``CONTENT_TYPE``)."""
        return generate_latest(self.registry)

    def names(self) -> Sequence[str]:
        """The metric names this object exports (counters with their ``_total``), sorted."""
        return sorted({m.name + "_total" if m.type == "counter" else m.name for m in self.registry.collect()})
