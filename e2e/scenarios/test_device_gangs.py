"""A gang of GPU sets on the real API server: planned by the cards' PCIe switches, not by counts.

Two fake 8-GPU nodes of their own (tainted, so no other scenario's pods land there), their Devices
written by koordlet's file backend (``--simulate-devices``) and summed into their allocatable by
koord-manager, as on a cluster. ``devgang-split`` has 4 cards on one PCIe switch and 2 + 2 on two
others: room by count for two members of 4 GPUs, but for one member of 4 on one switch.
``devgang-full`` (4 + 4) starts cordoned. The gang waits with a reason naming the GPU sets and
binds no member; once ``devgang-full`` is uncordoned both members bind, each on 4 cards of one
switch of its node, no card given twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from apis.extension.device import ANNOTATION_DEVICE_ALLOCATE_HINT, ANNOTATION_DEVICE_ALLOCATED
from e2e.cluster.controlplane import ControlPlane
from e2e.devices import Pool
from e2e.devices import reported_devices as reported_devices_of
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, failed_scheduling, get_object, make_pod, pods, wait_for

NAMESPACE = "device-gangs"
SPLIT, FULL = "devgang-split", "devgang-full"
POOL = Pool("devgang")
TAINT, SELECTOR = POOL.taint, POOL.selector
PCIE = json.dumps({"gpu": {"requiredTopologyScope": "PCIe"}})


def _cards(node: str, roots: list[str]) -> list[dict[str, Any]]:
    """One L40S (no NVSwitch partitions) per entry of ``roots``, the PCIe root it hangs under."""
    return [
        {
            "minor": minor,
            "uuid": f"GPU-{node}-{minor}",
            "model": "NVIDIA L40S",
            "memory": "48Gi",
            "placement": {"busID": f"0000:{minor + 16:02x}:00.0", "numaNode": 0, "pcieRoot": root},
        }
        for minor, root in enumerate(roots)
    ]


DEVICES = {
    "reportIntervalSeconds": 5,
    "nodes": [
        {"name": SPLIT, "gpus": _cards(SPLIT, ["pci0000:10"] * 4 + ["pci0000:20"] * 2 + ["pci0000:30"] * 2)},
        {"name": FULL, "gpus": _cards(FULL, ["pci0000:10"] * 4 + ["pci0000:20"] * 4)},
    ],
}


@pytest.fixture(scope="module")
def reported_devices(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    with reported_devices_of(
        control_plane,
        [POOL.node(SPLIT, resources), POOL.node(FULL, resources, unschedulable=True)],
        DEVICES,
        tmp_path_factory.mktemp("device-gangs"),
        koordlet="koordlet-devgang",
        synced={name: {"koordinator.sh/gpu-core": "800"} for name in (SPLIT, FULL)},
    ):
        yield


def _member(name: str) -> dict[str, Any]:
    return make_pod(
        name,
        NAMESPACE,
        cpu="100m",
        memory="64Mi",
        extra={"nvidia.com/gpu": "4"},
        node_selector=SELECTOR,
        tolerations=[TAINT],
        labels={"pod-group.scheduling.sigs.k8s.io": "train"},
        annotations={ANNOTATION_DEVICE_ALLOCATE_HINT: PCIE},
    )


def _pcie_of(cp: ControlPlane, node: str) -> dict[int, str]:
    device = get_object(cp, "device", node)
    return {d["minor"]: d["topology"]["pcieID"] for d in device["spec"]["devices"] if d["type"] == "gpu"}


def _bound(cp: ControlPlane) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in pods(cp, NAMESPACE) if p["spec"].get("nodeName")}


def test_a_gang_of_pcie_gpu_sets_waits_for_switches_not_counts(
    control_plane: ControlPlane, scheduler: Scheduler, reported_devices: None
) -> None:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": NAMESPACE},
        "spec": {"minMember": 2},
    }
    apply(cp, [group, _member("worker-0"), _member("worker-1")])

    def reasons() -> list[str]:
        found = failed_scheduling(cp, NAMESPACE, "worker-0") + failed_scheduling(cp, NAMESPACE, "worker-1")
        return [m for m in found if "sets of 4 whole GPUs in one PCIe" in m]

    messages = wait_for(reasons, timeout=60, what="FailedScheduling naming the GPU sets")
    assert "the feasible nodes hold 1" in messages[-1], messages[-1]
    assert not _bound(cp)

    cp.kubectl("uncordon", FULL)

    def both() -> dict[str, dict[str, Any]] | None:
        found = _bound(cp)
        return found if len(found) == 2 else None

    placed = wait_for(both, timeout=90, what="both members bound")
    taken: set[tuple[str, int]] = set()
    for pod in placed.values():
        node = pod["spec"]["nodeName"]
        minors = [
            e["minor"] for e in json.loads(pod["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED])["gpu"]
        ]
        assert len(minors) == 4, minors
        switches = {_pcie_of(cp, node)[m] for m in minors}
        assert len(switches) == 1, (node, minors, switches)  # one PCIe switch each
        assert not taken & {(node, m) for m in minors}  # no card given twice
        taken |= {(node, m) for m in minors}
