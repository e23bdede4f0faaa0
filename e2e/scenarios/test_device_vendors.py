"""DeviceShare for Ascend NPUs and Cambricon MLUs on the real API server (Koordinator v1.7).

Two fake nodes of their own (tainted): eight Ascend 910B3 NPUs and two Cambricon MLUs, whose Device
objects koordlet writes from its file backend (``--simulate-devices``) and whose allocatable
koord-manager sums from them, as on a cluster. A koord-scheduler of its own runs with
``--feature-gates=DevicePluginAdaption=true`` under the RBAC the chart grants (the templates
ConfigMap is watched, the node lock patched). A whole-NPU pod and a vNPU pod (a template of the
``gpu-shared-resource-templates`` ConfigMap) bind with Huawei's annotations; a whole MLU binds with
the dynamic-smlu profile and locks the node; an sMLU pod waits while the lock is held and binds with
its profile once the device plugin (played here) lifts it. A third node, labelled Honor, has the
HCCS groups koordlet writes from its config: multi-NPU pods keep to them. No card is ever given more
than it has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED
from apis.quantity import Quantity
from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.components import koordlet_simulation, wait_until_ready
from e2e.scheduler_process import Scheduler, start_scheduler
from e2e.workloads import apply, failed_scheduling, get_object, list_items, make_pod, pods, wait_for

NAMESPACE = "device-vendors"
SCHEDULER = "koord-scheduler-vendors"
NPU_NODE = "vendors-npu-0"
MLU_NODE = "vendors-mlu-0"
HCCS_NODE = "vendors-hccs-0"
HONOR = {"node.koordinator.sh/gpu-partition-policy": "Honor"}
ASCEND = {"vendor": "huawei", "model": "Ascend-910B3", "count": 8, "memory": "64Gi", "aiCore": 20, "aiCPU": 7}
TAINT = {"key": "koord-e2e/pool", "value": "vendors", "effect": "NoSchedule"}
LOCK = "cambricon.com/dsmlu.lock"
GIB = 2**30

CONFIG = f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: {SCHEDULER}
"""

DEVICES = {
    "reportIntervalSeconds": 5,
    "nodes": [
        {
            "name": NPU_NODE,
            "accelerators": ASCEND,
        },
        {
            # The HCCS groups as koord-device-daemon reports them: each card alone, the two quads.
            "name": HCCS_NODE,
            "accelerators": ASCEND,
            "gpuPartitions": {
                "1": [{"minors": [m], "gpuLinkType": "HCCS", "allocationScore": 1} for m in range(8)],
                "4": [
                    {"minors": [0, 1, 2, 3], "gpuLinkType": "HCCS", "allocationScore": 1},
                    {"minors": [4, 5, 6, 7], "gpuLinkType": "HCCS", "allocationScore": 1},
                ],
            },
        },
        {
            "name": MLU_NODE,
            "accelerators": {"vendor": "cambricon", "model": "MLU370-X8", "count": 2, "memory": "24Gi"},
        },
    ],
}

TEMPLATES = {
    "huawei-Ascend-910B3": {
        "vir05_1c_16g": {
            "huawei.com/npu-core": "5",
            "huawei.com/npu-cpu": "1",
            "koordinator.sh/gpu-memory": "16Gi",
        },
        "vir10_3c_32g": {
            "huawei.com/npu-core": "10",
            "huawei.com/npu-cpu": "3",
            "koordinator.sh/gpu-memory": "32Gi",
        },
    }
}


def _node(name: str, cards: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    # koordinator.sh/gpu.shared is in allocatable only with koord-manager's EnableSyncGPUSharedResource
    # gate in Koordinator (100 per healthy card), which koord-manager here does not have: written
    # with the node, as the vendor's device plugin resources would be.
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "koordinator.sh/gpu.shared": str(100 * cards)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, **(labels or {})},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _templates_configmap() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gpu-shared-resource-templates", "namespace": "koordinator-system"},
        "data": {"data.yaml": yaml.safe_dump(TEMPLATES)},
    }


def _allocatable(cp: ControlPlane, node: str) -> dict[str, str]:
    got: dict[str, str] = get_object(cp, "node", node)["status"].get("allocatable") or {}
    return got


