"""What a plugin may use besides its args: one frozen ``Handle`` of typed collaborators.

As kube-scheduler's ``framework.Handle``, it is built once per profile and never changed after:

- ``backend``: the cluster (``ClusterBackend``); plugins write annotations and status through it.
- ``snapshot()``: the current read view of the cache. Plugins never reach the cache or the queue.
- ``informers``: subscribe to watch events of a resource (a plugin's own informer).
- ``activate(uids)``: move pending pods into the active queue now (a gang became complete).
- ``nominator``: hold a pending pod's requests on a node (preemption, planned gangs).
- ``stand_ins``: queue and account pods that stand in for other objects (a Reservation's
  reserve pod: scheduled like a pod, then holding its room on its node).
- ``evictor``: the one eviction service (``scheduler.eviction``).
- ``solver_metrics``: solve time, status and fallbacks of the solvers plugins call.
- ``waiting_pods``: the pods of this profile waiting at Permit.
- ``profile``: what the profile offers other plugins (``ProfileView``): the rows every
  PreFilter/Filter accept, the Score totals, the job a pod belongs to, and the plugins that take
  part in preemption. The ``Framework`` binds it to itself when it builds the profile's plugins,
  so plugins find each other through protocols, never by importing each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from apis.client.backend import ClusterBackend, ResourceType, WatchEvent
from apis.client.eviction import EvictionService, Evictor
from apis.core import Pod
from apis.features import FeatureGates
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.waiting_pods import WaitingPods
from scheduler.solver.problem import SpreadConstraint

if TYPE_CHECKING:
    from scheduler.framework.extensions import (
        NUMAHintProvider,
        PreemptionExtension,
        Preemptor,
        ReservationFilterPlugin,
        Room,
    )

__all__ = [
    "Handle",
    "Informers",
    "Nominator",
    "ProfileView",
    "SolverMetrics",
    "StandIns",
]

Listener = Callable[[WatchEvent[Any]], None]


class Informers:
    """Who listens to which resource's watch events. Filled while profiles are built; the app
    then runs one watch per resource and hands every event to its listeners in order."""

    def __init__(self) -> None:
        self._listeners: dict[ResourceType[Any], list[Listener]] = {}

    def subscribe(self, resource: ResourceType[Any], listener: Listener) -> None:
        """Receive every watch event of ``resource`` (pods before the queue sees them), as a
        plugin's own informer would in kube-scheduler."""
        self._listeners.setdefault(resource, []).append(listener)

    def resources(self) -> list[ResourceType[Any]]:
        return list(self._listeners)

    def listeners(self, resource: ResourceType[Any]) -> Sequence[Listener]:
        return tuple(self._listeners.get(resource, ()))


class Nominator(Protocol):
    def nominate(self, pod: PodInfo, node: str) -> bool:
        """Hold ``pod``'s requests on ``node`` until it is assumed, bound or deleted (or the
        nomination is cleared); False when the node is unknown or the pod already has a node."""
        ...

    def clear_nomination(self, uid: str) -> None: ...


class _NoNominator:
    def nominate(self, pod: PodInfo, node: str) -> bool:
        return False

    def clear_nomination(self, uid: str) -> None:
        return None


class StandIns(Protocol):
    """Pods the scheduler makes up for other objects (reserve pods of Reservations): queued to be
    scheduled like any pod, and once placed accounted on their node like an assigned pod."""

    def enqueue(self, pod: PodInfo) -> None:
        """Queue ``pod`` (or update it in the queue) unless it is already placed or assumed."""
        ...

    def dequeue(self, uid: str) -> None:
        """Take a stand-in out of the queue (its object was placed elsewhere, finished or deleted)."""
        ...

    def hold(self, pod: PodInfo) -> None:
        """Account ``pod`` (``spec.nodeName`` set) on its node, replacing what it held before
        (an assumed stand-in is confirmed by this)."""
        ...

    def release(self, uid: str) -> None:
        """Stop accounting the stand-in ``uid`` anywhere and take it out of the queue."""
        ...

    def announce(self, event: WatchEvent[Pod]) -> None:
        """Tell the plugins' pod informers of a stand-in as if the pod watch had (a reserve pod is
        then a gang member like any pod: Coscheduling counts and places it with its gang)."""
        ...


class _NoStandIns:
    def enqueue(self, pod: PodInfo) -> None:
        return None

    def dequeue(self, uid: str) -> None:
        return None

    def hold(self, pod: PodInfo) -> None:
        return None

    def release(self, uid: str) -> None:
        return None

    def announce(self, event: WatchEvent[Pod]) -> None:
        return None


class SolverMetrics(Protocol):
    def solved(
        self, solver: str, status: str, seconds: float, fell_back: bool, gap: float | None = None
    ) -> None:
        """One solve of ``solver`` (``cpsat``, ``greedy``, ``preemption-cpsat`` ...) and the proven
        relative gap of its answer (None: unknown)."""
        ...

    def preemption(self, victims: int) -> None:
        """One preemption attempt that chose this many victims (0: none would help)."""
        ...


