"""The parity harness's data: the node set and the workloads, as typed descriptions loaded from YAML.

A workload is a list of steps; each step is a list of pod sets created together, and the next step
starts only when every pod of this one is bound or marked unschedulable and nothing has changed for
a moment. Steps make placements that depend on earlier pods (affinity to a labelled pod, a guard's
anti-affinity) deterministic. Each workload runs in its own namespace and its pods are deleted
before the next workload starts, so workloads never see each other's pods.

Pod sets use the core/v1 models of ``apis.core`` for their constraints, so a field spelled wrong is
an error when the file is loaded, not a constraint silently missing from both runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from apis.core import Affinity, ContainerPort, TopologySpreadConstraint, Volume
from apis.meta import Toleration
from apis.quantity import Quantity
from scheduler.simulator.description import ClusterDescription

__all__ = [
    "NODES_FILE",
    "OBJECT_PATHS",
    "VOLUMES_ENV",
    "WORKLOADS_ENV",
    "WORKLOADS_FILE",
    "PodSet",
    "Step",
    "Workload",
    "load_nodes",
    "load_workloads",
]

HERE = Path(__file__).parent
NODES_FILE = HERE / "nodes.yaml"
WORKLOADS_FILE = HERE / "workloads.yaml"
NODES_ENV = "KOORD_PARITY_NODES"
WORKLOADS_ENV = "KOORD_PARITY_WORKLOADS"
VOLUMES_ENV = "KOORD_PARITY_VOLUMES"
"""``0``: skip the workloads marked ``needs: volumes`` (PersistentVolumes and claims)."""
OBJECT_PATHS = {
    "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
    "PersistentVolume": "/api/v1/persistentvolumes",
    "PersistentVolumeClaim": "/api/v1/namespaces/{namespace}/persistentvolumeclaims",
}
"""The kinds a step may create besides pods, and where they are POSTed."""
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class PodSet(_Model):
    """``replicas`` pods named ``<name>-<i>``, one container requesting ``cpu`` and ``memory``."""

    name: str
    replicas: int = Field(default=1, ge=1)
    labels: dict[str, str] = Field(default_factory=dict)
    cpu: Quantity = Field(default_factory=lambda: Quantity.parse("100m"))
    memory: Quantity = Field(default_factory=lambda: Quantity.parse("128Mi"))
    image: str = PAUSE_IMAGE
    ports: list[ContainerPort] = Field(default_factory=list)
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    volumes: list[Volume] | None = None
    """A ``persistentVolumeClaim`` names a claim among the step's ``objects``."""

    def manifests(self, namespace: str, scheduler_name: str) -> list[dict[str, Any]]:
        container: dict[str, Any] = {
            "name": "main",
            "image": self.image,
            "resources": {"requests": {"cpu": str(self.cpu), "memory": str(self.memory)}},
        }
        if self.ports:
            container["ports"] = [p.to_wire() for p in self.ports]
        spec: dict[str, Any] = {"schedulerName": scheduler_name, "containers": [container]}
        if self.node_selector is not None:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.affinity is not None:
            spec["affinity"] = self.affinity.to_wire()
        if self.tolerations is not None:
            spec["tolerations"] = [t.to_wire() for t in self.tolerations]
        if self.topology_spread_constraints is not None:
            spec["topologySpreadConstraints"] = [c.to_wire() for c in self.topology_spread_constraints]
        if self.volumes is not None:
            spec["volumes"] = [v.to_wire() for v in self.volumes]
        return [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{self.name}-{i}", "namespace": namespace, "labels": dict(self.labels)},
                "spec": spec,
            }
            for i in range(self.replicas)
        ]


class Step(_Model):
    pods: list[PodSet] = Field(min_length=1)
    objects: list[dict[str, Any]] = Field(default_factory=list)
    """StorageClasses, PersistentVolumes and PersistentVolumeClaims created before the pods, as
    written (no model of ours lists their fields), except that ``{namespace}`` in any string becomes
    the run's namespace: cluster-scoped names carry it so that the two runs never share one."""

    @field_validator("objects")
    @classmethod
    def _known_kinds(cls, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for obj in objects:
            if obj.get("kind") not in OBJECT_PATHS:
                raise ValueError(f"kind {obj.get('kind')!r} is not one of {', '.join(OBJECT_PATHS)}")
        return objects

    def manifests_of_objects(self, namespace: str) -> list[dict[str, Any]]:
        return [_substitute(obj, namespace) for obj in self.objects]


class Workload(_Model):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")
    """Also the namespace's suffix: lowercase, digits and dashes."""
    description: str = ""
    plugins: list[str] = Field(default_factory=list)
    """The upstream plugins whose semantics the workload exercises (for the report)."""
    needs: Literal["volumes"] | None = None
    """``volumes``: skipped with ``KOORD_PARITY_VOLUMES=0``."""
    steps: list[Step] = Field(min_length=1)

    def pods(self) -> int:
        return sum(p.replicas for s in self.steps for p in s.pods)

    def enabled(self) -> bool:
        return self.needs is None or os.environ.get(VOLUMES_ENV, "1") != "0"


def _substitute(value: Any, namespace: str) -> Any:
    if isinstance(value, str):
        return value.replace("{namespace}", namespace)
    if isinstance(value, list):
        return [_substitute(v, namespace) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, namespace) for k, v in value.items()}
    return value


def load_nodes(path: Path | None = None) -> ClusterDescription:
    """The node set: ``path``, else ``$KOORD_PARITY_NODES``, else ``e2e/parity/nodes.yaml``."""
    chosen = path or Path(os.environ.get(NODES_ENV) or NODES_FILE)
    return ClusterDescription.model_validate(yaml.safe_load(chosen.read_text()) or {})


def load_workloads(path: Path | None = None) -> list[Workload]:
    """The workloads: ``path``, else ``$KOORD_PARITY_WORKLOADS``, else ``e2e/parity/workloads.yaml``
    (a YAML list of workloads); names must be unique."""
    chosen = path or Path(os.environ.get(WORKLOADS_ENV) or WORKLOADS_FILE)
    workloads = [Workload.model_validate(w) for w in yaml.safe_load(chosen.read_text()) or []]
    names = [w.name for w in workloads]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{chosen}: workload names must be unique, repeated: {', '.join(repeated)}")
    return workloads
