"""Fluent makers for scheduler tests, in the style of scheduler-plugins' ``MakePod().Name().Obj()``.

    pod = make_pod("p").req(cpu="2", memory="4Gi").node_selector(zone="a").toleration("k", "v").obj()
    node = make_node("n1").alloc(cpu="32", memory="64Gi").label("zone", "a").taint("k", "v").obj()
    snapshot = make_snapshot([node], assigned=[make_pod("q").req(cpu="1").on("n1").obj()])

Resource names that are not Python identifiers go in a dict: ``req({"nvidia.com/gpu": "1"}, cpu="1")``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from apis.core import Node, Pod
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot

__all__ = ["NodeBuilder", "PodBuilder", "expr", "make_cache", "make_node", "make_pod", "make_snapshot"]


def _resources(given: Mapping[str, str | int] | None, more: Mapping[str, str | int]) -> dict[str, str]:
    """``given`` verbatim plus keyword resources, ``ephemeral_storage`` spelled ``ephemeral-storage``."""
    return {
        **{n: str(v) for n, v in (given or {}).items()},
        **{n.replace("_", "-"): str(v) for n, v in more.items()},
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    """A NodeSelectorRequirement: ``expr("zone", "In", "a", "b")``."""
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return requirement


class PodBuilder:
    def __init__(self, name: str) -> None:
        self._meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": name}
        self._spec: dict[str, Any] = {"containers": []}

    def namespace(self, namespace: str) -> PodBuilder:
        self._meta["namespace"] = namespace
        return self

    def uid(self, uid: str) -> PodBuilder:
        self._meta["uid"] = uid
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._meta.setdefault("labels", {})[key] = value
        return self

    def created(self, seconds: float) -> PodBuilder:
        self._meta["creationTimestamp"] = datetime.fromtimestamp(seconds, UTC).isoformat()
        return self

    def priority(self, value: int) -> PodBuilder:
        self._spec["priority"] = value
        return self

    def req(self, resources: Mapping[str, str | int] | None = None, **more: str | int) -> PodBuilder:
        """Adds a container requesting these resources (none at all: a container without requests)."""
        container: dict[str, Any] = {"name": f"c{len(self._spec['containers'])}"}
        requests = _resources(resources, more)
        if requests:
            container["resources"] = {"requests": requests}
        self._spec["containers"].append(container)
        return self

    def init_req(
        self, resources: Mapping[str, str | int] | None = None, *, sidecar: bool = False, **more: str | int
    ) -> PodBuilder:
        inits = self._spec.setdefault("initContainers", [])
        container: dict[str, Any] = {
            "name": f"i{len(inits)}",
            "resources": {"requests": _resources(resources, more)},
        }
        if sidecar:
            container["restartPolicy"] = "Always"
        inits.append(container)
        return self

    def host_port(
        self, port: int, protocol: str | None = None, host_ip: str | None = None, *, sidecar: bool = False
    ) -> PodBuilder:
        """Adds a port with ``hostPort`` to the last container (a new one if there is none), or to
        a new sidecar (an init container with ``restartPolicy: Always``)."""
        spec: dict[str, Any] = {"containerPort": port, "hostPort": port}
        if protocol is not None:
            spec["protocol"] = protocol
        if host_ip is not None:
            spec["hostIP"] = host_ip
        if sidecar:
            inits = self._spec.setdefault("initContainers", [])
            inits.append({"name": f"i{len(inits)}", "restartPolicy": "Always", "ports": [spec]})
            return self
        if not self._spec["containers"]:
            self.req()
        self._spec["containers"][-1].setdefault("ports", []).append(spec)
        return self

    def image(self, *images: str, init: bool = False) -> PodBuilder:
        """Adds a container (or a regular init container) per image."""
        key = "initContainers" if init else "containers"
        containers = self._spec.setdefault(key, [])
        for image in images:
            containers.append({"name": f"{key[0]}{len(containers)}", "image": image})
        return self

    def overhead(self, **resources: str) -> PodBuilder:
        self._spec["overhead"] = dict(resources)
        return self

    def on(self, node: str) -> PodBuilder:
        """Assigned to ``node`` (``spec.nodeName``)."""
        self._spec["nodeName"] = node
        return self

    def node_selector(self, selector: Mapping[str, str] | None = None, **labels: str) -> PodBuilder:
        self._spec.setdefault("nodeSelector", {}).update({**(selector or {}), **labels})
        return self

    def toleration(
        self,
        key: str | None = None,
        value: str | None = None,
        effect: str | None = None,
        operator: str | None = None,
    ) -> PodBuilder:
        toleration = {"key": key, "value": value, "effect": effect, "operator": operator}
        self._spec.setdefault("tolerations", []).append(
            {k: v for k, v in toleration.items() if v is not None}
        )
        return self

    def volume(self, name: str, **source: Any) -> PodBuilder:
        """A volume: ``volume("data", persistentVolumeClaim={"claimName": "c"})``."""
        self._spec.setdefault("volumes", []).append({"name": name, **source})
        return self

    def claim(self, claim_name: str, volume: str | None = None) -> PodBuilder:
        """A ``persistentVolumeClaim`` volume (named after the claim unless ``volume`` is given)."""
        return self.volume(volume or claim_name, persistentVolumeClaim={"claimName": claim_name})

    def _node_affinity(self) -> dict[str, Any]:
        affinity: dict[str, Any] = self._spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        return affinity

    def required_term(
        self, *expressions: dict[str, Any], fields: Iterable[dict[str, Any]] = ()
    ) -> PodBuilder:
        """Adds a required nodeSelectorTerm (terms are ORed, its expressions ANDed)."""
        required = self._node_affinity().setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": []}
        )
        term: dict[str, Any] = {}
        if expressions:
            term["matchExpressions"] = list(expressions)
        if fields:
            term["matchFields"] = list(fields)
        required["nodeSelectorTerms"].append(term)
        return self

    def preferred_term(self, weight: int, *expressions: dict[str, Any]) -> PodBuilder:
        preferred = self._node_affinity().setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        preferred.append({"weight": weight, "preference": {"matchExpressions": list(expressions)}})
        return self

    def pod_affinity(
        self, term: dict[str, Any], *, anti: bool = False, weight: int | None = None
    ) -> PodBuilder:
        """Adds a podAffinity (``anti``: podAntiAffinity) term: required, or preferred with ``weight``."""
        kind = "podAntiAffinity" if anti else "podAffinity"
        affinity: dict[str, Any] = self._spec.setdefault("affinity", {}).setdefault(kind, {})
        if weight is None:
            affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
        else:
            preferred = affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
            preferred.append({"weight": weight, "podAffinityTerm": term})
        return self

    def obj(self) -> Pod:
        if not self._spec["containers"]:
            self.req()
        return Pod.model_validate(
            {"metadata": self._meta, "spec": self._spec, "status": {"phase": "Pending"}}
        )

    def info(self) -> PodInfo:
        return PodInfo.of(self.obj())


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._meta: dict[str, Any] = {"name": name, "labels": {}}
        self._spec: dict[str, Any] = {}
        self._allocatable: dict[str, str] = {"pods": "110"}
        self._images: list[dict[str, Any]] = []

    def alloc(self, resources: Mapping[str, str | int] | None = None, **more: str | int) -> NodeBuilder:
        """Allocatable resources (``pods`` defaults to 110 as a kubelet's does)."""
        self._allocatable.update(_resources(resources, more))
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._meta["labels"][key] = value
        return self

    def taint(self, key: str, value: str | None = None, effect: str = "NoSchedule") -> NodeBuilder:
        taint = {"key": key, "effect": effect}
        if value is not None:
            taint["value"] = value
        self._spec.setdefault("taints", []).append(taint)
        return self

    def images(self, *images: tuple[list[str], int]) -> NodeBuilder:
        """``status.images``: (names, sizeBytes) per image."""
        self._images = [{"names": names, "sizeBytes": size} for names, size in images]
        return self

    def unschedulable(self) -> NodeBuilder:
        self._spec["unschedulable"] = True
        return self

    def obj(self) -> Node:
        return Node.model_validate(
            {
                "metadata": self._meta,
                "spec": self._spec,
                "status": {
                    "allocatable": self._allocatable,
                    **({"images": self._images} if self._images else {}),
                },
            }
        )


def make_pod(name: str) -> PodBuilder:
    return PodBuilder(name)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def make_cache(nodes: Iterable[Node], assigned: Iterable[Pod] = ()) -> Cache:
    """A cache holding ``nodes`` and the pods already on them (each pod must have ``nodeName``)."""
    cache = Cache()
    for node in nodes:
        cache.upsert_node(node)
    for pod in assigned:
        if not pod.spec.node_name:
            raise ValueError(f"assigned pod {pod.metadata.name} has no nodeName")
        cache.upsert_pod(PodInfo.of(pod))
    return cache


def make_snapshot(nodes: Iterable[Node], assigned: Iterable[Pod] = ()) -> Snapshot:
    return Snapshot(make_cache(nodes, assigned))
