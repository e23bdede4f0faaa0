"""One Protocol per extension point, as kube-scheduler's ``framework/interface.go`` has.

A plugin is a class with a ``name`` and the methods of the extension points it implements;
``registry.py`` builds it from its args model and a ``Handle``. Filter and Score are vectorized:
they answer for an array of candidate node rows at once (``scheduler.cache.node_table``), which
is what lets a Python scheduler keep up with Go ones.

The order of a cycle (``runtime.py`` runs it, ``loop.py`` drives it):
PreEnqueue (when the pod enters the queue) -> QueueSort -> PreFilter -> Filter -> PostFilter
(only when no node fits) -> PreScore -> Score (+ normalize) -> Reserve -> Permit -> [async:]
WaitOnPermit -> PreBind -> Bind -> PostBind; Unreserve undoes Reserve on any failure after it.

What Koordinator adds for plugins to offer one another (reservations, room, NUMA hints, quota
reclaim) is in ``extensions.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Flag, auto
from typing import Any, Protocol

from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Status

__all__ = [
    "BindPlugin",
    "ClusterEvent",
    "Diagnosis",
    "EnqueueExtensions",
    "FilterPlugin",
    "FilterResult",
    "PermitPlugin",
    "Plugin",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "ReservePlugin",
    "ScoreExtensions",
    "ScorePlugin",
]

MAX_NODE_SCORE = 100


class Plugin(Protocol):
    """Every plugin has a name: the one used in the registry and in the configuration."""

    @property
    def name(self) -> str: ...


class ClusterEvent(Flag):
    """Cluster changes that can make a rejected pod schedulable; plugins list the ones they care about."""

    NODE_ADD = auto()
    NODE_UPDATE = auto()
    NODE_DELETE = auto()
    POD_ADD = auto()
    POD_UPDATE = auto()
    POD_DELETE = auto()
    """Includes a pod finishing (Succeeded/Failed): its resources are released."""
    CUSTOM_RESOURCE = auto()
    """PodGroup, ElasticQuota, Reservation, ClusterNetworkTopology ... changed."""
    ALL = NODE_ADD | NODE_UPDATE | NODE_DELETE | POD_ADD | POD_UPDATE | POD_DELETE | CUSTOM_RESOURCE


class EnqueueExtensions(Protocol):
    def events_to_register(self) -> ClusterEvent:
        """The events after which a pod this plugin rejected is worth another attempt."""
        ...


class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status:
        """Runs when a pod is added to the active queue; keep it cheap. Non-success: the pod waits
        in the unschedulable queue (PENDING) until an event moves it."""
        ...


class QueueSortPlugin(Plugin, Protocol):
    def sort_key(self, pod: PodInfo) -> tuple[Any, ...]:
        """Lower keys are popped first. Only one QueueSort plugin is enabled per scheduler. The
        key has one length for every pod: the queue's heap holds it flattened into its entries."""
        ...


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    status: Status = field(default_factory=Status.success)
    node_names: frozenset[str] | None = None
    """When set, only these nodes are evaluated by Filter (others fail as unresolvable)."""


class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        """Prepare CycleState, or reject the pod for every node at once. SKIP: the plugin's Filter
        does not run this cycle."""
        ...


@dataclass(slots=True)
class FilterResult:
    """A Filter's answer for the candidate rows it was given (arrays aligned with those rows)."""

    feasible: BoolArray
    rejections: list[tuple[str, BoolArray]] = field(default_factory=list)
    """(reason, rows rejected for it); a node may carry several reasons ("Insufficient cpu" and
    "Insufficient memory"), every infeasible node carries at least one."""
    unresolvable: BoolArray | None = None
    """Rows where preemption cannot help (UNSCHEDULABLE_AND_UNRESOLVABLE); None: none of them."""
    error: str | None = None
    """A fault: the cycle stops with an Error status."""

    @staticmethod
    def all_feasible(count: int) -> FilterResult:
        import numpy as np

        return FilterResult(feasible=np.ones(count, dtype=np.bool_))


class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        """Which of ``rows`` can run the pod, and why the others cannot."""
        ...


@dataclass(slots=True)
class Diagnosis:
    """Why no node fit: the explanation written into FailedScheduling and the debug API."""

    node_count: int = 0
    reason_counts: dict[str, int] = field(default_factory=dict)
    unresolvable_rows: set[int] = field(default_factory=set)
    rejecting_plugins: set[str] = field(default_factory=set)
    pre_filter_message: str | None = None
    post_filter_message: str | None = None
    """What preemption did or why it could not help, appended as kube-scheduler appends
    "preemption: ..."."""

    def message(self) -> str:
        """kube-scheduler's format: "0/50 nodes are available: 20 Insufficient cpu, 30 node(s) ..."."""
        if self.pre_filter_message:
            text = f"0/{self.node_count} nodes are available: {self.pre_filter_message}."
        else:
            parts = sorted(f"{count} {reason}" for reason, count in self.reason_counts.items())
            detail = ", ".join(parts) if parts else "no nodes available to schedule pods"
            text = f"0/{self.node_count} nodes are available: {detail}."
        if self.post_filter_message:
            text = f"{text} preemption: {self.post_filter_message}"
        return text


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    status: Status
    nominated_node: str | None = None


class PostFilterPlugin(Plugin, Protocol):
    async def post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> PostFilterResult:
        """Make the pod schedulable later (preemption). SUCCESS with a nominated node: victims are
        being evicted for it."""
        ...


class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status: ...


class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        """A score per row in [0, MAX_NODE_SCORE] (or any range when ``ScoreExtensions`` normalizes)."""
        ...


class ScoreExtensions(Protocol):
    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        """Map raw scores into [0, MAX_NODE_SCORE]."""
        ...


class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Undo ``reserve``; must be idempotent and must not fail."""
        ...


class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        """SUCCESS, a rejection, or WAIT with a timeout in seconds (the pod then waits for
        ``WaitingPods.allow`` / ``reject`` from another cycle, e.g. the last member of a gang)."""
        ...


class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...


class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Bind, or SKIP to let the next Bind plugin do it."""
        ...


class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None: ...


ArgsMapping = Mapping[str, Any]