class _NoSolverMetrics:
    def solved(
        self, solver: str, status: str, seconds: float, fell_back: bool, gap: float | None = None
    ) -> None:
        return None

    def preemption(self, victims: int) -> None:
        return None


class ProfileView(Protocol):
    """What a profile's runtime offers its plugins (implemented by ``runtime.Framework``)."""

    def feasible_rows(self, pod: PodInfo, snapshot: Snapshot, rows: IntArray | None = None) -> IntArray:
        """Rows (of ``rows``; None: every node) every PreFilter and Filter of the profile accept for
        ``pod``, evaluated in a planning CycleState (for plugins that place several pods at once:
        gangs, preemption)."""
        ...

    def score_rows(self, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        """The profile's weighted Score totals for ``pod`` on ``rows``."""
        ...

    def job_of(self, pod: PodInfo) -> str:
        """The job ``pod`` belongs to (its gang group, from the profile's ``JobResolver``; else
        the pod's own uid): nominations of a pod's own job never block it."""
        ...

    def preemption_extensions(self) -> Sequence[PreemptionExtension]:
        """The profile's plugins that implement ``extensions.PreemptionExtension``."""
        ...

    def gang_spread(self, members: Sequence[PodInfo], snapshot: Snapshot) -> tuple[SpreadConstraint, ...]:
        """The DoNotSchedule topology spread a gang's placement must keep between ``members``
        (from the profile's ``extensions.GangSpreadSource`` plugins)."""
        ...

    def preemptor(self) -> Preemptor | None:
        """The profile's plugin that preempts for a single pod on request (``extensions.Preemptor``)."""
        ...

    def restore_reserved(self, pods: Sequence[PodInfo], snapshot: Snapshot) -> None:
        """Release in ``snapshot`` (until its ``close``) the room reserved for any of ``pods``
        (the profile's ``extensions.ReservedRoom`` plugins)."""
        ...

    def reservation_filters(self) -> Sequence[ReservationFilterPlugin]:
        """The profile's plugins that judge a pod against one reservation
        (``extensions.ReservationFilterPlugin``)."""
        ...

    def numa_hint_providers(self) -> Sequence[NUMAHintProvider]:
        """The profile's plugins that place resources on NUMA nodes (``extensions.NUMAHintProvider``)."""
        ...

    def member_room(self, pod: PodInfo, snapshot: Snapshot, nodes: Sequence[str], limit: int) -> list[Room]:
        """How many pods like ``pod`` each of ``nodes`` can still hold, by the profile's
        ``extensions.MemberRoom`` plugins (one ``Room`` per plugin that limits the pod)."""
        ...


class _UnboundProfile:
    """A Handle outside any Framework (a plugin built alone in a test): no other plugins."""

    def feasible_rows(self, pod: PodInfo, snapshot: Snapshot, rows: IntArray | None = None) -> IntArray:
        return snapshot.candidate_rows() if rows is None else rows

    def score_rows(self, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        import numpy as np

        return np.zeros(rows.size, dtype=np.int64)

    def job_of(self, pod: PodInfo) -> str:
        return pod.uid

    def preemption_extensions(self) -> Sequence[PreemptionExtension]:
        return ()

    def gang_spread(self, members: Sequence[PodInfo], snapshot: Snapshot) -> tuple[SpreadConstraint, ...]:
        return ()

    def preemptor(self) -> Preemptor | None:
        return None

    def restore_reserved(self, pods: Sequence[PodInfo], snapshot: Snapshot) -> None:
        return None

    def reservation_filters(self) -> Sequence[ReservationFilterPlugin]:
        return ()

    def numa_hint_providers(self) -> Sequence[NUMAHintProvider]:
        return ()

    def member_room(self, pod: PodInfo, snapshot: Snapshot, nodes: Sequence[str], limit: int) -> list[Room]:
        return []


def _no_activation(uids: set[str]) -> None:
    return None


@dataclass(frozen=True)
class Handle:
    backend: ClusterBackend
    snapshot: Callable[[], Snapshot]
    clock: Callable[[], float] = time.monotonic
    scheduler_name: str = "koord-scheduler"
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    informers: Informers = field(default_factory=Informers)
    activate: Callable[[set[str]], None] = _no_activation
    nominator: Nominator = field(default_factory=_NoNominator)
    stand_ins: StandIns = field(default_factory=_NoStandIns)
    evictor: Evictor | None = None
    """None: an ``EvictionService`` over ``backend`` (set at construction)."""
    solver_metrics: SolverMetrics = field(default_factory=_NoSolverMetrics)
    profile: ProfileView = field(default_factory=_UnboundProfile)
    features: FeatureGates = field(default_factory=FeatureGates)
    """Koordinator's feature gates (``--feature-gates``)."""

    def __post_init__(self) -> None:
        if self.evictor is None:
            object.__setattr__(self, "evictor", EvictionService(self.backend, self.scheduler_name))

    @property
    def eviction(self) -> Evictor:
        """The evictor (never None after construction)."""
        assert self.evictor is not None
        return self.evictor

    def subscribe(self, resource: ResourceType[Any], listener: Listener) -> None:
        """Shorthand for ``informers.subscribe``."""
        self.informers.subscribe(resource, listener)
