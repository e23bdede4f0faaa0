"""PodGroup (``scheduling.sigs.k8s.io/v1alpha1``): a gang of pods scheduled all-or-nothing.

Koordinator's own copy of the scheduler-plugins type. There is no status subresource: the
PodGroup controller in koord-scheduler writes ``status`` through the main resource.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from apis.base import CRDInfo, KoordModel, PrinterColumn
from apis.meta import Condition, KoordResource
from apis.quantity import Quantity
from apis.types import Int32, Time

__all__ = ["PodGroup", "PodGroupSpec", "PodGroupStatus"]


class PodGroupSpec(KoordModel):
    """The desired shape of the gang."""

    min_member: Int32 | None = Field(default=None, ge=0)
    """Minimum number of member pods that must be schedulable together; unset reads as 0.
    koordinator-py rejects negative values (a product-owner deviation: Koordinator's schema
    has no minimum)."""
    min_resources: dict[str, Quantity] | None = None
    """Minimum total resources the members need before any of them is started."""
    schedule_timeout_seconds: Int32 | None = None
    """How long members wait for the whole gang; used only when > 0, otherwise the scheduler's
    CoschedulingArgs.defaultTimeout (600s) applies."""


class PodGroupStatus(KoordModel):
    """What the PodGroup controller observed; may lag behind the member pods."""

    phase: str | None = None
    """Current phase (not enforced by the schema): Pending, PreScheduling, Scheduling, Scheduled,
    Running, Unknown, Finished or Failed. The controller turns an empty phase into Pending."""
    occupied_by: str | None = None
    """Sorted, comma-joined namespace/ownerName of the first member pod's owner references
    (the upstream comment says workload UID, which is not what is written)."""
    scheduled: Int32 | None = None
    """Number of member pods bound by the scheduler."""
    running: Int32 | None = None
    """Number of member pods running."""
    succeeded: Int32 | None = None
    """Number of member pods that reached phase Succeeded."""
    failed: Int32 | None = None
    """Number of member pods that reached phase Failed."""
    schedule_start_time: Time | None = None
    """When the group first entered the Scheduling phase."""
    conditions: list[Condition] | None = None
    """A koordinator-py addition (Koordinator's and scheduler-plugins' PodGroup have no
    conditions; optional, so their YAML stays valid). koord-scheduler owns it: with
    ``--whatif-advice-seconds`` it writes ``Schedulable`` (False while the gang is unschedulable,
    reason ``Unschedulable``, the message naming the dominant blocker and the smallest change the
    what-if found, as Kueue's pending Workloads and kube-scheduler's PodScheduled say why; True,
    reason ``NoPendingMembers``, once no member is pending). koord-manager leaves it alone."""


class PodGroup(KoordResource):
    """PodGroup is a collection of pods scheduled as a gang (all or nothing)."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="scheduling.sigs.k8s.io",
        version="v1alpha1",
        kind="PodGroup",
        plural="podgroups",
        singular="podgroup",
        scope="Namespaced",
        # Product-owner additions; Koordinator's CRD has neither short names nor columns.
        short_names=("pg", "pgs"),
        status_subresource=False,
        printer_columns=(
            PrinterColumn(name="MINMEMBER", type="integer", json_path=".spec.minMember"),
            PrinterColumn(name="PHASE", type="string", json_path=".status.phase"),
            PrinterColumn(name="SCHEDULED", type="integer", json_path=".status.scheduled"),
            PrinterColumn(name="AGE", type="date", json_path=".metadata.creationTimestamp"),
        ),
    )

    spec: PodGroupSpec | None = None
    """Specification of the desired behavior of the pod group."""
    status: PodGroupStatus | None = None
    """Current information about the pod group, written through the main resource."""
