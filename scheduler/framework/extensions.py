"""Koordinator's cross-plugin protocols: what one plugin offers others beside kube-scheduler's
extension points (``interfaces.py``), as Koordinator's ``frameworkext`` adds to the framework.

The Framework finds the plugins implementing each protocol among a profile's plugins
(``Handle.profile``); the ``StateKey`` s here are what plugins leave in the CycleState for one another.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.interfaces import Diagnosis, PostFilterResult
from scheduler.framework.status import Status
from scheduler.solver.problem import SpreadConstraint

__all__ = [
    "BIND_ANNOTATIONS",
    "GANG_PLAN",
    "HOLD_ROOM",
    "NUMA_AFFINITY",
    "RESERVATIONS_MATCHED",
    "RESERVATION_CREDIT",
    "RESERVATION_NOMINATED",
    "RESERVATION_TAKEN",
    "SCORE_ALWAYS",
    "GangSpreadSource",
    "JobResolver",
    "MemberRoom",
    "NUMAHint",
    "NUMAHintProvider",
    "OffCycleWork",
    "PreemptionExtension",
    "Preemptor",
    "PreferNodesPlugin",
    "QueuePrecedence",
    "QuotaRelease",
    "ReservationFilterPlugin",
    "ReservationView",
    "ReservedRoom",
    "Room",
    "RowInputs",
    "RowLocal",
    "SkipByClass",
    "SkipReads",
    "carry_on_binding",
]


@runtime_checkable
class PreferNodesPlugin(Protocol):
    """A plugin that names nodes to try first (Koordinator's ``frameworkext.PreferNodesPlugin``:
    SchedulingHint). After PreFilter the cycle runs Filter on them in order and takes the first
    that passes, without scoring, as kube-scheduler tries a pod's nominated node first; when none
    passes, every node is evaluated as usual. The Framework asks the first such plugin of the
    profile (``Framework.run_prefer_nodes``)."""

    @property
    def name(self) -> str: ...

    def prefer_nodes(self, state: CycleState, pod: PodInfo, allowed: frozenset[str] | None) -> Sequence[str]:
        """The nodes to try first, in order, among ``allowed`` (the PreFilter result; None: every
        node); empty: none."""
        ...


class RowInputs(enum.Enum):
    """What a ``RowLocal`` plugin's answer for a node reads besides the pod."""

    NODE = "node"
    """The row's Node object only (labels, taints, images, unschedulable, name): it changes only
    with the node, and every change of a node bumps ``Cache.generation``."""
    ACCOUNTING = "accounting"
    """The Node object and the sums the cache accounts on the row (requests, non-zero requests,
    host ports): they change with the pods placed there, stamped in ``NodeTable.versions``."""


@runtime_checkable
class RowLocal(Protocol):
    """A Filter or Score plugin whose answer for a node reads only the pod and that node (beyond
    Koordinator: the equivalence classes of ``scheduler.framework.equivalence``).

    ``row_inputs(pod)`` not None promises that, for ``pod``, the plugin's Filter verdict and raw
    Score (before NormalizeScore) on a row depend on nothing but the pod's scheduling fields and
    the row's inputs it names (``RowInputs``): not on the pods themselves (a binding's
    confirmation swaps one without a new stamp), not on the other rows asked, not on anything
    outside the cache; and that its PreScore and Score leave nothing in the CycleState that a
    later point reads. Pods of one class then reuse the plugin's answer for a row until those
    inputs change. None: the plugin runs for every pod."""

    @property
    def name(self) -> str: ...

    def row_inputs(self, pod: PodInfo) -> RowInputs | None: ...


class SkipReads(enum.Enum):
    """What a ``SkipByClass`` plugin's PreFilter reads to decide on SKIP."""

    SPEC = "spec"
    """What ``class_key`` holds of the pod (its scheduling fields, namespace, labels and
    annotations) and the plugin's own configuration."""
    VOLUMES = "volumes"
    """That and the pod's volumes, which ``class_key`` leaves out (a token volume's name is
    random): shared only among pods without volumes."""


