"""The selectors of the objects that own or front pods: core/v1 Service and ReplicationController,
apps/v1 ReplicaSet and StatefulSet.

kube-scheduler's PodTopologySpread builds the selector of its default constraints from these
(``helper.DefaultSelector``); nothing else of them is read, so only metadata and the selector are
modelled. Unknown fields are ignored.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from apis.base import KoordModel, ResourceInfo
from apis.meta import LabelSelector, ObjectMeta

__all__ = [
    "ReplicaSet",
    "ReplicationController",
    "SelectorSpec",
    "Service",
    "StatefulSet",
    "WorkloadSpec",
]


class SelectorSpec(KoordModel):
    """A Service's or ReplicationController's spec: a plain label map (null selects nothing)."""

    selector: dict[str, str] | None = None


class WorkloadSpec(KoordModel):
    """A ReplicaSet's or StatefulSet's spec: a ``metav1.LabelSelector``."""

    selector: LabelSelector | None = None


class Service(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="", version="v1", kind="Service", plural="services", singular="service", scope="Namespaced"
    )

    api_version: str | None = "v1"
    kind: str | None = "Service"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SelectorSpec = Field(default_factory=SelectorSpec)


class ReplicationController(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="",
        version="v1",
        kind="ReplicationController",
        plural="replicationcontrollers",
        singular="replicationcontroller",
        scope="Namespaced",
    )

    api_version: str | None = "v1"
    kind: str | None = "ReplicationController"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SelectorSpec = Field(default_factory=SelectorSpec)


class ReplicaSet(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="apps",
        version="v1",
        kind="ReplicaSet",
        plural="replicasets",
        singular="replicaset",
        scope="Namespaced",
    )

    api_version: str | None = "apps/v1"
    kind: str | None = "ReplicaSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)


class StatefulSet(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="apps",
        version="v1",
        kind="StatefulSet",
        plural="statefulsets",
        singular="statefulset",
        scope="Namespaced",
    )

    api_version: str | None = "apps/v1"
    kind: str | None = "StatefulSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)
