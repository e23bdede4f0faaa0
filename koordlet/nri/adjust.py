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

The QoS settings are the reconcile's rules in :mod:`koordlet.qos`, decided on the same pod:

- a BE pod on batch resources (:mod:`koordlet.qos.batch_resource`, gate ``BatchResource``): each
  container's ``cpu.shares``, CFS quota and memory limit go into the adjustment (and into an
  update), the pod cgroup's are written by :class:`PodSettings` at RunPodSandbox, as Koordinator's
  ``batchresource`` hook does, since NRI cannot adjust a pod's cgroup;
- CPU QoS (:func:`koordlet.qos.cpu_qos.pod_cpu_qos`, gate ``GroupIdentity``): ``cpu.bvt_warp_ns`` or
  ``cpu.idle`` of the pod cgroup, written at RunPodSandbox as Koordinator's ``groupidentity`` hook
  does (NRI has no field for either);
- a pod with ``node.koordinator.sh/resctrl`` (gate ``Resctrl``) while the node's resctrl is mounted:
  its group ``koordlet-<uid>`` is made with the pod's schemata at RunPodSandbox and each container
  gets it as its RDT class, as Koordinator's ``resctrl`` hook does. Without resctrl no class is
  set: containerd fails a container whose RDT class it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apis.core import Pod, PodSpec, PodStatus
from apis.extension.device import get_device_allocations
from apis.extension.numa import get_resource_status
from apis.extension.qosannotations import get_resctrl
from apis.koordlet_features import KoordletFeatureGates
from apis.meta import ObjectMeta
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.nri.proto import api_pb2
from koordlet.qos.batch_resource import (
    BatchCgroups,
    batch_quota_rule,
    batch_spec,
    container_batch_cgroups,
    is_batch_pod,
    pod_batch_cgroups,
)
from koordlet.qos.cpu_qos import pod_cpu_qos
from koordlet.qos.pods import qos_pod
from koordlet.qos.resctrl import ResctrlInfo
from koordlet.qos.resctrl_qos import POD_GROUP_PREFIX, pod_schemata
from koordlet.qos.slo import effective_spec
from koordlet.topology.cpuset_rule import CPUSetRule, pod_cpuset

