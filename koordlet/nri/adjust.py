"""What koordlet asks the runtime to set on a container it creates: pure functions over NRI's
messages and our models.

The cpuset is the one the reconcile writes (:func:`koordlet.topology.cpuset_rule.pod_cpuset`),
decided on the pod NRI hands over: its labels and annotations are the Pod's (the kubelet copies
them into the sandbox), so the scheduler's ``scheduling.koordinator.sh/resource-status`` is there
before koordlet's watch may have seen the pod. Its Kubernetes QoS class is the watched pod's, or
read from the sandbox's cgroup parent. As the reconcile does, a pod bound to CPUs also gets an
unlimited CFS quota, and a cpuset of ``""`` (leave it to the parent) or None asks for nothing.

A pod the scheduler gave GPUs (``scheduling.koordinator.sh/device-allocated``) gets
``NVIDIA_VISIBLE_DEVICES`` with their minors, so the NVIDIA container runtime mounts exactly those
devices into its containers (Koordinator's ``gpu`` runtime hook, v1.6's "NRI plugin to mount
devices"; HAMi-core's settings are not set here).
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.core import Pod, PodStatus
from apis.extension.device import get_device_allocations
from apis.extension.numa import get_resource_status
from apis.meta import ObjectMeta
from koordlet.nri.proto import api_pb2
from koordlet.topology.cpuset_rule import CPUSetRule, pod_cpuset

__all__ = [
    "GPU_ENV",
    "ContainerSettings",
    "adjustment",
    "container_settings",
    "kube_qos_of_sandbox",
    "sandbox_pod",
    "update",
]


GPU_ENV = "NVIDIA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class ContainerSettings:
    cpuset: str | None = None
    """A CPU list; None to leave the runtime's."""
    unset_cpu_quota: bool = False
    """The pod is bound to CPUs: its containers run without a CFS quota (-1)."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment variables to add (only at creation: a running container's cannot change)."""


def kube_qos_of_sandbox(sandbox: api_pb2.PodSandbox) -> str:
    """The pod's Kubernetes QoS class from its cgroup parent (kubepods/besteffort/pod...,
    kubepods-burstable.slice, ...): the kubelet places a Guaranteed pod directly under kubepods."""
    parent = sandbox.linux.cgroup_parent.lower()
    if "besteffort" in parent:
        return "BestEffort"
    if "burstable" in parent:
        return "Burstable"
    return "Guaranteed"


def sandbox_pod(sandbox: api_pb2.PodSandbox, watched: Pod | None = None) -> Pod:
    """The Pod as far as the sandbox tells it, with the watched pod's QoS class when there is one."""
    qos = watched.status.qos_class if watched is not None and watched.status.qos_class else None
    return Pod(
        metadata=ObjectMeta(
            name=sandbox.name,
            namespace=sandbox.namespace,
            uid=sandbox.uid,
            labels=dict(sandbox.labels),
            annotations=dict(sandbox.annotations),
        ),
        status=PodStatus(qos_class=qos or kube_qos_of_sandbox(sandbox)),
    )


def container_settings(
    pod: Pod, rule: CPUSetRule, *, be_cpu_manager: bool = False, unset_cpu_quota: bool = True
) -> ContainerSettings | None:
    """The settings for each container of ``pod``; None when there is nothing to set. Raises
    InvalidAnnotation when the pod's resource-status or device-allocated does not parse."""
    cpuset = pod_cpuset(pod, rule, be_cpu_manager=be_cpu_manager) or None
    bound = cpuset is not None and bool(get_resource_status(pod.metadata.annotations).cpuset)
    gpus = (get_device_allocations(pod.metadata.annotations) or {}).get("gpu") or []
    env = ((GPU_ENV, ",".join(str(gpu.minor) for gpu in gpus)),) if gpus else ()
    if cpuset is None and not env:
        return None
    return ContainerSettings(cpuset=cpuset, unset_cpu_quota=bound and unset_cpu_quota, env=env)


def _resources(settings: ContainerSettings) -> api_pb2.LinuxResources | None:
    if settings.cpuset is None:
        return None
    resources = api_pb2.LinuxResources()
    resources.cpu.cpus = settings.cpuset
    if settings.unset_cpu_quota:
        resources.cpu.quota.value = -1
    return resources


def adjustment(settings: ContainerSettings) -> api_pb2.ContainerAdjustment:
    """The CreateContainer answer: the container starts with these settings."""
    adjust = api_pb2.ContainerAdjustment(env=[api_pb2.KeyValue(key=k, value=v) for k, v in settings.env])
    if (resources := _resources(settings)) is not None:
        adjust.linux.resources.CopyFrom(resources)
    return adjust


def update(container_id: str, settings: ContainerSettings) -> api_pb2.ContainerUpdate | None:
    """An UpdateContainer answer: a later resource update (the kubelet's) keeps these settings;
    None when they hold no resources."""
    if (resources := _resources(settings)) is None:
        return None
    result = api_pb2.ContainerUpdate(container_id=container_id)
    result.linux.resources.CopyFrom(resources)
    return result
