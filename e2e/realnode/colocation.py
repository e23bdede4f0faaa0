"""The NodeSLO of the real node's tests: ``slo-controller-config`` with batch resources on and the
given cluster strategies, and a wait for koord-manager's batch-cpu on the node."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from apis.quantity import Quantity
from e2e.cluster.controlplane import ControlPlane
from e2e.realnode.chart import NAMESPACE as CHART_NAMESPACE
from e2e.realnode.config import RealNodeConfig

__all__ = ["COLOCATION", "slo_config", "wait_batch_cpu"]

COLOCATION = {
    "enable": True,
    "metricReportIntervalSeconds": 5,
    # the whole node is batch's to take: a 2-core host's own load must not leave BE nothing
    "cpuReclaimThresholdPercent": 100,
    "memoryReclaimThresholdPercent": 100,
}


def slo_config(
    cp: ControlPlane, threshold: dict[str, Any] | None = None, qos: dict[str, Any] | None = None
) -> None:
    """``slo-controller-config`` with batch resources on and the given cluster strategies (none:
    every QoS switch off)."""
    data = {
        "colocation-config": json.dumps(COLOCATION),
        "resource-threshold-config": json.dumps({"clusterStrategy": threshold or {"enable": False}}),
        "resource-qos-config": json.dumps({"clusterStrategy": qos or {}}),
    }
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": CHART_NAMESPACE},
        "data": data,
    }
    cp.kubectl("apply", "-f", "-", input=json.dumps(config_map))


def batch_cpu(cp: ControlPlane, c: RealNodeConfig) -> int:
    """The real node's ``kubernetes.io/batch-cpu`` allocatable, milli-cores."""
    node = cp.get_json(f"/api/v1/nodes/{c.node_name}")
    # a quantity: the API server writes 2000 as "2k"
    return Quantity.parse(
        (node["status"].get("allocatable") or {}).get("kubernetes.io/batch-cpu", "0")
    ).value()


def wait_batch_cpu(cp: ControlPlane, c: RealNodeConfig, at_least: int, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while (found := batch_cpu(cp, c)) < at_least:
        if time.monotonic() > deadline:
            pytest.fail(f"the real node's kubernetes.io/batch-cpu: still {found} after {timeout:g}s")
        time.sleep(1.0)
    return found