@runtime_checkable
class SkipByClass(Protocol):
    """A PreFilter plugin whose SKIP is its pod's class's (beyond Koordinator: the equivalence
    classes of ``scheduler.framework.equivalence``).

    ``pre_filter_skip_reads`` promises that whether PreFilter returns SKIP for a pod depends on
    nothing but what it names (``SkipReads``), not on anything the cluster or the cycle holds, and
    that a SKIP leaves nothing behind (no CycleState entry, no note, nothing in the plugin); None
    promises nothing (the plugin's arguments make its SKIP read the cluster). The
    pods of a class after one that skipped the plugin then skip it without asking it, but in the
    cycles that time each plugin (``CycleState.record_plugin_metrics``), which ask every plugin."""

    @property
    def name(self) -> str: ...

    @property
    def pre_filter_skip_reads(self) -> SkipReads | None: ...


@runtime_checkable
class QueuePrecedence(Protocol):
    """A plugin that sends some pending pods ahead of the others of their priority in the active
    queue, whatever the queueSort plugin's order among them: Coscheduling, for the rest of a gang
    of which some members are bound already (a scheduler killed between the bindings) and idle
    until it runs. The Framework asks every such plugin of the profile when it keys a pod."""

    @property
    def name(self) -> str: ...

    def queue_first(self, pod: PodInfo) -> bool: ...


@dataclass(frozen=True)
class QuotaRelease:
    """What a job's quota must free before the job fits it: at least ``amounts`` (per resource)
    from pods that ``holds`` (the quota's own pods); ``fits_after(members, victims)`` confirms."""

    key: str
    amounts: Mapping[str, int]
    holds: Callable[[PodInfo], bool]
    fits_after: Callable[[Sequence[PodInfo], Sequence[PodInfo]], bool]


@runtime_checkable
class PreemptionExtension(Protocol):
    """A plugin that widens and budgets the victims of job-level preemption (ElasticQuota's
    reclaim: a quota claiming its min back from quotas that borrowed it), and lets a job its
    PreFilter rejected preempt within its own quota. The Framework finds these among the
    profile's plugins (``Handle.profile.preemption_extensions()``)."""

    @property
    def name(self) -> str: ...

    def quota_release(self, preemptor: PodInfo, members: Sequence[PodInfo]) -> QuotaRelease | None:
        """When this plugin's PreFilter rejected the job: what evicting pods would have to free
        (None: evictions cannot help)."""
        ...

    def admitting(self, uids: Collection[str]) -> AbstractContextManager[None]:
        """While open, PreFilter in a planning cycle admits these pods (their quota is being freed)."""
        ...

    def reclaimable(self, preemptor: PodInfo, victim: PodInfo) -> bool:
        """``victim`` may be evicted for ``preemptor`` although its priority is not lower."""
        ...

    def eviction_budget(self, victim: PodInfo) -> tuple[str, Mapping[str, int]] | None:
        """(key, amounts): victims sharing ``key`` that are evicted only because they are
        reclaimable may release at most ``amounts`` per resource together; None: no budget."""
        ...


@runtime_checkable
class JobResolver(Protocol):
    """A plugin that knows which job a pod belongs to (Coscheduling: its gang group). The
    Framework finds it among the profile's plugins; ``Handle.profile.job_of`` asks it."""

    def job_of(self, pod: PodInfo) -> str:
        """The job's id; a pod of no job is a job of its own (its uid)."""
        ...


@runtime_checkable
class Preemptor(Protocol):
    """A plugin that can preempt for one pod on another plugin's behalf (Coscheduling's job-level
    preemption, used by the Reservation plugin for reserve pods when
    ``ReservationArgs.enablePreemption`` is set). ``Handle.profile.preemptor()`` finds it."""

    async def preempt_alone(self, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis) -> PostFilterResult:
        """Evict lower-priority pods so that ``pod`` alone fits, and nominate it."""
        ...


@dataclass(frozen=True, slots=True)
class ReservationView:
    """One placed reservation as other plugins see it (``ReservationFilterPlugin``)."""

    name: str
    uid: str
    node: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    """What it holds in all, in the node table's units."""
    remaining: Mapping[str, int]
    """What its owners have not taken yet."""
    policy: str = ""
    """``spec.allocatePolicy`` ("" for Default, Aligned, Restricted)."""


