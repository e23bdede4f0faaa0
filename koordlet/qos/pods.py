"""The facts about a pod that the QoS behaviours decide on, taken once from the Pod object."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.core import Pod
from apis.extension.colocation import BATCH_CPU, KOORD_BATCH_CPU
from apis.extension.qos import QoSClass, qos_class_from_labels, qos_class_of
from koordlet.qos.layout import KubeQOS, kube_qos_of

__all__ = ["QoSPod", "qos_pod"]


@dataclass(frozen=True)
class QoSPod:
    uid: str
    name: str
    namespace: str
    kube_qos: KubeQOS
    raw_qos: QoSClass
    """The ``koordinator.sh/qosClass`` label ("" when absent)."""
    qos: QoSClass
    """The label, or derived from the Kubernetes QoS class (BestEffort -> BE) as koordlet does."""
    priority: int = 0
    """``spec.priority`` (0 when unset)."""
    batch_cpu_request_milli: int = 0
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    terminating: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_be(self) -> bool:
        return self.qos == "BE"


def _batch_cpu(pod: Pod) -> int:
    total = 0
    for container in pod.spec.containers:
        requests = (container.resources.requests if container.resources else None) or {}
        quantity = requests.get(BATCH_CPU) or requests.get(KOORD_BATCH_CPU)
        if quantity is not None:
            total += quantity.value()
    return total


def qos_pod(pod: Pod) -> QoSPod:
    labels = pod.metadata.labels or {}
    return QoSPod(
        uid=pod.metadata.uid or "",
        name=pod.metadata.name or "",
        namespace=pod.metadata.namespace or "",
        kube_qos=kube_qos_of(pod.status.qos_class),
        raw_qos=qos_class_from_labels(labels),
        qos=qos_class_of(labels, pod.status.qos_class),
        priority=pod.spec.priority or 0,
        batch_cpu_request_milli=_batch_cpu(pod),
        annotations=dict(pod.metadata.annotations or {}),
        node_name=pod.spec.node_name or "",
        terminating=pod.metadata.deletion_timestamp is not None,
    )
