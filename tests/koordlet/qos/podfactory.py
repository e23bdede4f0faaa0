"""Pods and nodes for the QoS tests, as the API server would return them."""

from __future__ import annotations

from typing import Any

from apis.core import Node, Pod


def pod(
    name: str,
    qos: str | None = None,
    kube_qos: str = "Burstable",
    priority: int | None = None,
    batch_cpu: int | None = None,
    annotations: dict[str, str] | None = None,
    uid: str | None = None,
    node: str = "node-a",
    namespace: str = "default",
) -> Pod:
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    requests: dict[str, Any] = {"kubernetes.io/batch-cpu": str(batch_cpu)} if batch_cpu is not None else {}
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid or f"uid-{name}",
                "labels": labels,
                "annotations": annotations or {},
            },
            "spec": {
                "nodeName": node,
                "priority": priority,
                "containers": [{"name": "c", "resources": {"requests": requests}}],
            },
            "status": {"qosClass": kube_qos, "phase": "Running"},
        }
    )


def node(name: str = "node-a", cpu: str = "16", memory: str = "100Gi", batch_cpu: str | None = None) -> Node:
    allocatable = {"cpu": cpu, "memory": memory}
    if batch_cpu is not None:
        allocatable["kubernetes.io/batch-cpu"] = batch_cpu
    return Node.model_validate(
        {
            "metadata": {"name": name},
            "status": {"capacity": {"cpu": cpu, "memory": memory}, "allocatable": allocatable},
        }
    )