@pytest.fixture(scope="module")
def vendor_nodes(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    cp = control_plane
    apply(cp, [_node(NPU_NODE, 8), _node(MLU_NODE, 2), _node(HCCS_NODE, 8, HONOR)])
    wait_nodes_ready(cp)
    path = tmp_path_factory.mktemp("device-vendors") / "devices.yaml"
    path.write_text(yaml.safe_dump(DEVICES))
    koordlet = koordlet_simulation(cp, None, devices_file=path, name="koordlet-vendors")
    koordlet.start()
    try:

        def synced() -> bool:
            npu = _allocatable(cp, NPU_NODE).get("huawei.com/npu-core")
            mlu = _allocatable(cp, MLU_NODE).get("koordinator.sh/gpu-core")
            hccs = _allocatable(cp, HCCS_NODE).get("huawei.com/npu-core")
            return npu == "160" and mlu == "200" and hccs == "160"

        wait_for(synced, timeout=90, what="koordlet's Devices summed into the nodes' allocatable")
        yield
    finally:
        koordlet.stop()


@pytest.fixture(scope="module")
def adapting_scheduler(control_plane: ControlPlane, scheduler_kubeconfig: Path) -> Iterator[Scheduler]:
    running = start_scheduler(
        control_plane,
        scheduler_kubeconfig,
        SCHEDULER,
        config_text=CONFIG,
        leader_elect=False,
        extra_args=["--feature-gates=DevicePluginAdaption=true"],
    )
    try:
        wait_until_ready(running.component, running.port)
        yield running
    finally:
        running.component.stop()


def _pod(name: str, node: str, resources: dict[str, str]) -> dict[str, Any]:
    pod = make_pod(
        name, NAMESPACE, cpu="100m", memory="64Mi", extra=resources, scheduler=SCHEDULER, tolerations=[TAINT]
    )
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


def _bound(cp: ControlPlane, name: str, timeout: float = 60) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        for pod in pods(cp, NAMESPACE):
            if pod["metadata"]["name"] == name and pod["spec"].get("nodeName"):
                return pod
        return None

    return wait_for(check, timeout=timeout, what=f"{name} bound")


def _cards(pod: dict[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(pod["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED])[
        "gpu"
    ]
    return entries


def _check_no_card_overcommitted(cp: ControlPlane) -> None:
    """Summed over the bound pods, per card: within the Device's AI cores, AI CPUs, memory."""
    devices = {
        d["metadata"]["name"]: {g["minor"]: g["resources"] for g in d["spec"]["devices"]}
        for d in list_items(cp, "devices")
        if d["metadata"]["name"] in (NPU_NODE, MLU_NODE, HCCS_NODE)
    }
    used: dict[tuple[str, int, str], int] = {}
    for pod in pods(cp, NAMESPACE):
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        for entry in _cards(pod):
            assert entry["minor"] in devices[node], entry  # a card the Device lists
            for name, value in entry["resources"].items():
                key = (node, entry["minor"], name)
                used[key] = used.get(key, 0) + Quantity.parse(value).value()
    for (node, minor, name), amount in used.items():
        capacity = devices[node][minor].get(name)
        assert capacity is not None, (node, minor, name)
        assert amount <= Quantity.parse(capacity).value(), (node, minor, name, amount)


def test_npu_and_mlu_pods_bind_with_koordinators_annotations(
    control_plane: ControlPlane, vendor_nodes: None, adapting_scheduler: Scheduler
) -> None:
    cp = control_plane
    if cp.read("namespace", NAMESPACE) is None:
        cp.create_namespace(NAMESPACE)
    if cp.read("namespace", "koordinator-system") is None:
        cp.create_namespace("koordinator-system")
    apply(cp, [_templates_configmap()])

    # A whole NPU: its AI cores and all of its memory ratio.
    apply(
        cp, [_pod("npu", NPU_NODE, {"huawei.com/npu-core": "20", "koordinator.sh/gpu-memory-ratio": "100"})]
    )
    pod = _bound(cp, "npu")
    (card,) = _cards(pod)
    assert card["minor"] == 0
    assert card["resources"]["huawei.com/npu-core"] == "20"
    assert card["resources"]["koordinator.sh/gpu-memory-ratio"] == "100"
    ann = pod["metadata"]["annotations"]
    assert ann["huawei.com/npu-core"] == "0"
    assert ann["predicate-time"] == ann["scheduling.koordinator.sh/bind-timestamp"]
    assert ann["scheduling.koordinator.sh/gpu-minors"] == "0"

    # A vNPU equal to the template vir05_1c_16g, on the next card (card 0 is taken whole).
    vnpu = {
        "koordinator.sh/gpu.shared": "1",
        "huawei.com/npu-core": "5",
        "huawei.com/npu-cpu": "1",
        "koordinator.sh/gpu-memory": "16Gi",
    }
    apply(cp, [_pod("vnpu", NPU_NODE, vnpu)])
    pod = _bound(cp, "vnpu")
    (card,) = _cards(pod)
    assert card["minor"] == 1
    assert card["extension"] == {"gpuSharedResourceTemplate": "vir05_1c_16g"}
    assert pod["metadata"]["annotations"]["huawei.com/npu-core"] == "1-vir05_1c_16g"

    # A vNPU matching no template waits with Koordinator's reason.
    odd = {**vnpu, "huawei.com/npu-core": "7"}
    apply(cp, [_pod("odd-vnpu", NPU_NODE, odd)])
    wait_for(
        lambda: [
            m
            for m in failed_scheduling(cp, NAMESPACE, "odd-vnpu")
            if "no matched GPU shared resource template" in m
        ],
        timeout=60,
        what="FailedScheduling for odd-vnpu naming the template",
    )
    cp.kubectl("delete", "pod", "-n", NAMESPACE, "odd-vnpu", "--wait=false")

    # A whole MLU: the dynamic-smlu profile <minor>_<core>_<memory / 256Mi> and the node lock.
    apply(
        cp,
        [_pod("mlu", MLU_NODE, {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"})],
    )
    pod = _bound(cp, "mlu")
    assert [c["minor"] for c in _cards(pod)] == [0]
    ann = pod["metadata"]["annotations"]
    assert ann["CAMBRICON_DSMLU_ASSIGHED"] == "false"
    assert ann["CAMBRICON_DSMLU_PROFILE"] == "0_100_96"
    node = get_object(cp, "node", MLU_NODE)
    assert node["metadata"]["annotations"][LOCK].endswith(f",{NAMESPACE},mlu")

    # An sMLU while the lock is held: the bind fails and is retried ...
    smlu = {
        "koordinator.sh/gpu.shared": "1",
        "koordinator.sh/gpu-memory": "1Gi",
        "koordinator.sh/gpu-core": "10",
    }
    apply(cp, [_pod("smlu", MLU_NODE, smlu)])
    wait_for(
        lambda: [m for m in failed_scheduling(cp, NAMESPACE, "smlu") if "has been locked" in m],
        timeout=60,
        what="FailedScheduling for smlu naming the node lock",
    )
    # ... until the Cambricon device plugin, having allocated, lifts it.
    cp.kubectl("annotate", "node", MLU_NODE, f"{LOCK}-")
    pod = _bound(cp, "smlu", timeout=90)
    (card,) = _cards(pod)
    assert card["minor"] == 1
    assert card["resources"]["koordinator.sh/gpu-core"] == "10"
    assert pod["metadata"]["annotations"]["CAMBRICON_DSMLU_PROFILE"] == "1_10_4"
    _check_no_card_overcommitted(cp)


def test_multi_npu_pods_keep_to_the_hccs_groups_under_honor(
    control_plane: ControlPlane, vendor_nodes: None, adapting_scheduler: Scheduler
) -> None:
    """koordlet writes the HCCS groups from its config; the node is labelled Honor: four NPUs take
    the quad that is whole, and two NPUs (no such group) wait, though three cards are free."""
    cp = control_plane
    if cp.read("namespace", NAMESPACE) is None:
        cp.create_namespace(NAMESPACE)
    device = get_object(cp, "device", HCCS_NODE)
    assert "HCCS" in device["metadata"]["annotations"]["scheduling.koordinator.sh/gpu-partitions"]

    one = {"huawei.com/npu-core": "20", "koordinator.sh/gpu-memory-ratio": "100"}
    apply(cp, [_pod("hccs-one", HCCS_NODE, one)])
    assert [c["minor"] for c in _cards(_bound(cp, "hccs-one"))] == [0]
    four = {"huawei.com/npu-core": "80", "koordinator.sh/gpu-memory-ratio": "400"}
    apply(cp, [_pod("hccs-four", HCCS_NODE, four)])
    pod = _bound(cp, "hccs-four")
    assert [c["minor"] for c in _cards(pod)] == [4, 5, 6, 7]
    assert pod["metadata"]["annotations"]["huawei.com/npu-core"] == "4,5,6,7"
    two = {"huawei.com/npu-core": "40", "koordinator.sh/gpu-memory-ratio": "200"}
    apply(cp, [_pod("hccs-two", HCCS_NODE, two)])
    wait_for(
        lambda: [m for m in failed_scheduling(cp, NAMESPACE, "hccs-two") if "Insufficient gpu devices" in m],
        timeout=60,
        what="FailedScheduling for hccs-two naming the GPUs",
    )
    cp.kubectl("delete", "pod", "-n", NAMESPACE, "hccs-two", "--wait=false")
    _check_no_card_overcommitted(cp)
