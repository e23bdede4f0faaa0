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
) -> dict[str, Any]:
    """A busybox ``sleep`` pod that koord-scheduler places on the real node."""
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "nodeSelector": {c.node_label: "true"},
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "sleep",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["sleep", "3600"],
                "resources": resources,
            }
        ],
    }
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
