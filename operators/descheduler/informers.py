"""The descheduler's informer caches: the objects Kopf's watches deliver, kept by key with the
indexes the policy plugins and the MigrationController read (pods by node and by owner).

``Store`` is fed by ``operators.descheduler.handlers`` (one ``on.event`` handler per kind) and
read without I/O: it implements the reads of ``DeschedulerHandle`` and the MigrationController's
``ClusterView``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from apis.base import KoordModel
from apis.core import Node, Pod
from apis.meta import LabelSelector, ObjectMeta
from apis.podkey import PodRef, namespaced_ref, pod_ref
from apis.scheduling.podmigrationjob import PodMigrationJob
from apis.scheduling.reservation import Reservation
from apis.slo.nodemetric import NodeMetric
from operators.descheduler.logic.view import Origin, Workload, controller_of

__all__ = ["SYNCED_KINDS", "WORKLOAD_KINDS", "ScaledObject", "Store", "WorkloadKind"]


class _Replicas(KoordModel):
    replicas: int = 1
    selector: LabelSelector | None = None


class ScaledObject(KoordModel):
    """Any controller with ``spec.replicas``: Deployment, ReplicaSet, StatefulSet, CloneSet ..."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: _Replicas = Field(default_factory=_Replicas)


@dataclass(frozen=True)
class WorkloadKind:
    group: str
    version: str
    plural: str
    kind: str


WORKLOAD_KINDS = (
    WorkloadKind("", "v1", "replicationcontrollers", "ReplicationController"),
    WorkloadKind("apps", "v1", "deployments", "Deployment"),
    WorkloadKind("apps", "v1", "replicasets", "ReplicaSet"),
    WorkloadKind("apps", "v1", "statefulsets", "StatefulSet"),
    WorkloadKind("apps.kruise.io", "v1alpha1", "clonesets", "CloneSet"),
    WorkloadKind("apps.kruise.io", "v1beta1", "statefulsets", "StatefulSet"),
)
"""The controllers resolved from the cache (Koordinator's controllerfinder, in its order); any other
kind is resolved through its ``/scale`` subresource (``Store.scales``)."""

SYNCED_KINDS = {
    "pods": "/api/v1/pods",
    "nodes": "/api/v1/nodes",
    "nodemetrics": "/apis/slo.koordinator.sh/v1alpha1/nodemetrics",
}
"""The caches a descheduling round reads, by the collection a sync gate lists (``Store.missing``)."""


