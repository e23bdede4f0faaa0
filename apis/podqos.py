"""A pod's Kubernetes QoS class (Guaranteed, Burstable, BestEffort), as kubelet computes it
(``k8s.io/kubernetes/pkg/apis/core/v1/helper/qos.GetPodQOS``) from the cpu and memory of every
container, init containers included."""

from __future__ import annotations

from apis.core import Pod, PodSpec
from apis.extension.qos import (
    KUBERNETES_QOS_BEST_EFFORT,
    KUBERNETES_QOS_BURSTABLE,
    KUBERNETES_QOS_GUARANTEED,
    KubernetesQoSClass,
)
from apis.resources import to_int_units

__all__ = ["computed_kubernetes_qos", "kubernetes_qos"]

_QOS_RESOURCES = ("cpu", "memory")


def computed_kubernetes_qos(spec: PodSpec) -> KubernetesQoSClass:
    """BestEffort: no container requests or limits a positive cpu or memory; Guaranteed: every
    container limits both and the summed requests equal the summed limits; else Burstable."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for container in (*spec.containers, *(spec.init_containers or ())):
        resources = container.resources
        limited = {
            name: to_int_units(name, quantity)
            for name, quantity in ((resources.limits or {}) if resources else {}).items()
            if name in _QOS_RESOURCES
        }
        # the API server defaults a missing request to its limit
        requested = dict(limited)
        for name, quantity in ((resources.requests or {}) if resources else {}).items():
            if name in _QOS_RESOURCES:
                requested[name] = to_int_units(name, quantity)
        for name, amount in requested.items():
            if amount > 0:
                requests[name] = requests.get(name, 0) + amount
        for name, amount in limited.items():
            if amount > 0:
                limits[name] = limits.get(name, 0) + amount
        if not all(limited.get(name, 0) > 0 for name in _QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return KUBERNETES_QOS_BEST_EFFORT
    return KUBERNETES_QOS_GUARANTEED if guaranteed and requests == limits else KUBERNETES_QOS_BURSTABLE


def kubernetes_qos(pod: Pod) -> str:
    """``status.qosClass`` when kubelet wrote it, else computed from the pod's spec."""
    return pod.status.qos_class or computed_kubernetes_qos(pod.spec)
