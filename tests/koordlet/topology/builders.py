"""Nodes and pods as the API server returns them, for the topology tests."""

from __future__ import annotations

import json
from typing import Any

from apis.core import Node, Pod


def node(
    name: str = "n1",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
) -> Node:
    return Node.model_validate(
        {
            "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels, "annotations": annotations},
            "status": {"capacity": capacity, "allocatable": allocatable},
        }
    )


def pod(
    name: str,
    *,
    qos: str | None = None,
    cpuset: str | None = None,
    numa: list[dict[str, Any]] | None = None,
    kube_qos: str = "Burstable",
    phase: str = "Running",
    raw_status: str | None = None,
) -> Pod:
    annotations = {}
    status: dict[str, Any] = {}
    if cpuset is not None:
        status["cpuset"] = cpuset
    if numa is not None:
        status["numaNodeResources"] = numa
    if status:
        annotations["scheduling.koordinator.sh/resource-status"] = json.dumps(status)
    if raw_status is not None:
        annotations["scheduling.koordinator.sh/resource-status"] = raw_status
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"u-{name}",
                "labels": {"koordinator.sh/qosClass": qos} if qos else None,
                "annotations": annotations or None,
            },
            "spec": {"nodeName": "n1"},
            "status": {"phase": phase, "qosClass": kube_qos},
        }
    )
