"""ClusterColocationProfile (``config.koordinator.sh/v1alpha1``, cluster-scoped).

The koord-manager pod webhook applies every matching profile, in lexicographic order of profile
name, to new pods (and the Reservation webhook to reservation templates).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from apis.base import CRDInfo, KoordModel
from apis.meta import KoordResource, LabelSelector
from apis.types import Int32, IntOrString, PreserveUnknownObject

__all__ = [
    "ClusterColocationProfile",
    "ClusterColocationProfileSpec",
    "ClusterColocationProfileStatus",
]


class ClusterColocationProfileSpec(KoordModel):
    """Which pods a profile matches and what it injects into them."""

    namespace_selector: LabelSelector | None = None
    """Matches the pod's namespace; empty matches every namespace."""
    selector: LabelSelector | None = None
    """Matches the pod's labels; empty matches every pod."""
    probability: IntOrString | None = None
    """Chance the profile applies, as a percentage: 50 or "50%"."""
    qos_class: Literal["LSE", "LSR", "LS", "BE", "SYSTEM"] | None = None
    """Koordinator QoS class, written to the pod label koordinator.sh/qosClass."""
    priority_class_name: str | None = None
    """PriorityClass to set on the pod; its value and preemptionPolicy are copied too, so it
    must exist."""
    koordinator_priority: Int32 | None = None
    """Sub-priority written to the pod label koordinator.sh/priority."""
    labels: dict[str, str] | None = None
    """Labels merged into the pod."""
    annotations: dict[str, str] | None = None
    """Annotations merged into the pod."""
    label_keys_mapping: dict[str, str] | None = None
    """For each k -> k2, the pod gets label k2 with the value of its label k."""
    annotation_keys_mapping: dict[str, str] | None = None
    """For each k -> k2, the pod gets annotation k2 with the value of its annotation k."""
    label_suffixes: dict[str, str] | None = None
    """For each k -> s, appends s to the value of the pod's existing label k."""
    scheduler_name: str | None = None
    """Scheduler the pod is dispatched to."""
    patch: PreserveUnknownObject | None = None
    """Strategic merge patch applied to the pod (stored without validation)."""


class ClusterColocationProfileStatus(KoordModel):
    """Always empty."""


class ClusterColocationProfile(KoordResource):
    """ClusterColocationProfile mutates matching pods for colocation (QoS, priority, scheduler)."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="config.koordinator.sh",
        version="v1alpha1",
        kind="ClusterColocationProfile",
        plural="clustercolocationprofiles",
        singular="clustercolocationprofile",
        scope="Cluster",
        status_subresource=True,
    )

    spec: ClusterColocationProfileSpec | None = None
    """Which pods match and what is injected."""
    status: ClusterColocationProfileStatus | None = None
    """Always empty."""
