"""What NodeNUMAResource's PreFilter makes of a pod, kept per distinct pod fields.

It reads only the pod: its requests, its labels and priority (the QoS and priority class), and its
resource-spec and NUMA topology annotations (parsed through pydantic). The replicas of a workload
agree on all of them, so the answer is made once for them (the first ``CAPACITY`` distinct ones;
all forgotten at once past it) and shared: what a cycle changes, it changes on copies (``Cycle``'s
requests, the resource-spec written at PreBind).
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.errors import InvalidAnnotation
from apis.extension.numa import (
    ANNOTATION_NUMA_TOPOLOGY_SPEC,
    ANNOTATION_RESOURCE_SPEC,
    NUMATopologySpec,
    ResourceSpec,
    get_numa_topology_spec,
    get_resource_spec,
)
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.node_numa_resource.policy import CPURequest, cpu_request

__all__ = ["CAPACITY", "PodRequest", "PodRequests"]

CAPACITY = 4096


@dataclass(frozen=True, slots=True)
class PodRequest:
    resources: dict[str, int]
    """The pod's positive requests (read, never written: ``Cycle`` takes a copy)."""
    cpu: CPURequest
    spec: ResourceSpec
    numa_spec: NUMATopologySpec


_Key = tuple[object, ...]


class PodRequests:
    def __init__(self, default_cpu_bind_policy: str) -> None:
        self._default_cpu_bind_policy = default_cpu_bind_policy
        self._known: dict[_Key, PodRequest | str | None] = {}

    def of(self, pod: PodInfo) -> PodRequest | str | None:
        """The pod's request; a str: why no node can run it; None: it requests nothing."""
        annotations = pod.annotations
        key = (
            tuple(pod.requests.items()),
            tuple(pod.labels.items()),
            pod.pod.spec.priority,
            annotations.get(ANNOTATION_RESOURCE_SPEC),
            annotations.get(ANNOTATION_NUMA_TOPOLOGY_SPEC),
        )
        try:
            return self._known[key]
        except KeyError:
            pass
        if len(self._known) >= CAPACITY:
            self._known.clear()
        found = self._known[key] = self._make(pod)
        return found

    def _make(self, pod: PodInfo) -> PodRequest | str | None:
        resources = {name: amount for name, amount in pod.requests.items() if amount > 0}
        if not resources:
            return None
        try:
            spec = get_resource_spec(pod.annotations)
            numa_spec = get_numa_topology_spec(pod.annotations)
        except InvalidAnnotation as exc:
            return str(exc)
        cpu = cpu_request(
            milli_cpu=resources.get("cpu", 0),
            labels=pod.labels,
            priority=pod.pod.spec.priority,
            spec=spec,
            numa_spec=numa_spec,
            default_bind_policy=self._default_cpu_bind_policy,
        )
        if isinstance(cpu, str):
            return cpu
        return PodRequest(resources, cpu, spec, numa_spec)
