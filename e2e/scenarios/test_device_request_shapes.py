"""Every GPU request shape of the v0.7 and v1.6 notes binds where Koordinator would, on the real API
server (issue 14).

Two fake 8-GPU nodes and one without GPUs, in a pool of their own (tainted, so no other scenario's
pods land there). koordlet (``--simulate-devices``, the file backend for KWOK nodes) writes the GPU
nodes' Devices and koord-manager syncs them into their allocatable, ``koordinator.sh/gpu`` and
``gpu.shared`` included, as Koordinator's GPUDeviceResource plugin does. Each shape of the notes
(``koordinator.sh/gpu`` 100/200/400 with PCIe and NUMANode hints, ``gpu.shared`` with a memory
ratio, the v0.7 ``kubernetes.io/gpu-*`` names, ``gpu-core`` with ``gpu-memory-ratio``) binds on a GPU
node; its ``device-allocated`` annotation names cards of that node's Device with the amounts the
shape asks for, within the hinted scope, and no card carries more than 100 gpu-core or its memory.
The node without GPUs never gets such a pod: one pinned to it waits, refused by NodeResourcesFit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from apis.extension.device import ANNOTATION_DEVICE_ALLOCATE_HINT, ANNOTATION_DEVICE_ALLOCATED
from apis.quantity import Quantity
from e2e.cluster.controlplane import ControlPlane
from e2e.devices import Pool
from e2e.devices import reported_devices as reported_devices_of
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, failed_scheduling, make_pod, pods, wait_for

NAMESPACE = "device-shapes"
GPU_NODES = ("shapes-gpu-0", "shapes-gpu-1")
PLAIN = "shapes-plain"
POOL = Pool("shapes")
TAINT, SELECTOR = POOL.taint, POOL.selector
CARD_MEMORY = 80 * 2**30
CORE, RATIO, MEMORY = (
    "koordinator.sh/gpu-core",
    "koordinator.sh/gpu-memory-ratio",
    "koordinator.sh/gpu-memory",
)


DEVICES = {
    "reportIntervalSeconds": 5,
    # 2 NUMA nodes x 2 PCIe roots a node: cards 0-1, 2-3, 4-5 and 6-7 share a switch, 0-3 and 4-7
    # a NUMA node. A model with no NVSwitch partition table: only PCIe/NUMA shape the choices.
    "nodes": [{"name": n, "gpus": {"count": 8, "model": "NVIDIA L40S", "memory": "80Gi"}} for n in GPU_NODES],
}


@pytest.fixture(scope="module")
def gpu_pool(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """koordlet writes the GPU nodes' Devices; koord-manager's allocatable sync follows."""
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    control_plane.create_namespace(NAMESPACE)
    shared = {"koordinator.sh/gpu": "800", "koordinator.sh/gpu.shared": "800"}
    with reported_devices_of(
        control_plane,
        [POOL.node(n, resources) for n in (*GPU_NODES, PLAIN)],
        DEVICES,
        tmp_path_factory.mktemp("device-shapes"),
        koordlet="koordlet-shapes",
        synced={name: shared for name in GPU_NODES},
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


def _hint(scope: str) -> dict[str, str]:
    return {ANNOTATION_DEVICE_ALLOCATE_HINT: json.dumps({"gpu": {"requiredTopologyScope": scope}})}


def _cards(pod: dict[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(pod["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED])[
        "gpu"
    ]
    return sorted(entries, key=lambda e: int(e["minor"]))


def _bound(cp: ControlPlane, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        for pod in pods(cp, NAMESPACE):
            if pod["metadata"]["name"] == name and pod["spec"].get("nodeName"):
                return pod
        return None

    return wait_for(check, timeout=60, what=f"{name} bound")


SHAPES: list[tuple[str, dict[str, str], dict[str, str] | None, int, dict[str, str]]] = [
    # (pod, resources, annotations, cards, resources of each card's entry that must be so)
    ("v16-same-numa", {"koordinator.sh/gpu": "400"}, _hint("NUMANode"), 4, {CORE: "100", RATIO: "100"}),
    ("v16-same-pcie", {"koordinator.sh/gpu": "200"}, _hint("PCIe"), 2, {CORE: "100", RATIO: "100"}),
    ("v16-numa-aligned", {"koordinator.sh/gpu": "200"}, None, 2, {CORE: "100", RATIO: "100"}),
    ("v16-one-gpu", {"koordinator.sh/gpu": "100"}, None, 1, {CORE: "100", RATIO: "100"}),
    ("gpu-percent", {"koordinator.sh/gpu": "50"}, None, 1, {CORE: "50", RATIO: "50"}),
    ("v16-shared-two", {"koordinator.sh/gpu.shared": "2", RATIO: "100"}, None, 2, {RATIO: "50"}),
    (
        "v16-hami",
        {"koordinator.sh/gpu.shared": "1", CORE: "50", RATIO: "50"},
        None,
        1,
        {CORE: "50", RATIO: "50"},
    ),
    (
        "v07-gpu-full",
        {"kubernetes.io/gpu-core": "100", "kubernetes.io/gpu-memory": "8Gi"},
        None,
        1,
        {CORE: "100", MEMORY: "8Gi"},
    ),
    (
        "v07-gpu-half",
        {"kubernetes.io/gpu-core": "50", "kubernetes.io/gpu-memory": "4Gi"},
        None,
        1,
        {CORE: "50", MEMORY: "4Gi"},
    ),
    ("v07-legacy-gpu", {"kubernetes.io/gpu": "100"}, None, 1, {CORE: "100", RATIO: "100"}),
    ("v07-core-ratio", {CORE: "50", RATIO: "50"}, None, 1, {CORE: "50", RATIO: "50"}),
]


def _check_no_card_overcommitted(cp: ControlPlane) -> None:
    core: dict[tuple[str, int], int] = {}
    memory: dict[tuple[str, int], int] = {}
    for pod in pods(cp, NAMESPACE):
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        for entry in _cards(pod):
            card = (node, int(entry["minor"]))
            assert node in GPU_NODES, (pod["metadata"]["name"], node)
            assert 0 <= card[1] < 8, (pod["metadata"]["name"], entry)  # a card the Device lists
            core[card] = core.get(card, 0) + Quantity.parse(entry["resources"][CORE]).value()
            memory[card] = memory.get(card, 0) + Quantity.parse(entry["resources"][MEMORY]).value()
    assert all(c <= 100 for c in core.values()), core
    assert all(m <= CARD_MEMORY for m in memory.values()), memory


def test_every_shape_of_the_notes_binds_on_a_gpu_node_with_its_cards(
    control_plane: ControlPlane, scheduler: Scheduler, gpu_pool: None
) -> None:
    cp = control_plane
    for name, resources, hint, count, amounts in SHAPES:
        apply(cp, [_pod(name, resources, hint)])
        pod = _bound(cp, name)
        assert pod["spec"]["nodeName"] in GPU_NODES, (name, pod["spec"]["nodeName"])
        cards = _cards(pod)
        assert len(cards) == count, (name, cards)
        for entry in cards:
            got = {k: Quantity.parse(v) for k, v in entry["resources"].items()}
            assert all(got.get(k) == Quantity.parse(v) for k, v in amounts.items()), (name, entry)
        minors = [int(e["minor"]) for e in cards]
        if hint == _hint("PCIe"):
            assert len({m // 2 for m in minors}) == 1, (name, minors)
        if hint == _hint("NUMANode"):
            assert len({m // 4 for m in minors}) == 1, (name, minors)
    _check_no_card_overcommitted(cp)
    assert all(p["spec"].get("nodeName") != PLAIN for p in pods(cp, NAMESPACE))


@pytest.mark.parametrize(
    ("name", "resources"),
    [
        ("pinned-gpu", {"koordinator.sh/gpu": "100"}),
        ("pinned-shared", {"koordinator.sh/gpu.shared": "1", CORE: "50", RATIO: "50"}),
        ("pinned-legacy", {"kubernetes.io/gpu": "100"}),
    ],
)
def test_a_node_without_gpus_never_gets_a_gpu_pod(
    control_plane: ControlPlane, scheduler: Scheduler, gpu_pool: None, name: str, resources: dict[str, str]
) -> None:
    cp = control_plane
    pod = _pod(name, resources)
    pod["spec"]["nodeSelector"] = {**SELECTOR, "kubernetes.io/hostname": PLAIN}
    apply(cp, [pod])
    messages = wait_for(
        lambda: [m for m in failed_scheduling(cp, NAMESPACE, name) if "Insufficient koordinator.sh/" in m],
        timeout=60,
        what=f"FailedScheduling for {name} naming the missing GPU resource",
    )
    assert "Insufficient koordinator.sh/gpu" in messages[-1], messages[-1]
    bound = [p for p in pods(cp, NAMESPACE) if p["metadata"]["name"] == name and p["spec"].get("nodeName")]
    assert not bound
    cp.kubectl("delete", "pod", "-n", NAMESPACE, name, "--wait=false")
