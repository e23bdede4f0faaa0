"""DeviceShare on the real API server: GPU pods bind to cards that exist, never overcommitted.

One fake 8-GPU node of its own (tainted, so no other scenario's pods land there): two NUMA nodes,
two PCIe switches each, two cards per switch. koordlet (``--simulate-devices``, the file backend
for KWOK nodes) writes its Device object and koord-manager sums the cards into its allocatable, as
on a real cluster; ``nvidia.com/gpu`` is the NVIDIA device plugin's, written with the node. Pods
of every request shape bind
one after the other; their ``device-allocated`` annotations name minors of the Device, the cards
are bin-packed, no card carries more than 100 gpu-core or its memory, a PCIe-scope hint keeps a
pair on one switch, a request no switch can hold waits with Koordinator's reason, and a restarted
scheduler rebuilds the cards' usage from the bound pods.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.extension.device import ANNOTATION_DEVICE_ALLOCATE_HINT, ANNOTATION_DEVICE_ALLOCATED
from apis.quantity import Quantity
from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.devices import Pool
from e2e.devices import reported_devices as reported_devices_of
from e2e.scheduler_process import Scheduler, start_scheduler
from e2e.workloads import apply, failed_scheduling, make_pod, pods, wait_for

NAMESPACE = "device-share"
NODE = "devshare-0"
POOL = Pool("devshare")
TAINT, SELECTOR = POOL.taint, POOL.selector
CARD_MEMORY = 80 * 2**30


DEVICES = {
    "reportIntervalSeconds": 5,
    "nodes": [
        # 2 NUMA nodes x 2 PCIe roots: cards 0-1, 2-3, 4-5 and 6-7 share a switch. A model with no
        # NVSwitch partition table, so that only the PCIe/NUMA topology shapes the choices.
        {"name": NODE, "gpus": {"count": 8, "model": "NVIDIA L40S", "memory": "80Gi"}}
    ],
}


@pytest.fixture(scope="module")
def reported_devices(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """koordlet writes the node's Device; koord-manager's allocatable sync follows."""
    node = POOL.node(NODE, {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"})
    with reported_devices_of(
        control_plane,
        [node],
        DEVICES,
        tmp_path_factory.mktemp("device-share"),
        koordlet="koordlet-devshare",
        synced={NODE: {"koordinator.sh/gpu-core": "800"}},
    ):
        yield


def _pod(name: str, resources: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return make_pod(
        name,
        NAMESPACE,
        cpu="100m",
        memory="64Mi",
        extra=resources,
        node_selector=SELECTOR,
        tolerations=[TAINT],
        annotations=annotations,
    )


def _bound(cp: ControlPlane, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        for pod in pods(cp, NAMESPACE):
            if pod["metadata"]["name"] == name and pod["spec"].get("nodeName"):
                return pod
        return None

    return wait_for(check, timeout=60, what=f"{name} bound")


def _cards(pod: dict[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(pod["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED])[
        "gpu"
    ]
    return entries


def _place(cp: ControlPlane, name: str, resources: dict[str, str], hint: str | None = None) -> list[int]:
    annotations = {ANNOTATION_DEVICE_ALLOCATE_HINT: hint} if hint else None
    apply(cp, [_pod(name, resources, annotations)])
    pod = _bound(cp, name)
    assert pod["spec"]["nodeName"] == NODE
    # The record came with the Binding (the API server copies its annotations onto the pod), not
    # in a patch of its own: the pod never has cards without its node, and costs one write.
    assert _patched_the_record(pod) == []
    return [entry["minor"] for entry in _cards(pod)]


def _patched_the_record(pod: dict[str, Any]) -> list[str]:
    """The field managers that wrote the device-allocated annotation by a patch or an update (a
    Binding's annotations are copied onto the pod without a managed-fields entry)."""
    key = f'"f:{ANNOTATION_DEVICE_ALLOCATED}"'
    return [
        entry.get("manager", "")
        for entry in pod["metadata"].get("managedFields", [])
        if key in json.dumps(entry.get("fieldsV1", {}))
    ]


def _check_no_card_overcommitted(cp: ControlPlane) -> None:
    core = [0] * 8
    memory = [0] * 8
    for pod in pods(cp, NAMESPACE):
        if not pod["spec"].get("nodeName"):
            continue
        for entry in _cards(pod):
            minor = entry["minor"]
            assert 0 <= minor < 8, entry  # a card the Device lists
            core[minor] += Quantity.parse(entry["resources"]["koordinator.sh/gpu-core"]).value()
            memory[minor] += Quantity.parse(entry["resources"]["koordinator.sh/gpu-memory"]).value()
    assert all(c <= 100 for c in core), core
    assert all(m <= CARD_MEMORY for m in memory), memory


def test_gpu_pods_get_existing_cards_bin_packed_within_their_pcie_scope(
    control_plane: ControlPlane, scheduler: Scheduler, scheduler_kubeconfig: Path, reported_devices: None
) -> None:
    cp = control_plane
    cp.create_namespace(NAMESPACE)

    whole = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"}
    assert _place(cp, "whole", whole) == [0]
    half = {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}
    assert _place(cp, "half", half) == [1]
    # 10Gi of an 80Gi card and 20% of its compute: bin-packed onto the half-used card.
    assert _place(cp, "bytes", {"koordinator.sh/gpu-core": "20", "koordinator.sh/gpu-memory": "10Gi"}) == [1]
    two = {"koordinator.sh/gpu-core": "200", "koordinator.sh/gpu-memory-ratio": "200"}
    assert _place(cp, "two", two) == [2, 3]  # the first PCIe switch with two whole cards
    pcie = '{"gpu": {"requiredTopologyScope": "PCIe"}}'
    assert _place(cp, "nvidia", {"nvidia.com/gpu": "2"}, hint=pcie) == [4, 5]
    _check_no_card_overcommitted(cp)

    # Three cards on one PCIe switch: no switch has them, the pod waits with Koordinator's reason.
    apply(cp, [_pod("three", {"nvidia.com/gpu": "3"}, {ANNOTATION_DEVICE_ALLOCATE_HINT: pcie})])
    messages = wait_for(
        lambda: [m for m in failed_scheduling(cp, NAMESPACE, "three") if "Insufficient gpu devices" in m],
        timeout=60,
        what="FailedScheduling for three naming the GPUs",
    )
    assert "1 Insufficient gpu devices" in messages[-1], messages[-1]
    cp.kubectl("delete", "pod", "-n", NAMESPACE, "three", "--wait=false")

    # A restarted scheduler rebuilds the cards' usage from the bound pods' annotations: card 1
    # (70 gpu-core in use) cannot take another half, and card 0 is not handed out twice.
    scheduler.component.stop_now(signal.SIGKILL)
    restarted = start_scheduler(cp, scheduler_kubeconfig, scheduler.component.name)
    scheduler.component, scheduler.port = restarted.component, restarted.port
    assert _place(cp, "after-restart", half) == [6]
    _check_no_card_overcommitted(cp)


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "devices.md"


def _guide_steps() -> list[list[dict[str, Any]]]:
    """The YAML blocks of docs/devices.md's "Try it", in order, as a user would paste them."""
    text = GUIDE.read_text().split("### Try it", 1)[1].split("\n## ", 1)[0]
    blocks = [part.split("```", 1)[0] for part in text.split("```yaml\n")[1:]]
    return [[doc for doc in yaml.safe_load_all(block) if doc] for block in blocks]


def test_the_guide_yaml_binds_as_the_guide_says(control_plane: ControlPlane, scheduler: Scheduler) -> None:
    cp = control_plane
    namespace = "device-guide"
    cp.create_namespace(namespace)
    first, second = _guide_steps()
    apply(cp, [o for o in first if o["kind"] in ("Node", "Device")])
    wait_nodes_ready(cp)

    def placed(count: int) -> dict[str, list[int]] | None:
        got = {
            p["metadata"]["name"]: [e["minor"] for e in _cards(p)]
            for p in pods(cp, namespace)
            if p["spec"].get("nodeName") == "gpu-demo"
        }
        return got if len(got) == count else None

    for step, count in ((first, 2), (second, 3)):
        pod_docs = [o for o in step if o["kind"] == "Pod"]
        cp.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump_all(pod_docs))
        wait_for(partial(placed, count), timeout=60, what=f"{count} of the guide's pods bound")
    assert placed(3) == {
        "half-gpu": [0],
        "ten-gib": [0],
        "two-on-one-switch": [2, 3],
    }
