"""How a pod (or any namespaced object) is named in maps and in NodeMetric reports: its namespace
and name, the namespace defaulted as the API server defaults it; as a pair (``PodRef``) or as
``namespace/name``."""

from __future__ import annotations

from apis.core import Pod

__all__ = ["PodRef", "namespaced_key", "namespaced_ref", "pod_key", "pod_namespace_name", "pod_ref"]

PodRef = tuple[str, str]


def namespaced_ref(namespace: str | None, name: str | None) -> PodRef:
    return namespace or "default", name or ""


def namespaced_key(namespace: str | None, name: str | None) -> str:
    return "/".join(namespaced_ref(namespace, name))


def pod_ref(pod: Pod) -> PodRef:
    return namespaced_ref(pod.metadata.namespace, pod.metadata.name)


def pod_key(pod: Pod) -> str:
    return namespaced_key(pod.metadata.namespace, pod.metadata.name)


def pod_namespace_name(pod: Pod) -> PodRef:
    """The pod's ref to address it with on the API server; a pod with no name has none."""
    if not pod.metadata.name:
        raise ValueError("the pod has no name")
    return pod_ref(pod)