@runtime_checkable
class ReservationFilterPlugin(Protocol):
    """A plugin that also judges whether a pod may allocate from one reservation on a node
    (Koordinator's ``frameworkext.ReservationFilterPlugin``, run in Filter since v1.6): a device or
    CPU plugin checks that the reservation's own devices or CPUs hold the pod. Reservation asks
    every such plugin of the profile (``Handle.profile.reservation_filters``) before it lets the
    pod use a reservation; a rejection's reason goes into the pod's explanation."""

    @property
    def name(self) -> str: ...

    def filter_reservation(self, state: CycleState, pod: PodInfo, reservation: ReservationView) -> Status:
        """SUCCESS: the pod may allocate from ``reservation``; a rejection says why not."""
        ...


@dataclass(frozen=True, slots=True)
class Room:
    """How many pods of one shape each node can still hold by a plugin's own accounting."""

    shape: str
    """Names the shape (pods with equal shapes draw on the same room), in words a user reads in a
    gang's failure message: ``sets of 8 whole GPUs in one PCIe``."""
    per_node: Mapping[str, int]
    """Node -> pods of the shape it holds (up to the limit asked); a node absent is not limited."""


@runtime_checkable
class MemberRoom(Protocol):
    """A plugin that accounts for something the node table's totals do not (DeviceShare: which
    cards, on which PCIe switch; NodeNUMAResource: which NUMA node, which cores): it says how many
    pods like one a node can still hold, so that a gang is planned, and a preemption's victims
    counted, by what the plugin will really give at Reserve. Pods a preemption is weighing
    (``Snapshot.is_withdrawn``) count as gone.
    ``Handle.profile.member_room`` asks every such plugin of the profile."""

    def member_room(self, pod: PodInfo, snapshot: Snapshot, nodes: Sequence[str], limit: int) -> Room | None:
        """The room on ``nodes`` for pods like ``pod`` (each counted up to ``limit``); None: the
        plugin does not limit ``pod``."""
        ...


@runtime_checkable
class ReservedRoom(Protocol):
    """A plugin that holds room for some pods (Reservation): it restores that room for them in a
    snapshot it did not schedule in (a gang's plan, checked after its solve).
    ``Handle.profile.restore_reserved`` asks it."""

    def restore_for(self, pods: Sequence[PodInfo], snapshot: Snapshot) -> None:
        """Release in ``snapshot``, until its ``close``, the room held for any of ``pods``."""
        ...


@dataclass(frozen=True, slots=True)
class NUMAHint:
    """One way a resource could be placed on a node's NUMA nodes (the kubelet's TopologyHint)."""

    mask: int | None
    """NUMA nodes, bit i = NUMA node i; None: any (no preference)."""
    preferred: bool
    """The mask is as narrow as the request allows."""
    score: int = 0
    """Breaks ties between masks of equal width (higher first)."""


@runtime_checkable
class NUMAHintProvider(Protocol):
    """A plugin that places a resource on NUMA nodes (DeviceShare: GPUs and NICs). NodeNUMAResource
    merges these hints with its own under the node's NUMA policy (Koordinator's topology manager
    ``NUMATopologyHintProvider``); ``Handle.profile.numa_hint_providers`` lists them."""

    def numa_hints(
        self, state: CycleState, pod: PodInfo, node: str, numa_ids: Sequence[int]
    ) -> Mapping[str, Sequence[NUMAHint] | None] | None:
        """Per resource the pod asks of this plugin, the masks over ``numa_ids`` that hold it (an
        empty list: none does); None: no NUMA preference for this pod on this node."""
        ...


NUMA_AFFINITY = StateKey[dict[str, int]]("NUMAAffinity")
"""Written by NodeNUMAResource's Filter: node name -> the NUMA mask the pod was admitted with
there (bit i = NUMA node i); a NUMAHintProvider allocates within it at Reserve."""


