"""Pod-level CPU QoS: group identity (``cpu.bvt_warp_ns``) or, on upstream kernels with
``cpuPolicy: coreSched``, ``cpu.idle`` (Koordinator's ``runtimehooks/hooks/groupidentity`` and
``hooks/coresched``).

Group identity per pod: LSE/LSR -> the LSR class's value, LS -> LS, BE -> BE, SYSTEM -> SYSTEM; a pod
without a Koordinator class: Guaranteed -> LSR's value if LSR is enabled, else LS's if LS is, else 0;
Burstable -> LS; BestEffort -> BE. A class's value is 0 while its ``cpuQOS`` is disabled. QoS dirs:
kubepods 0, burstable LS, besteffort BE; containers take their pod's value.

The ``koordinator.sh/cpuQOS`` annotation of an LS pod overrides its value: ``{"groupIdentity": 1}``
means enabled with 1 (Koordinator yields 0 there because ``enable`` is missing: not copied), and
``"enable": false`` forces 0. With ``coreSched``, ``cpu.idle`` is 1 on the besteffort QoS dir and BE
pods when the BE class's ``schedIdle`` is 1, else 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from apis.errors import InvalidAnnotation
from apis.extension.qosannotations import ANNOTATION_POD_CPU_QOS, get_cpu_qos
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qos.layout import CgroupLayout
from koordlet.qos.pods import QoSPod
from koordlet.qos.slo import class_qos

__all__ = [
    "CPUQoSPlan",
    "PodCgroups",
    "class_group_identity",
    "cpu_qos_resource",
    "plan_cpu_qos",
    "pod_cpu_qos",
    "pod_group_identity",
]


@dataclass(frozen=True)
class PodCgroups:
    pod: QoSPod
    path: str
    containers: tuple[str, ...] = ()


@dataclass(frozen=True)
class CPUQoSPlan:
    resource: str
    """``bvt`` or ``idle``."""
    values: dict[str, int]
    """cgroup path -> value."""
    annotation_errors: tuple[tuple[QoSPod, str], ...] = ()


def _cpu(spec: NodeSLOSpec, qos: str) -> tuple[bool, int]:
    cpu = class_qos(spec, qos).cpu_qos
    if cpu is None or not cpu.enable:
        return False, 0
    return True, cpu.group_identity or 0


def class_group_identity(spec: NodeSLOSpec, qos: str) -> int:
    return _cpu(spec, qos)[1]


def pod_group_identity(spec: NodeSLOSpec, pod: QoSPod) -> int:
    """The pod's bvt value; raises InvalidAnnotation for a malformed ``koordinator.sh/cpuQOS``."""
    raw = pod.raw_qos
    if raw in ("LSE", "LSR"):
        value = class_group_identity(spec, "LSR")
    elif raw in ("LS", "BE", "SYSTEM"):
        value = class_group_identity(spec, raw)
    elif pod.kube_qos == "Guaranteed":
        lsr, ls = _cpu(spec, "LSR"), _cpu(spec, "LS")
        value = lsr[1] if lsr[0] else ls[1] if ls[0] else 0
    else:
        value = class_group_identity(spec, "LS" if pod.kube_qos == "Burstable" else "BE")
    if raw == "LS":
        override = get_cpu_qos(pod.annotations)
        if override is not None:
            if override.enable is False:
                return 0
            if override.group_identity is not None:
                return override.group_identity
    return value


def cpu_qos_resource(spec: NodeSLOSpec) -> str:
    """``idle`` under the ``coreSched`` cpuPolicy, else ``bvt`` (group identity)."""
    policies = (spec.resource_qos_strategy.policies if spec.resource_qos_strategy else None) or None
    policy = (policies.cpu_policy if policies else None) or "groupIdentity"
    return "idle" if policy == "coreSched" else "bvt"


def _be_idle(spec: NodeSLOSpec) -> int:
    be = class_qos(spec, "BE").cpu_qos
    return 1 if be is not None and be.enable and be.sched_idle == 1 else 0


def pod_cpu_qos(spec: NodeSLOSpec, pod: QoSPod) -> tuple[str, int]:
    """The resource (``bvt`` or ``idle``) and the value of the pod's cgroup and its containers'.
    Raises InvalidAnnotation for a malformed ``koordinator.sh/cpuQOS`` (bvt only)."""
    if cpu_qos_resource(spec) == "idle":
        return "idle", _be_idle(spec) if pod.qos == "BE" else 0
    return "bvt", pod_group_identity(spec, pod)


def plan_cpu_qos(spec: NodeSLOSpec, layout: CgroupLayout, pods: Sequence[PodCgroups]) -> CPUQoSPlan:
    resource = cpu_qos_resource(spec)
    if resource == "idle":
        values = {layout.qos_dir("BestEffort"): _be_idle(spec)}
        for entry in pods:
            pod_idle = pod_cpu_qos(spec, entry.pod)[1]
            for path in (entry.path, *entry.containers):
                values[path] = pod_idle
        return CPUQoSPlan("idle", values)
    values = {
        layout.qos_dir("Guaranteed"): 0,
        layout.qos_dir("Burstable"): class_group_identity(spec, "LS"),
        layout.qos_dir("BestEffort"): class_group_identity(spec, "BE"),
    }
    errors: list[tuple[QoSPod, str]] = []
    for entry in pods:
        try:
            value = pod_cpu_qos(spec, entry.pod)[1]
        except InvalidAnnotation as exc:
            errors.append((entry.pod, str(exc)))
            value = pod_group_identity(spec, _without_annotation(entry.pod))
        for path in (entry.path, *entry.containers):
            values[path] = value
    return CPUQoSPlan("bvt", values, tuple(errors))


def _without_annotation(pod: QoSPod) -> QoSPod:
    return replace(pod, annotations={k: v for k, v in pod.annotations.items() if k != ANNOTATION_POD_CPU_QOS})