class Store:
    def __init__(self, node_selector: Callable[[Node], bool] | None = None) -> None:
        self._pods: dict[PodRef, Pod] = {}
        self._pod_specs: dict[PodRef, dict[str, Any]] = {}
        self._by_node: defaultdict[str, set[PodRef]] = defaultdict(set)
        self._by_owner: defaultdict[str, set[PodRef]] = defaultdict(set)
        self._nodes: dict[str, Node] = {}
        self._metrics: dict[str, NodeMetric] = {}
        self._jobs: dict[str, PodMigrationJob] = {}
        self._reservations: dict[str, Reservation] = {}
        self._workloads: dict[tuple[str, str, str, str], ScaledObject] = {}
        """(group, kind, namespace, name) -> object."""
        self._origins: dict[str, Origin] = {}
        """Job name -> where its pod was, kept until the job is deleted."""
        self.scales: dict[str, int] = {}
        """Owner uid -> replicas, for kinds read through ``/scale`` (filled by the controller)."""
        self.node_selector = node_selector

    # ------------------------------------------------------------------ writes (watch events)

    def upsert_pod(self, raw: Mapping[str, Any]) -> None:
        pod = Pod.model_validate(raw)
        key = pod_ref(pod)
        self.delete_pod(*key)
        self._pods[key] = pod
        self._pod_specs[key] = dict(raw.get("spec") or {})
        if pod.spec.node_name:
            self._by_node[pod.spec.node_name].add(key)
        for ref in pod.metadata.owner_references or ():
            self._by_owner[ref.uid].add(key)

    def delete_pod(self, namespace: str, name: str) -> None:
        key = namespaced_ref(namespace, name)
        old = self._pods.pop(key, None)
        self._pod_specs.pop(key, None)
        if old is None:
            return
        if old.spec.node_name:
            self._by_node[old.spec.node_name].discard(key)
        for ref in old.metadata.owner_references or ():
            self._by_owner[ref.uid].discard(key)

    def upsert_node(self, raw: Mapping[str, Any]) -> None:
        node = Node.model_validate(raw)
        self._nodes[node.metadata.name or ""] = node

    def delete_node(self, name: str) -> None:
        self._nodes.pop(name, None)

    def upsert_metric(self, raw: Mapping[str, Any]) -> None:
        metric = NodeMetric.model_validate(raw)
        self._metrics[metric.metadata.name or ""] = metric

    def delete_metric(self, name: str) -> None:
        self._metrics.pop(name, None)

    def upsert_job(self, job: PodMigrationJob) -> None:
        """Also called with the object a write returned, so the next read sees our own write."""
        name = job.metadata.name or ""
        old = self._jobs.get(name)
        if old is not None and _older(job, old):
            return
        self._jobs[name] = job
        self.origin(job)

    def delete_job(self, name: str) -> None:
        self._jobs.pop(name, None)
        self._origins.pop(name, None)

    def origin(self, job: PodMigrationJob) -> Origin | None:
        name = job.metadata.name or ""
        ref = job.spec.pod_ref if job.spec else None
        pod = self.pod(ref.namespace or "", ref.name or "") if ref is not None else None
        if pod is not None and (not ref or not ref.uid or ref.uid == pod.metadata.uid):
            workload = self.workload_of(pod)
            self._origins[name] = Origin(pod.spec.node_name, workload.uid if workload else None)
        return self._origins.get(name)

    def upsert_reservation(self, raw: Mapping[str, Any]) -> None:
        reservation = Reservation.model_validate(raw)
        self._reservations[reservation.metadata.name or ""] = reservation

    def delete_reservation(self, name: str) -> None:
        self._reservations.pop(name, None)

    def upsert_workload(self, kind: WorkloadKind, raw: Mapping[str, Any]) -> None:
        obj = ScaledObject.model_validate(raw)
        self._workloads[(kind.group, kind.kind, obj.metadata.namespace or "", obj.metadata.name or "")] = obj

    def delete_workload(self, kind: WorkloadKind, namespace: str, name: str) -> None:
        self._workloads.pop((kind.group, kind.kind, namespace, name), None)

    # ------------------------------------------------------------------ reads

    def missing(self, listed: Mapping[str, set[tuple[str, str]]]) -> dict[str, set[tuple[str, str]]]:
        """Of ``listed`` (``SYNCED_KINDS`` name -> (namespace, name) keys a list returned), what
        the watches have not delivered yet."""
        held: dict[str, set[tuple[str, str]]] = {
            "pods": set(self._pods),
            "nodes": {("", name) for name in self._nodes},
            "nodemetrics": {("", name) for name in self._metrics},
        }
        gaps = {kind: keys - held[kind] for kind, keys in listed.items()}
        return {kind: keys for kind, keys in gaps.items() if keys}

    def pod(self, namespace: str, name: str) -> Pod | None:
        return self._pods.get(namespaced_ref(namespace, name))

    def pod_spec(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._pod_specs.get(namespaced_ref(namespace, name))

    def pods(self) -> Sequence[Pod]:
        return list(self._pods.values())

    def pods_on_node(self, node_name: str) -> Sequence[Pod]:
        return [self._pods[key] for key in sorted(self._by_node.get(node_name, ()))]

    def nodes(self) -> Sequence[Node]:
        nodes = sorted(self._nodes.values(), key=lambda n: n.metadata.name or "")
        return [n for n in nodes if self.node_selector is None or self.node_selector(n)]

    def node(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def node_metric(self, node_name: str) -> NodeMetric | None:
        return self._metrics.get(node_name)

    def jobs(self) -> Sequence[PodMigrationJob]:
        return list(self._jobs.values())

    def job(self, name: str) -> PodMigrationJob | None:
        return self._jobs.get(name)

    def reservation(self, name: str) -> Reservation | None:
        return self._reservations.get(name)

    def _find(self, group: str, kind: str, namespace: str, name: str, uid: str) -> ScaledObject | None:
        obj = self._workloads.get((group, kind, namespace, name))
        return obj if obj is not None and obj.metadata.uid == uid else None

    def _owned(self, uid: str) -> tuple[Pod, ...]:
        return tuple(self._pods[key] for key in sorted(self._by_owner.get(uid, ())))

    def workload_of(self, pod: Pod) -> Workload | None:
        ref = controller_of(pod)
        if ref is None:
            return None
        namespace = pod.metadata.namespace or ""
        group = ref.api_version.split("/")[0] if "/" in ref.api_version else ""
        if group == "apps" and ref.kind == "ReplicaSet":
            replica_set = self._find("apps", "ReplicaSet", namespace, ref.name, ref.uid)
            owner = _controller(replica_set.metadata) if replica_set is not None else None
            if owner is not None and owner.kind == "Deployment":
                deployment = self._find("apps", "Deployment", namespace, owner.name, owner.uid)
                if deployment is not None:
                    return self._deployment(deployment, namespace)
        if group == "apps" and ref.kind == "Deployment":
            deployment = self._find("apps", "Deployment", namespace, ref.name, ref.uid)
            if deployment is not None:
                return self._deployment(deployment, namespace)
        obj = self._find(group, ref.kind, namespace, ref.name, ref.uid)
        replicas = obj.spec.replicas if obj is not None else self.scales.get(ref.uid, 0)
        cached = obj is not None or not _cached_kind(group, ref.kind)
        return Workload(ref.uid, ref.kind, namespace, ref.name, replicas, self._owned(ref.uid), cached)

    def _deployment(self, deployment: ScaledObject, namespace: str) -> Workload:
        uid = deployment.metadata.uid or ""
        pods: list[Pod] = []
        for (group, kind, ns, _), obj in sorted(self._workloads.items()):
            owner = _controller(obj.metadata)
            if (
                (group, kind, ns) == ("apps", "ReplicaSet", namespace)
                and owner is not None
                and owner.uid == uid
            ):
                pods += self._owned(obj.metadata.uid or "")
        return Workload(
            uid,
            "Deployment",
            namespace,
            deployment.metadata.name or "",
            deployment.spec.replicas,
            tuple(pods),
        )

    def needs_scale(self, pod: Pod) -> bool:
        """Is the pod's controller a kind the cache does not hold (resolved through ``/scale``)?"""
        ref = controller_of(pod)
        if ref is None or ref.uid in self.scales:
            return False
        group = ref.api_version.split("/")[0] if "/" in ref.api_version else ""
        return not _cached_kind(group, ref.kind)


def _cached_kind(group: str, kind: str) -> bool:
    return any(k.group == group and k.kind == kind for k in WORKLOAD_KINDS)


def _controller(meta: ObjectMeta) -> Any:
    return next((ref for ref in meta.owner_references or () if ref.controller), None)


def _older(new: PodMigrationJob, old: PodMigrationJob) -> bool:
    try:
        return int(new.metadata.resource_version or 0) < int(old.metadata.resource_version or 0)
    except ValueError:
        return False
