"""Nodes, pods and NodeMetrics for the node resource tests, in the units of the examples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from apis.core import Node, Pod
from apis.slo.nodemetric import NodeMetric

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def node(
    cpu: str = "16",
    memory: str = "100Gi",
    alloc_cpu: str = "15",
    alloc_memory: str = "98Gi",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> Node:
    return Node.model_validate(
        {
            "metadata": {"name": "n1", "labels": labels or {}, "annotations": annotations or {}},
            "status": {
                "capacity": {"cpu": cpu, "memory": memory, **(extra or {})},
                "allocatable": {"cpu": alloc_cpu, "memory": alloc_memory, **(extra or {})},
            },
        }
    )


def pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    *,
    priority_class: str | None = None,
    qos: str | None = None,
    phase: str = "Running",
    node_name: str = "n1",
    resources: dict[str, str] | None = None,
) -> Pod:
    labels = {}
    if priority_class is not None:
        labels["koordinator.sh/priority-class"] = priority_class
    if qos is not None:
        labels["koordinator.sh/qosClass"] = qos
    requests = dict(resources or {})
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {
                "nodeName": node_name,
                "containers": [{"name": "c", "resources": {"requests": requests}}],
            },
            "status": {"phase": phase},
        }
    )


def metric(
    *,
    age_minutes: float = 1,
    node_usage: tuple[str, str] | None = ("8", "30Gi"),
    system: tuple[str, str] = ("500m", "1Gi"),
    pods: dict[str, tuple[str, str, str]] | None = None,
    host_apps: dict[str, tuple[str, str, str]] | None = None,
    reclaimable: tuple[str, str] | None = None,
    reported: bool = True,
) -> NodeMetric:
    """``pods``: name -> (cpu, memory, priority class); ``host_apps`` likewise."""
    status: dict[str, Any] = {}
    if reported:
        status["updateTime"] = (NOW - timedelta(minutes=age_minutes)).isoformat().replace("+00:00", "Z")
        info: dict[str, Any] = {"systemUsage": {"resources": {"cpu": system[0], "memory": system[1]}}}
        if node_usage is not None:
            info["nodeUsage"] = {"resources": {"cpu": node_usage[0], "memory": node_usage[1]}}
        status["nodeMetric"] = info
        status["podsMetric"] = [
            {
                "name": name,
                "namespace": "default",
                "podUsage": {"resources": {"cpu": c, "memory": m}},
                "priority": p,
            }
            for name, (c, m, p) in (pods or {}).items()
        ]
        status["hostApplicationMetric"] = [
            {"name": name, "usage": {"resources": {"cpu": c, "memory": m}}, "priority": p}
            for name, (c, m, p) in (host_apps or {}).items()
        ]
        if reclaimable is not None:
            status["prodReclaimableMetric"] = {
                "resource": {"resources": {"cpu": reclaimable[0], "memory": reclaimable[1]}}
            }
    return NodeMetric.model_validate({"metadata": {"name": "n1"}, "status": status})
