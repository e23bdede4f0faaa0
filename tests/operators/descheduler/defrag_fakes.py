"""An in-memory ClusterObjects (the descheduler handle's API) and makers for the GangDefragmentation
scenario tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from apis.core import Node, Pod
from apis.scheduling.networktopology import ClusterNetworkTopology
from apis.scheduling.podgroup import PodGroup
from apis.scheduling.reservation import Reservation, ReservationStatus
from tests.operators.descheduler.fakes import NOW

__all__ = ["FakeDefragClient", "gang_member", "node", "pod_group", "rack_topology", "running_pod"]


@dataclass
class FakeDefragClient:
    groups: list[PodGroup] = field(default_factory=list)
    unbound: list[Pod] = field(default_factory=list)
    cnt: ClusterNetworkTopology | None = None
    created: dict[str, Reservation] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str, str]] = field(default_factory=list)

    async def pod_groups(self) -> list[PodGroup]:
        return [g.model_copy(deep=True) for g in self.groups]

    async def unbound_pods(self) -> list[Pod]:
        return list(self.unbound)

    async def topology(self) -> ClusterNetworkTopology | None:
        return self.cnt

    async def reservations(self, label_selector: str) -> list[Reservation]:
        return [r for r in self.created.values() if label_selector in (r.metadata.labels or {})]

    async def create_reservation(self, reservation: Reservation) -> bool:
        name = reservation.metadata.name or ""
        if name in self.created:
            return False
        self.created[name] = reservation.model_copy(deep=True)
        return True

    async def delete_reservation(self, name: str) -> None:
        if self.created.pop(name, None) is not None:
            self.deleted.append(name)

    async def annotate_pod_group(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        for pg in self.groups:
            if pg.metadata.namespace == namespace and pg.metadata.name == name:
                current = dict(pg.metadata.annotations or {})
                for key, value in annotations.items():
                    if value is None:
                        current.pop(key, None)
                    else:
                        current[key] = value
                pg.metadata.annotations = current

    async def pod_group_event(
        self, pod_group: PodGroup, reason: str, message: str, type_: str = "Normal"
    ) -> None:
        self.events.append((pod_group.metadata.name or "", reason, message, type_))

    def place(self, name: str, node: str, phase: str = "Available") -> None:
        """What koord-scheduler does with a Reservation: place it (or fail it)."""
        reservation = self.created[name]
        template = reservation.spec.template if reservation.spec else {}
        requests = template["spec"]["containers"][0]["resources"]["requests"]
        reservation.status = ReservationStatus.model_validate(
            {"phase": phase, "nodeName": node, "allocatable": requests}
        )

    @property
    def reasons(self) -> list[str]:
        return [reason for _, reason, _, _ in self.events]

    def pod_group(self, name: str) -> PodGroup:
        return next(pg for pg in self.groups if pg.metadata.name == name)


def node(name: str, rack: str | None, cpu: str = "4") -> Node:
    labels = {"rack": rack} if rack else {}
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
        }
    )


def rack_topology() -> ClusterNetworkTopology:
    return ClusterNetworkTopology.model_validate(
        {
            "metadata": {"name": "default"},
            "spec": {
                "networkTopologySpec": [
                    {
                        "topologyLayer": "RackLayer",
                        "parentTopologyLayer": "ClusterTopologyLayer",
                        "labelKey": ["rack"],
                    },
                    {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "RackLayer"},
                ]
            },
        }
    )


def running_pod(
    name: str,
    node_name: str,
    cpu: str = "1",
    priority: int = 0,
    owner: tuple[str, str] | None = ("ReplicaSet", "web"),
    ready: bool = True,
) -> Pod:
    """A Ready pod of a workload (``owner``: kind, name; its uid is ``uid-<name>``); None: bare."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "labels": {"app": "web"},
    }
    if owner is not None:
        kind, owner_name = owner
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "name": owner_name,
                "uid": f"uid-{owner_name}",
                "controller": True,
            }
        ]
    return Pod.model_validate(
        {
            "metadata": metadata,
            "spec": {
                "nodeName": node_name,
                "schedulerName": "koord-scheduler",
                "priority": priority,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
    )


def gang_member(name: str, group: str, cpu: str = "4", priority: int = 100, waited: float = 120.0) -> Pod:
    """An unbound member the scheduler found no place for ``waited`` seconds ago."""
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"uid-{name}",
                "labels": {"pod-group.scheduling.sigs.k8s.io": group},
            },
            "spec": {
                "schedulerName": "koord-scheduler",
                "priority": priority,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            },
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "lastTransitionTime": (NOW - timedelta(seconds=waited)).isoformat(),
                    }
                ],
            },
        }
    )


def pod_group(name: str, min_member: int, gather: str | None = "RackLayer") -> PodGroup:
    annotations = {}
    if gather:
        annotations["gang.scheduling.koordinator.sh/network-topology-spec"] = (
            f'{{"gatherStrategy":[{{"layer":"{gather}","strategy":"MustGather"}}]}}'
        )
    return PodGroup.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"uid-{name}",
                "annotations": annotations,
            },
            "spec": {"minMember": min_member},
        }
    )
