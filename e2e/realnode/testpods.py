"""Pods the real-node tests create: busybox sleepers that koord-scheduler places on the real node."""

from __future__ import annotations

from typing import Any

from e2e.realnode.config import RealNodeConfig
from e2e.realnode.images import BUSYBOX_IMAGE


def sleeper_pod(
    name: str,
    c: RealNodeConfig,
    *,
    labels: dict[str, str],
    resources: dict[str, Any],
    annotations: dict[str, str] | None = None,
    priority_class: str | None = None,
    command: list[str] | None = None,
    memory_volume: str | None = None,
) -> dict[str, Any]:
    """A busybox pod (``sleep`` unless ``command`` says otherwise) that koord-scheduler places on the
    real node; ``memory_volume`` (a size) mounts a tmpfs emptyDir of that size at ``/fill``."""
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "nodeSelector": {c.node_label: "true"},
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "sleep",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": command or ["sleep", "3600"],
                "resources": resources,
            }
        ],
    }
    if memory_volume:
        spec["volumes"] = [{"name": "fill", "emptyDir": {"medium": "Memory", "sizeLimit": memory_volume}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "fill", "mountPath": "/fill"}]
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": labels,
            "annotations": annotations or {},
        },
        "spec": spec,
    }


def gang_member(name: str, c: RealNodeConfig, *, gang: bool = True) -> dict[str, Any]:
    annotations = (
        {"gang.scheduling.koordinator.sh/name": "pair", "gang.scheduling.koordinator.sh/min-available": "2"}
        if gang
        else {}
    )
    small = {"requests": {"cpu": "10m", "memory": "16Mi"}}
    return sleeper_pod(name, c, labels={"app": "gang"}, resources=small, annotations=annotations)


def cpuset_pod(name: str, c: RealNodeConfig, qos: str, *, cpu: str, limit: str) -> dict[str, Any]:
    """A busybox pod koord-scheduler places on the real node, labelled ``qos``, of koord-prod."""
    resources = {"requests": {"cpu": cpu, "memory": "32Mi"}, "limits": {"cpu": limit, "memory": "32Mi"}}
    return sleeper_pod(
        name, c, labels={"koordinator.sh/qosClass": qos}, resources=resources, priority_class="koord-prod"
    )


def ls_pod(
    name: str,
    c: RealNodeConfig,
    *,
    command: list[str] | None = None,
    annotations: dict[str, str] | None = None,
    cpu: str = "100m",
    limit: str = "1",
) -> dict[str, Any]:
    """An LS pod of koord-prod (Burstable: a small request, a one-CPU limit)."""
    resources = {"requests": {"cpu": cpu, "memory": "16Mi"}, "limits": {"cpu": limit, "memory": "64Mi"}}
    return sleeper_pod(
        name,
        c,
        labels={"koordinator.sh/qosClass": "LS"},
        resources=resources,
        annotations=annotations,
        priority_class="koord-prod",
        command=command,
    )


def batch_pod(
    name: str,
    c: RealNodeConfig,
    *,
    batch_cpu: str = "20",
    batch_memory: str = "64Mi",
    command: list[str] | None = None,
    memory_volume: str | None = None,
) -> dict[str, Any]:
    """A BE pod of koord-batch on batch resources only, so BestEffort to kubelet: its cgroup is under
    ``kubepods/besteffort`` (extended resources take limits equal to requests)."""
    batch = {"kubernetes.io/batch-cpu": batch_cpu, "kubernetes.io/batch-memory": batch_memory}
    return sleeper_pod(
        name,
        c,
        labels={"koordinator.sh/qosClass": "BE"},
        resources={"requests": batch, "limits": batch},
        priority_class="koord-batch",
        command=command,
        memory_volume=memory_volume,
    )