__all__ = [
    "GPU_ENV",
    "ContainerSettings",
    "NodeQoSInputs",
    "PodSettings",
    "adjustment",
    "container_settings",
    "kube_qos_of_sandbox",
    "pod_settings",
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
    batch: BatchCgroups | None = None
    """A BE container's ``cpu.shares``, CFS quota and memory limit from its batch resources."""
    rdt_class: str | None = None
    """The pod's own resctrl group, set only while the node's resctrl is mounted."""


@dataclass(frozen=True)
class NodeQoSInputs:
    """What the QoS rules decide on besides the pod: the node's effective NodeSLO, koordlet's gates,
    the node's CPU-normalization ratio and its resctrl (None: not mounted)."""

    spec: NodeSLOSpec = field(default_factory=lambda: effective_spec(None))
    gates: KoordletFeatureGates = field(default_factory=KoordletFeatureGates)
    cpu_normalization_ratio: float | None = None
    resctrl: ResctrlInfo | None = None


@dataclass(frozen=True)
class PodSettings:
    """What koordlet writes into the pod's own cgroup and resctrl at RunPodSandbox."""

    cpu_qos: tuple[str, int] | None = None
    """``("bvt", value)`` or ``("idle", value)``."""
    batch: BatchCgroups | None = None
    resctrl_group: str | None = None
    resctrl_schemata: str | None = None

    def empty(self) -> bool:
        return self.cpu_qos is None and self.batch is None and self.resctrl_group is None


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
    """The Pod as far as the sandbox tells it, with the watched pod's QoS class and spec (its
    containers' batch resources) when there is one."""
    qos = watched.status.qos_class if watched is not None and watched.status.qos_class else None
    return Pod(
        spec=watched.spec if watched is not None else PodSpec(),
        metadata=ObjectMeta(
            name=sandbox.name,
            namespace=sandbox.namespace,
            uid=sandbox.uid,
            labels=dict(sandbox.labels),
            annotations=dict(sandbox.annotations),
        ),
        status=PodStatus(qos_class=qos or kube_qos_of_sandbox(sandbox)),
    )


def _resctrl_group(pod: Pod, inputs: NodeQoSInputs) -> str | None:
    if not inputs.gates.resctrl_hook or inputs.resctrl is None:
        return None
    if get_resctrl(pod.metadata.annotations) is None:
        return None
    return POD_GROUP_PREFIX + (pod.metadata.uid or "")


def container_settings(
    pod: Pod,
    rule: CPUSetRule,
    *,
    container: str = "",
    inputs: NodeQoSInputs | None = None,
    be_cpu_manager: bool = False,
    unset_cpu_quota: bool = True,
) -> ContainerSettings | None:
    """The settings of the container named ``container`` of ``pod``; None when there is nothing to
    set. Raises InvalidAnnotation when the pod's resource-status, device-allocated,
    extended-resource-spec or resctrl annotation does not parse."""
    inputs = inputs or NodeQoSInputs()
    cpuset = pod_cpuset(pod, rule, be_cpu_manager=be_cpu_manager) or None
    bound = cpuset is not None and bool(get_resource_status(pod.metadata.annotations).cpuset)
    gpus = (get_device_allocations(pod.metadata.annotations) or {}).get("gpu") or []
    env = ((GPU_ENV, ",".join(str(gpu.minor) for gpu in gpus)),) if gpus else ()
    batch = None
    if inputs.gates.batch_resource and is_batch_pod(pod):
        rule_of_quota = batch_quota_rule(inputs.spec, inputs.gates, inputs.cpu_normalization_ratio)
        batch = container_batch_cgroups(batch_spec(pod), container, rule_of_quota)
    rdt_class = _resctrl_group(pod, inputs)
    if cpuset is None and not env and batch is None and rdt_class is None:
        return None
    return ContainerSettings(
        cpuset=cpuset,
        unset_cpu_quota=bound and unset_cpu_quota,
        env=env,
        batch=batch,
        rdt_class=rdt_class,
    )


def pod_settings(pod: Pod, inputs: NodeQoSInputs) -> PodSettings:
    """What the pod's own cgroup and resctrl group get at RunPodSandbox. Raises InvalidAnnotation
    (a malformed cpuQOS, extended-resource-spec or resctrl annotation) or ValueError (a resctrl
    range out of bounds)."""
    gates = inputs.gates
    cpu_qos = pod_cpu_qos(inputs.spec, qos_pod(pod)) if gates.group_identity else None
    batch = None
    if gates.batch_resource and is_batch_pod(pod):
        rule_of_quota = batch_quota_rule(inputs.spec, gates, inputs.cpu_normalization_ratio)
        batch = pod_batch_cgroups(batch_spec(pod), rule_of_quota)
    group = _resctrl_group(pod, inputs)
    schemata = None
    if group is not None and inputs.resctrl is not None:
        config = get_resctrl(pod.metadata.annotations)
        schemata = pod_schemata(config, inputs.resctrl) if config is not None else None
    return PodSettings(cpu_qos=cpu_qos, batch=batch, resctrl_group=group, resctrl_schemata=schemata)


def _resources(settings: ContainerSettings, *, rdt: bool) -> api_pb2.LinuxResources | None:
    rdt_class = settings.rdt_class if rdt else None
    if settings.cpuset is None and settings.batch is None and rdt_class is None:
        return None
    resources = api_pb2.LinuxResources()
    if settings.batch is not None:
        resources.cpu.shares.value = settings.batch.cpu_shares
        resources.cpu.quota.value = settings.batch.cfs_quota
        resources.memory.limit.value = settings.batch.memory_limit
    if settings.cpuset is not None:
        resources.cpu.cpus = settings.cpuset
    if settings.unset_cpu_quota:
        resources.cpu.quota.value = -1
    if rdt_class is not None:
        resources.rdt_class.value = rdt_class
    return resources


def adjustment(settings: ContainerSettings) -> api_pb2.ContainerAdjustment:
    """The CreateContainer answer: the container starts with these settings."""
    adjust = api_pb2.ContainerAdjustment(env=[api_pb2.KeyValue(key=k, value=v) for k, v in settings.env])
    if (resources := _resources(settings, rdt=True)) is not None:
        adjust.linux.resources.CopyFrom(resources)
    return adjust


def update(container_id: str, settings: ContainerSettings) -> api_pb2.ContainerUpdate | None:
    """An UpdateContainer answer: a later resource update (the kubelet's) keeps these settings
    (the RDT class is set at creation only, as Koordinator's resctrl hook does); None when they hold
    no resources."""
    if (resources := _resources(settings, rdt=False)) is None:
        return None
    result = api_pb2.ContainerUpdate(container_id=container_id)
    result.linux.resources.CopyFrom(resources)
    return result