GANG_PLAN = StateKey[Callable[[], Mapping[str, tuple[PodInfo, str]]]]("GangPlan")
"""Written by the PreFilter that placed the pod's gang as a whole (Coscheduling): called, uid ->
(member, planned node) for the gang's other members not yet placed (built only when asked). A
Filter that counts pods (PodTopologySpread) judges the pod's node by the state the whole plan
leads to, as the plan was made, not by the transient order in which the members are scheduled."""


RESERVATION_CREDIT = StateKey[Mapping[str, int]]("ReservationCredit")
"""Written by the PreFilter that restores reservations (Reservation): per resource, the most the
pod may take from a reservation it may use. A reservation charges its quota from its creation, so
ElasticQuota admits the pod for its request less this, and checks again at Reserve against what
the pod really took (``RESERVATION_TAKEN``)."""

BIND_ANNOTATIONS = StateKey[dict[str, str]]("BindAnnotations")
"""Written at PreBind: annotations the Binding carries onto the pod (DefaultBinder sends them), so
a plugin's record (``reservation-allocated``) costs no write of its own and lands with the node."""


def carry_on_binding(state: CycleState, annotations: Mapping[str, str]) -> None:
    """Add ``annotations`` to those the pod's Binding carries (``BIND_ANNOTATIONS``)."""
    carried = state.get(BIND_ANNOTATIONS) or {}
    carried.update(annotations)
    state.write(BIND_ANNOTATIONS, carried)


SCORE_ALWAYS = StateKey[frozenset[int]]("ScoreAlways")
"""Written by a Filter: rows the cycle scores even when it samples the feasible nodes
(``percentageOfNodesToScore``), if they are feasible (Reservation: the nodes holding the
reservations the pod would use)."""

HOLD_ROOM = StateKey[bool]("HoldRoomOnBindFailure")
"""Written at Unreserve by a plugin whose pod must keep its room when its binding fails
(Coscheduling: a gang member released at Permit, whose gang may already have members bound): the
binder nominates the pod to the node it failed on, so no other pod takes that room before it is
retried and the gang is not left part bound."""

RESERVATIONS_MATCHED = StateKey[Mapping[str, Sequence[ReservationView]]]("ReservationsMatched")
"""Written by the PreFilter that restores reservations (Reservation): node name -> the placed
reservations on it the pod may use. A plugin holding sub-resources for reservations (DeviceShare's
cards) restores them for the pod from this (Koordinator's ``ReservationRestorePlugin``)."""

RESERVATION_NOMINATED = StateKey[dict[str, str]]("ReservationNominated")
"""Written by Reservation's Filter (and PreScore when planning): node name -> the uid of the
reservation the pod would allocate from there (Koordinator's ``GetNominatedReservation``). A
Reserve plugin that runs before Reservation's (DeviceShare) allocates from that reservation."""

RESERVATION_TAKEN = StateKey[tuple[str, Mapping[str, int]]]("ReservationTaken")
"""Written at Reserve by Reservation: (the reservation's uid, what the pod takes from it)."""


@runtime_checkable
class OffCycleWork(Protocol):
    """A plugin that works for pods off the scheduling cycle (a gang's placement solved in a
    thread, a job's victims being evicted) and activates them when done: the pods it answered
    PENDING for wait, unschedulable, on that work. ``koordctl simulate`` calls its cluster settled
    only when no such work is in flight (``Framework.off_cycle_tasks``)."""

    @property
    def name(self) -> str: ...

    def off_cycle_tasks(self) -> int:
        """How many of those tasks are in flight now."""
        ...


@runtime_checkable
class GangSpreadSource(Protocol):
    """A plugin whose Filter keeps DoNotSchedule topology spread (PodTopologySpread). Filter sees
    one pod against the pods already placed; a gang placed as a whole also needs the spread
    between its own members, which the placement solver keeps from these constraints. The
    Framework finds these among the profile's plugins; ``Handle.profile.gang_spread`` asks them."""

    def gang_spread(self, members: Sequence[PodInfo], snapshot: Snapshot) -> tuple[SpreadConstraint, ...]:
        """The spread constraints ``members`` (pending pods of one gang, by uid) carry."""
        ...
