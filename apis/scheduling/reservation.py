"""Reservation (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped): resources held for owners.

The scheduler places a reservation like a pod built from ``spec.template`` and later lets only
matching owner pods consume what it holds.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from apis.base import CRDInfo, KoordModel, PrinterColumn
from apis.meta import KoordResource, LabelSelector, ObjectReference, OwnerReference, Taint
from apis.quantity import Quantity
from apis.types import GoDuration, PreserveUnknownObject, Time

__all__ = [
    "Reservation",
    "ReservationCondition",
    "ReservationControllerReference",
    "ReservationOwner",
    "ReservationPreAllocationPolicy",
    "ReservationSpec",
    "ReservationStatus",
    "template_pod_spec",
]


class ReservationControllerReference(OwnerReference):
    """An OwnerReference of the owner pods' controller, plus the controller's namespace."""

    namespace: str | None = None
    """Namespace of the controller object."""


class ReservationOwner(KoordModel):
    """One owner selector; at least one field must be set, and the fields set are ANDed."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    object: ObjectReference | None = None
    """Matches one specific object (usually a pod)."""
    controller: ReservationControllerReference | None = None
    """Matches pods controlled by this controller."""
    label_selector: LabelSelector | None = None
    """Matches pods whose labels satisfy this selector."""

    @model_validator(mode="after")
    def _at_least_one(self) -> ReservationOwner:
        if self.object is None and self.controller is None and self.label_selector is None:
            raise ValueError("an owner must set at least one of object, controller, labelSelector")
        return self


class ReservationPreAllocationPolicy(KoordModel):
    """How pre-allocatable pods are chosen when ``preAllocation`` is true."""

    mode: Literal["Default", "Cluster"] = "Default"
    """Default picks candidates by the reservation's owners; Cluster by the cluster-wide
    pre-allocation label and annotation."""
    enable_multiple: bool = False
    """Allow several pods to be pre-allocated instead of exactly one."""


class ReservationSpec(KoordModel):
    """What to reserve, for whom, and for how long."""

    template: PreserveUnknownObject
    """PodTemplateSpec (stored without validation) giving resources, affinity, tolerations and
    priority; template.spec.nodeName pins the node, and template.spec.schedulerName must name
    koord-scheduler (empty means default-scheduler)."""
    owners: list[ReservationOwner] = Field(min_length=1)
    """Owner selectors that may allocate the reserved resources; the items are ORed."""
    ttl: GoDuration = "24h"
    """Time to live; "0s" disables expiry. Mutually exclusive with expires."""
    expires: Time | None = None
    """Absolute expiry time, checked before ttl; mutually exclusive with ttl."""
    pre_allocation: bool | None = None
    """Allow placement on a node whose free resources are not yet enough; the reservation
    waits or pre-allocates from running pods. Unset means false."""
    allocate_once: bool = True
    """Only the first owner that allocates successfully may use the reservation."""
    allocate_policy: Literal["Aligned", "Restricted"] | None = None
    """Aligned: take from the reservation first and the rest from the node; Restricted:
    resources overlapping the reservation may come only from it. Unset is the deprecated
    Default policy, treated as Aligned."""
    unschedulable: bool | None = None
    """When true, no new pods may use the reservation."""
    taints: list[Taint] | None = None
    """Taints that owner pods must tolerate in their reservation-affinity; NoExecute does not
    evict."""
    pre_allocation_policy: ReservationPreAllocationPolicy | None = None
    """How pre-allocatable pods are chosen."""


class ReservationCondition(KoordModel):
    """One condition of a reservation; no field is required."""

    type: str | None = None
    """Scheduled or Ready."""
    status: str | None = None
    """True, False or Unknown (not enforced by the schema)."""
    reason: str | None = None
    """Scheduled, Unschedulable, Available, Succeeded or Expired."""
    message: str | None = None
    """Human-readable details."""
    last_probe_time: Time | None = None
    """Last time the condition was probed."""
    last_transition_time: Time | None = None
    """Last time the condition changed status."""


class ReservationStatus(KoordModel):
    """Where the reservation stands and what it holds."""

    phase: str = "Pending"
    """Pending, Available, Waiting, Succeeded or Failed (not enforced by the schema)."""
    conditions: list[ReservationCondition] | None = None
    """Why the reservation is pending, or why it became unavailable."""
    current_owners: list[ObjectReference] | None = None
    """Pods currently consuming the reservation."""
    node_name: str | None = None
    """Node the reservation is bound to."""
    allocatable: dict[str, Quantity] | None = None
    """Total reserved resources."""
    allocated: dict[str, Quantity] | None = None
    """Resources consumed by the current owners."""


class Reservation(KoordResource):
    """Reservation holds node resources for the pods its owners select (cluster-scoped)."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="scheduling.koordinator.sh",
        version="v1alpha1",
        kind="Reservation",
        plural="reservations",
        singular="reservation",
        scope="Cluster",
        status_subresource=True,
        printer_columns=(
            PrinterColumn(
                name="Phase",
                type="string",
                json_path=".status.phase",
                description="The phase of reservation",
            ),
            PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
            PrinterColumn(name="Node", type="string", json_path=".status.nodeName"),
            PrinterColumn(name="TTL", type="string", json_path=".spec.ttl"),
            PrinterColumn(name="Expires", type="string", json_path=".spec.expires"),
            # Not Koordinator's: the API server prints the first match of a list path, so with
            # allocateOnce: false and several owners this shows the first (currentOwners is sorted by uid).
            PrinterColumn(
                name="Owners",
                type="string",
                json_path=".status.currentOwners[*].name",
                description="The pods that allocated the reservation (the first, when several)",
            ),
        ),
    )

    spec: ReservationSpec | None = None
    """What to reserve and for whom."""
    status: ReservationStatus | None = None
    """Scheduling and allocation state."""


def template_pod_spec(template: dict[str, Any] | None) -> dict[str, Any]:
    """A schemaless ``spec.template``'s pod spec as a pod needs it. Koordinator stores the template
    without validation and its own manifests leave out what Go's zero values fill in (a container
    with no ``name``): each unnamed container gets one (``container-<i>``, ``init-container-<i>``
    for init containers), unique within the pod. Anything else is left as written."""
    spec = dict((template or {}).get("spec") or {})
    for field, prefix in (("containers", "container"), ("initContainers", "init-container")):
        containers = spec.get(field)
        if not isinstance(containers, list):
            continue
        # Only names that are strings are taken: any other (a hostile template) is left for the
        # pod spec's validation to refuse, naming the field.
        taken = {c["name"] for c in containers if isinstance(c, dict) and isinstance(c.get("name"), str)}
        filled: list[Any] = []
        for i, container in enumerate(containers):
            if isinstance(container, dict) and not container.get("name"):
                name = f"{prefix}-{i}"
                while name in taken:
                    name += "-x"
                taken.add(name)
                container = {**container, "name": name}
            filled.append(container)
        spec[field] = filled
    return spec
