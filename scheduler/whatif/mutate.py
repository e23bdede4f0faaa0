"""The job with one thing changed: another quota, one more toleration, fewer GPUs per pod, a looser
network-topology-spec. Each returns new pods (same made-up uids); nothing else is touched."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from apis.core import Pod, PodSpec
from apis.extension import device as device_ext
from apis.extension import quota as quota_ext
from apis.gcpause import gc_paused
from apis.meta import Taint
from scheduler.cache.pod_info import PodInfo
from scheduler.whatif.workload import Job

__all__ = ["GPU_RESOURCES", "gpu_request", "with_gpu", "with_quota", "with_toleration"]

GPU_RESOURCES: tuple[tuple[str, int], ...] = (
    (device_ext.RESOURCE_NVIDIA_GPU, 1),
    (device_ext.RESOURCE_GPU, 100),
    (device_ext.RESOURCE_GPU_CORE, 100),
)
"""The per-pod GPU resources a what-if may shrink, with what one whole card is in their unit."""
_SCALED_ALONG = (device_ext.RESOURCE_GPU_MEMORY_RATIO, device_ext.RESOURCE_GPU_CORE)


def _edit(job: Job, change: Callable[[dict[str, Any]], None], *, spec_only: bool = False) -> Job:
    """``spec_only``: ``change`` edits nothing but the spec, so a member whose spec equals one
    already edited takes that edited spec (the replicas of a gang differ in their metadata only)
    instead of a dump and validation of its own."""
    members = []
    edited: list[tuple[PodSpec, PodSpec]] = []
    with gc_paused():
        for member in job.members:
            spec = member.pod.spec
            done = next((after for before, after in edited if before == spec), None) if spec_only else None
            if done is not None:
                members.append(PodInfo.of(member.pod.model_copy(update={"spec": done})))
                continue
            data = member.pod.model_dump(by_alias=True, exclude_none=True)
            change(data)
            pod = Pod.model_validate(data)
            edited.append((spec, pod.spec))
            members.append(PodInfo.of(pod))
    return job.with_members(members)


def with_quota(job: Job, quota: str) -> Job:
    def change(data: dict[str, Any]) -> None:
        data.setdefault("metadata", {}).setdefault("labels", {})[quota_ext.LABEL_QUOTA_NAME] = quota

    return _edit(job, change)


def with_toleration(job: Job, taint: Taint) -> Job:
    toleration = {"key": taint.key, "operator": "Equal", "value": taint.value or "", "effect": taint.effect}

    def change(data: dict[str, Any]) -> None:
        data.setdefault("spec", {}).setdefault("tolerations", []).append(toleration)

    return _edit(job, change, spec_only=True)


def gpu_request(job: Job) -> tuple[str, int, int] | None:
    """(resource, the largest per-pod amount any member asks, one card's amount) of the first GPU
    resource the members ask for; None: no member asks for a GPU."""
    for resource, card in GPU_RESOURCES:
        amount = max((m.requests.get(resource, 0) for m in job.members), default=0)
        if amount > 0:
            return resource, amount, card
    return None


def with_gpu(job: Job, resource: str, per_pod: int) -> Job:
    """Every member asking for more than ``per_pod`` of ``resource`` asks for ``per_pod`` (and the
    GPU resources that go with it, such as gpu-memory-ratio, in proportion)."""

    def change(data: dict[str, Any]) -> None:
        containers = data.get("spec", {}).get("containers", [])
        total = sum(_amount(c, resource) for c in containers)
        if total <= per_pod:
            return
        ratio = per_pod / total
        for name in (resource, *(r for r in _SCALED_ALONG if r != resource)):
            _scale(containers, name, ratio)

    return _edit(job, change, spec_only=True)


def _amount(container: Mapping[str, Any], resource: str) -> int:
    requests = container.get("resources", {}).get("requests", {}) or container.get("resources", {}).get(
        "limits", {}
    )
    value = requests.get(resource)
    return int(str(value)) if value is not None else 0


def _scale(containers: list[dict[str, Any]], resource: str, ratio: float) -> None:
    for container in containers:
        resources = container.get("resources", {})
        for kind in ("requests", "limits"):
            amounts = resources.get(kind) or {}
            if resource in amounts:
                amounts[resource] = str(max(1, int(int(str(amounts[resource])) * ratio)))
