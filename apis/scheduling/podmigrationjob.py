"""PodMigrationJob (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, short name ``pmj``).

Moves one pod safely: reserve room elsewhere (a Reservation), evict the pod, and let its
replacement consume the reservation.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from apis.base import CRDInfo, KoordModel, PrinterColumn
from apis.meta import KoordResource, ObjectReference
from apis.types import GoDuration, Int64, PreserveUnknownObject, Time

__all__ = [
    "DeleteOptions",
    "PodMigrateReservationOptions",
    "PodMigrationJob",
    "PodMigrationJobCondition",
    "PodMigrationJobPreemptedReservation",
    "PodMigrationJobSpec",
    "PodMigrationJobStatus",
    "PodMigrationPreemptionOptions",
    "Preconditions",
]


class PodMigrationPreemptionOptions(KoordModel):
    """Reserved for future use; always empty."""


class PodMigrateReservationOptions(KoordModel):
    """Which reservation the migrated pod lands in."""

    reservation_ref: ObjectReference | None = None
    """An existing reservation to use; when unset the controller creates one from template and
    records it here."""
    template: PreserveUnknownObject | None = None
    """ReservationTemplateSpec ({metadata, spec: ReservationSpec}), stored without validation,
    used to create the reservation when reservationRef is unset."""
    preemption_options: PodMigrationPreemptionOptions | None = None
    """Whether to preempt other pods (reserved for future use)."""


class Preconditions(KoordModel):
    """metav1.Preconditions: what must still hold for the delete to proceed."""

    uid: str | None = None
    """The target UID."""
    resource_version: str | None = None
    """The target resourceVersion."""


class DeleteOptions(KoordModel):
    """metav1.DeleteOptions used for the migrated pod and for preempted pods."""

    api_version: str | None = None
    """APIVersion of this representation."""
    kind: str | None = None
    """Kind of this representation."""
    grace_period_seconds: Int64 | None = None
    """Seconds before the object is deleted; 0 deletes immediately, unset uses the default."""
    preconditions: Preconditions | None = None
    """Must hold before the deletion is carried out, else 409 Conflict."""
    orphan_dependents: bool | None = None
    """Deprecated: use propagationPolicy."""
    propagation_policy: str | None = None
    """Orphan, Background or Foreground."""
    dry_run: list[str] | None = None
    """When present, modifications are not persisted; the only value is All."""
    ignore_store_read_error_with_cluster_breaking_potential: bool | None = None
    """Delete even if the object cannot be read from storage (unsafe)."""


class PodMigrationJobSpec(KoordModel):
    """Which pod to migrate and how."""

    paused: bool | None = None
    """Whether the job is paused; unset means false."""
    ttl: GoDuration | None = None
    """Timeout of the job; the descheduler defaults it to 5m."""
    mode: str | None = None
    """ReservationFirst or EvictDirectly (not enforced by the schema); the descheduler defaults
    it to ReservationFirst."""
    pod_ref: ObjectReference
    """The pod to migrate."""
    reservation_options: PodMigrateReservationOptions | None = None
    """Reservation to migrate into."""
    delete_options: DeleteOptions | None = None
    """Options for deleting the migrated pod and preempted pods."""


class PodMigrationJobCondition(KoordModel):
    """One condition of a migration job."""

    type: str
    """ReservationCreated, ReservationScheduled, Preemption, Eviction, PodScheduled,
    PodBoundReservation, BoundPodReady or ReservationBound."""
    status: str
    """True, False or Unknown (not enforced by the schema)."""
    last_probe_time: Time | None = Field(default=None, json_schema_extra={"nullable": True})
    """Last time the condition was probed."""
    last_transition_time: Time | None = Field(default=None, json_schema_extra={"nullable": True})
    """Last time the condition changed status."""
    reason: str | None = None
    """One-word CamelCase reason, e.g. Timeout, Unschedulable, Evicting, EvictComplete."""
    message: str | None = None
    """Human-readable details."""


class PodMigrationJobPreemptedReservation(KoordModel):
    """A reservation created for pods preempted by the migration."""

    namespace: str | None = None
    """Namespace of the reservation."""
    name: str | None = None
    """Name of the reservation."""
    node_name: str | None = None
    """Node the reservation was scheduled to."""
    phase: str | None = None
    """Phase of the reservation."""
    preempted_pod_ref: ObjectReference | None = None
    """The preempted pod."""
    pods_ref: list[ObjectReference] | None = None
    """Pods created after the preemption."""


class PodMigrationJobStatus(KoordModel):
    """Progress of the migration."""

    phase: str | None = None
    """Pending, Running, Succeeded, Failed or Aborted (not enforced by the schema)."""
    status: str | None = None
    """Free-form sub-state, e.g. ReservationCreated."""
    reason: str | None = None
    """Brief CamelCase reason for the current state."""
    message: str | None = None
    """Human-readable details of the current state."""
    conditions: list[PodMigrationJobCondition] | None = None
    """Conditions of the job."""
    node_name: str | None = None
    """Node of the migrated pod."""
    pod_ref: ObjectReference | None = None
    """The replacement pod."""
    preempted_pods_ref: list[ObjectReference] | None = None
    """Pods preempted by the migration."""
    preempted_pods_reservation: list[PodMigrationJobPreemptedReservation] | None = None
    """Reservations created for preempted pods (singular JSON name, list value)."""


class PodMigrationJob(KoordResource):
    """PodMigrationJob migrates one pod via a reservation, then evicts the original."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="scheduling.koordinator.sh",
        version="v1alpha1",
        kind="PodMigrationJob",
        plural="podmigrationjobs",
        singular="podmigrationjob",
        scope="Cluster",
        short_names=("pmj",),
        status_subresource=True,
        printer_columns=(
            PrinterColumn(
                name="Phase",
                type="string",
                json_path=".status.phase",
                description="The phase of PodMigrationJob",
            ),
            PrinterColumn(
                name="Status",
                type="string",
                json_path=".status.status",
                description="The status of PodMigrationJob",
            ),
            PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
            PrinterColumn(name="Node", type="string", json_path=".status.nodeName"),
            PrinterColumn(
                name="Reservation",
                type="string",
                json_path=".spec.reservationOptions.reservationRef.name",
            ),
            PrinterColumn(name="PodNamespace", type="string", json_path=".spec.podRef.namespace"),
            PrinterColumn(name="Pod", type="string", json_path=".spec.podRef.name"),
            PrinterColumn(name="NewPod", type="string", json_path=".status.podRef.name"),
            PrinterColumn(name="TTL", type="string", json_path=".spec.ttl"),
        ),
    )

    spec: PodMigrationJobSpec | None = None
    """Which pod to migrate and how."""
    status: PodMigrationJobStatus | None = None
    """Progress of the migration."""
