"""The descheduler framework's contract, Koordinator's ``pkg/descheduler/framework`` in Python.

Two layers meet here. Policy plugins (``BalancePlugin``, ``DeschedulePlugin``: LowNodeLoad and
later others) look at the cluster through a ``DeschedulerHandle`` and ask its ``Evictor`` to move
pods. The evictor is the MigrationController: it evicts nothing itself, it checks the per-round
limits and its filters and writes a PodMigrationJob, which the arbitrator admits and the
reconciler carries out. A policy plugin therefore never talks to the API server for pods it
moves, and every move is limited, arbitrated and recorded the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from apis.base import KoordModel
from apis.core import Node, Pod
from apis.scheduling.networktopology import ClusterNetworkTopology
from apis.scheduling.podgroup import PodGroup
from apis.scheduling.reservation import Reservation
from apis.slo.nodemetric import NodeMetric

__all__ = [
    "BalancePlugin",
    "ClusterObjects",
    "DeschedulePlugin",
    "DeschedulerHandle",
    "EvictOptions",
    "Evictor",
]


class EvictOptions(KoordModel):
    """Why a plugin asks to move a pod; recorded on the PodMigrationJob
    (``koordinator.sh/evict-trigger`` and ``koordinator.sh/evict-reason``)."""

    plugin_name: str
    """The plugin asking (the evict-trigger annotation)."""
    reason: str
    """Human-readable cause, e.g. ``node is overutilized, node cpu usage(92%)>threshold(80%)``."""
    reservation: str | None = None
    """The name of a Reservation already placed for the pod's replacement: the PodMigrationJob
    uses it (``spec.reservationOptions.reservationRef``, ReservationFirst) instead of creating one
    (gang defragmentation reserves every move of its plan before evicting any)."""


class Evictor(Protocol):
    """The framework evictor: Koordinator's first Evict plugin, ANDed Filter plugins, and the
    per-round limits (``maxNoOfPodsToEvictPerNode`` / ``PerNamespace`` / ``Total``)."""

    def filter(self, pod: Pod) -> bool:
        """May this pod be moved at all (MigrationController's Filter: no active job, its
        scheduler, the evictor filter, namespaces, workload caps ...)? Cheap, no I/O."""
        ...

    def pre_eviction_filter(self, pod: Pod) -> bool:
        """Checks that only make sense right before evicting (nodeFit and the like)."""
        ...

    async def evict(self, pod: Pod, options: EvictOptions) -> bool:
        """Ask to move the pod: True when a PodMigrationJob was created (or would have been, in a
        dry run), False when a limit or filter refused it. Never raises for an API error."""
        ...


class ClusterObjects(Protocol):
    """The API calls a plugin makes beyond the informer caches (Koordinator's handle gives plugins
    its ``ClientSet``): the objects GangDefragmentation reads when it plans and the Reservations,
    PodGroup annotations and events it writes."""

    async def pod_groups(self) -> list[PodGroup]: ...

    async def unbound_pods(self) -> list[Pod]:
        """Every pod not yet bound to a node (any namespace)."""
        ...

    async def topology(self) -> ClusterNetworkTopology | None:
        """The ClusterNetworkTopology named ``default`` (the only one the scheduler uses)."""
        ...

    async def reservations(self, label_selector: str) -> list[Reservation]: ...

    async def create_reservation(self, reservation: Reservation) -> bool:
        """False when one of that name already exists."""
        ...

    async def delete_reservation(self, name: str) -> None:
        """A reservation already gone is no error."""
        ...

    async def annotate_pod_group(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        """Merge-patch the annotations (None removes one); a PodGroup gone is no error."""
        ...

    async def pod_group_event(
        self, pod_group: PodGroup, reason: str, message: str, type_: str = "Normal"
    ) -> None: ...


class DeschedulerHandle(Protocol):
    """What a policy plugin may read and use. Reads come from informer caches (no I/O), except
    through ``objects``."""

    @property
    def evictor(self) -> Evictor: ...

    @property
    def objects(self) -> ClusterObjects:
        """The API server, for what the caches do not hold (I/O: plugins call it sparingly)."""
        ...

    def nodes(self) -> Sequence[Node]:
        """Every node the profile's node selector matches, Ready or not."""
        ...

    def pods_on_node(self, node_name: str) -> Sequence[Pod]:
        """The pods bound to the node, terminal ones included (callers filter)."""
        ...

    def node_metric(self, node_name: str) -> NodeMetric | None:
        """The node's NodeMetric as koordlet last reported it, None when there is none."""
        ...

    async def record_event(
        self, regarding: Pod | Node, reason: str, message: str, type_: str = "Normal"
    ) -> None:
        """An event on the object (``koord-descheduler`` as the reporting component)."""
        ...


class BalancePlugin(Protocol):
    """Run once per descheduling round over the profile's nodes (LowNodeLoad)."""

    name: str

    async def balance(self, nodes: Sequence[Node]) -> None: ...


class DeschedulePlugin(Protocol):
    """Run once per round, before every Balance plugin (per-pod policies such as
    RemovePodsViolatingNodeAffinity)."""

    name: str

    async def deschedule(self, nodes: Sequence[Node]) -> None: ...
