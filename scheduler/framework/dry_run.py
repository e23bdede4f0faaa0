"""What the plugins that plan whole jobs offer a what-if: the same questions the scheduling cycle
asks them, answered without acting (no nomination, no eviction, no plan kept).

The Framework's ``dry_run_planner()`` finds the profile's ``JobDryRun`` (Coscheduling); the
what-if (``scheduler.whatif``) asks it for the placement settings and for the victims job-level
preemption would choose, finds the quota plugin by ``QuotaDryRun``, and the pod-level preemption a
pod of no gang gets where job-level preemption is off by ``PodPreemptionDryRun`` (DefaultPreemption).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from apis.extension.networktopology import NetworkTopologySpec
from apis.scheduling.networktopology import ClusterNetworkTopology
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.extensions import PreemptionExtension, QuotaRelease
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.status import Status
from scheduler.quota import Figures
from scheduler.solver import SolveOptions, VictimSelection

__all__ = [
    "Choice",
    "JobDryRun",
    "PendingJob",
    "PlacementSetting",
    "PodPreemptionDryRun",
    "PodVictims",
    "QuotaDryRun",
]


@dataclass(frozen=True, slots=True)
class Choice:
    """The victims job-level preemption would evict (``selection``; None: none let the job fit,
    and ``message`` says why), before anything is done about it."""

    status: Status
    message: str
    selection: VictimSelection | None = None
    candidates: int = 0
    """The pods that were eligible victims."""


@dataclass(frozen=True, slots=True)
class PlacementSetting:
    """How the cycle places a job: the solver's options and the network topology gangs use."""

    options: SolveOptions
    topology: ClusterNetworkTopology | None
    aware_network_topology: bool
    preemption: bool
    """Job-level preemption is enabled (``CoschedulingArgs.enablePreemption``)."""


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A job the scheduler already knows: its pending members, as the cycle would plan them."""

    job: str
    members: tuple[PodInfo, ...]
    min_member: int
    spec: NetworkTopologySpec | None


@runtime_checkable
class JobDryRun(Protocol):
    def placement_setting(self) -> PlacementSetting: ...

    def pending_gang(self, gang_id: str) -> PendingJob | None:
        """The pending members of gang ``namespace/name``'s group; None: no such gang."""
        ...

    def gang_id_of(self, namespace: str, name: str) -> str | None:
        """The gang pod ``namespace/name`` belongs to (None: a pod of no gang, or unknown)."""
        ...

    async def choose_victims(
        self,
        trigger: PodInfo,
        job: str,
        members: Sequence[PodInfo],
        snapshot: Snapshot,
        *,
        topology: ClusterNetworkTopology | None,
        spec: NetworkTopologySpec | None,
        release: QuotaRelease | None,
        admit: PreemptionExtension | None,
    ) -> Choice:
        """What job-level preemption would evict for ``members``; nothing is done."""
        ...


@runtime_checkable
class QuotaDryRun(Protocol):
    """The quota plugin's pure reads (ElasticQuota's preemption API)."""

    @property
    def name(self) -> str: ...

    def quota_of(self, pod: PodInfo) -> str | None: ...

    def quota_figures(self) -> Mapping[str, Figures]: ...

    def quota_namespace(self, name: str) -> str | None: ...

    def fits_after_removal(self, pods: Sequence[PodInfo], victims: Sequence[PodInfo]) -> bool: ...

    def admitting(self, uids: Collection[str]) -> AbstractContextManager[None]: ...

    def quota_release(self, preemptor: PodInfo, members: Sequence[PodInfo]) -> QuotaRelease | None: ...


@dataclass(frozen=True, slots=True)
class PodVictims:
    """The node pod-level preemption would nominate a pod to, and whom it would evict there."""

    node: str
    victims: tuple[PodInfo, ...]


@runtime_checkable
class PodPreemptionDryRun(Protocol):
    """A PostFilter plugin that preempts for one pod at a time (kube-scheduler's DefaultPreemption)."""

    @property
    def name(self) -> str: ...

    def preempts_for(self, pod: PodInfo) -> bool:
        """It would preempt for ``pod`` at all (not a gang member nor a reserve pod)."""
        ...

    def choose_pod_victims(self, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis) -> PodVictims | str:
        """Its PostFilter's choice after ``diagnosis``'s Filter, done to nothing; or why none."""
        ...
