"""Fake GPU/RDMA nodes of one scenario, with their Devices written as on a cluster.

A scenario's nodes form a pool: labelled ``node-type: <pool>`` and tainted ``koord-e2e/pool=<pool>``,
so that no other scenario's pods land there. :func:`reported_devices` writes a devices file
(docs/devices.md), runs koordlet's file backend on it (``--simulate-devices``) and waits until
koord-manager has summed each node's Device into its allocatable.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.components import koordlet_simulation
from e2e.workloads import apply, get_object, wait_for

__all__ = ["Pool", "reported_devices"]

SYNC_TIMEOUT = 90.0


@dataclass(frozen=True)
class Pool:
    name: str

    @property
    def taint(self) -> dict[str, str]:
        return {"key": "koord-e2e/pool", "value": self.name, "effect": "NoSchedule"}

    @property
    def selector(self) -> dict[str, str]:
        return {"node-type": self.name}

    def node(self, name: str, resources: Mapping[str, str], *, unschedulable: bool = False) -> dict[str, Any]:
        """A KWOK node of the pool with ``resources`` as its capacity and allocatable."""
        spec: dict[str, Any] = {"taints": [self.taint]}
        if unschedulable:
            spec["unschedulable"] = True
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"type": "kwok", "kubernetes.io/hostname": name, **self.selector},
                "annotations": {"kwok.x-k8s.io/node": "fake"},
            },
            "spec": spec,
            "status": {"capacity": dict(resources), "allocatable": dict(resources)},
        }


@contextmanager
def reported_devices(
    cp: ControlPlane,
    nodes: Sequence[dict[str, Any]],
    devices: Mapping[str, Any],
    directory: Path,
    *,
    koordlet: str,
    synced: Mapping[str, Mapping[str, str]],
) -> Iterator[None]:
    """Create ``nodes``, run koordlet (named ``koordlet``) on the devices file ``devices``, and
    wait until each node of ``synced`` has those allocatable values; koordlet stops on exit."""
    apply(cp, list(nodes))
    wait_nodes_ready(cp)
    path = directory / "devices.yaml"
    path.write_text(yaml.safe_dump(dict(devices)))
    component = koordlet_simulation(cp, None, devices_file=path, name=koordlet)
    component.start()
    try:

        def all_synced() -> bool:
            for name, expected in synced.items():
                node = get_object(cp, "node", name)
                allocatable = node["status"].get("allocatable") or {}
                if any(allocatable.get(key) != value for key, value in expected.items()):
                    return False
            return True

        wait_for(
            all_synced, timeout=SYNC_TIMEOUT, what="koordlet's Devices summed into the nodes' allocatable"
        )
        yield
    finally:
        component.stop()
