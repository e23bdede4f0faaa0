"""GPU + RDMA joint allocation on the real API server: NICs and VFs that exist, on the GPUs' switch.

One fake node of its own (tainted, so no other scenario's pods land there): 8 GPUs and 4 RDMA NICs
with 4 SR-IOV VFs each, on two NUMA nodes with two PCIe switches each (cards 0-1 and NIC 0 under
the first switch, and so on). koordlet (``--simulate-devices``) writes its Device and koord-manager
sums cards and NICs into its allocatable, as on a real cluster. Joint ``SamePCIe`` pods bind with
their NICs exactly on their cards' switches, VF pods get VFs the Device lists, never one twice,
whole-NIC and RDMA-only pods work, a joint pod whose switch has no NIC left waits with
Koordinator's reason, and a restarted scheduler reads the VFs back from the bound pods. The
v1.6 example of docs/devices.md binds as the guide says.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_ALLOCATED,
    ANNOTATION_DEVICE_JOINT_ALLOCATE,
)
from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.devices import Pool
from e2e.devices import reported_devices as reported_devices_of
from e2e.scheduler_process import Scheduler, start_scheduler
from e2e.workloads import apply, failed_scheduling, get_object, make_pod, pods, wait_for

NAMESPACE = "device-rdma"
NODE = "rdma-0"
POOL = Pool("rdma")
TAINT, SELECTOR = POOL.taint, POOL.selector
VF_HINT = json.dumps({"rdma": {"vfSelector": {}}})
SAME_PCIE = json.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"})

DEVICES = {
    "reportIntervalSeconds": 5,
    "nodes": [
        {
            "name": NODE,
            "gpus": {"count": 8, "model": "NVIDIA L40S", "memory": "48Gi"},
            "rdma": {"count": 4, "vfs": 4},
        }
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
        tmp_path_factory.mktemp("device-rdma"),
        koordlet="koordlet-rdma",
        synced={NODE: {"koordinator.sh/rdma": "400"}},
    ):
        yield


class Topology:
    """The Device koordlet wrote: each card's and NIC's PCIe switch, each NIC's VFs."""

    def __init__(self, cp: ControlPlane) -> None:
        device = get_object(cp, "device", NODE)
        self.gpu_pcie: dict[int, str] = {}
        self.nic_pcie: dict[int, str] = {}
        self.vfs: dict[int, dict[str, int]] = {}
        for info in device["spec"]["devices"]:
            pcie = info["topology"]["pcieID"]
            if info["type"] == "gpu":
                self.gpu_pcie[info["minor"]] = pcie
            elif info["type"] == "rdma":
                self.nic_pcie[info["minor"]] = pcie
                self.vfs[info["minor"]] = {
                    vf["busID"]: vf["minor"] for group in info.get("vfGroups") or [] for vf in group["vfs"]
                }


def _allocated(pod: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(pod["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED])
    return value


def _bound(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        for pod in pods(cp, namespace):
            if pod["metadata"]["name"] == name and pod["spec"].get("nodeName"):
                return pod
        return None

    return wait_for(check, timeout=60, what=f"{name} bound")


def _place(
    cp: ControlPlane, name: str, resources: dict[str, str], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    pod = make_pod(
        name,
        NAMESPACE,
        cpu="100m",
        memory="64Mi",
        extra=resources,
        node_selector=SELECTOR,
        tolerations=[TAINT],
        annotations=annotations,
    )
    apply(cp, [pod])
    bound = _bound(cp, NAMESPACE, name)
    assert bound["spec"]["nodeName"] == NODE
    return _allocated(bound)


def _joint(gpus: int) -> tuple[dict[str, str], dict[str, str]]:
    resources = {"nvidia.com/gpu": str(gpus), "koordinator.sh/rdma": "1"}
    return resources, {ANNOTATION_DEVICE_JOINT_ALLOCATE: SAME_PCIE, ANNOTATION_DEVICE_ALLOCATE_HINT: VF_HINT}


def _vf(entry: dict[str, Any]) -> tuple[int, str] | None:
    vfs = (entry.get("extension") or {}).get("vfs") or []
    assert len(vfs) <= 1, entry
    return (entry["minor"], vfs[0]["busID"]) if vfs else None


def _check_nics(cp: ControlPlane, topo: Topology) -> set[tuple[int, str]]:
    """Every rdma entry names a NIC and VF of the Device, no NIC above 100, no VF twice."""
    amount: Counter[int] = Counter()
    held: Counter[tuple[int, str]] = Counter()
    for pod in pods(cp, NAMESPACE):
        if not pod["spec"].get("nodeName"):
            continue
        for entry in _allocated(pod).get("rdma", []):
            assert entry["minor"] in topo.nic_pcie, entry
            amount[entry["minor"]] += int(entry["resources"]["koordinator.sh/rdma"])
            vf = _vf(entry)
            if vf is not None:
                assert vf[1] in topo.vfs[vf[0]], entry  # a VF the Device lists for that NIC
                assert entry["extension"]["vfs"][0].get("minor", 0) == topo.vfs[vf[0]][vf[1]]
                held[vf] += 1
    assert all(v <= 100 for v in amount.values()), amount
    assert all(n == 1 for n in held.values()), held
    return set(held)


def test_joint_gpu_rdma_pods_get_nics_and_vfs_on_their_gpus_switches(
    control_plane: ControlPlane, scheduler: Scheduler, scheduler_kubeconfig: Path, reported_devices: None
) -> None:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    topo = Topology(cp)
    assert len(topo.nic_pcie) == 4
    assert all(len(v) == 4 for v in topo.vfs.values())

    def switches(allocated: dict[str, Any]) -> tuple[set[str], set[str]]:
        return (
            {topo.gpu_pcie[e["minor"]] for e in allocated["gpu"]},
            {topo.nic_pcie[e["minor"]] for e in allocated["rdma"]},
        )

    # Two cards of one switch, and a VF of the NIC under that same switch.
    pair = _place(cp, "gdr-pair", *_joint(2))
    assert sorted(e["minor"] for e in pair["gpu"]) == [0, 1]
    gpu_switches, nic_switches = switches(pair)
    assert gpu_switches == nic_switches
    assert len(pair["rdma"]) == 1
    assert all(_vf(e) is not None for e in pair["rdma"])

    # Four cards span two switches: one NIC (and VF) on each of them.
    quad = _place(cp, "gdr-quad", *_joint(4))
    assert sorted(e["minor"] for e in quad["gpu"]) == [4, 5, 6, 7]
    gpu_switches, nic_switches = switches(quad)
    assert gpu_switches == nic_switches
    assert len(quad["rdma"]) == 2

    # An RDMA-only VF pod is bin-packed onto a NIC in use, with another VF of it.
    vf_only = _place(cp, "vf-only", {"koordinator.sh/rdma": "1"}, {ANNOTATION_DEVICE_ALLOCATE_HINT: VF_HINT})
    assert vf_only["rdma"][0]["minor"] == pair["rdma"][0]["minor"]
    assert _vf(vf_only["rdma"][0]) != _vf(pair["rdma"][0])

    # A whole NIC: the only one nobody uses (under the second switch), without a VF.
    whole = _place(cp, "whole-nic", {"koordinator.sh/rdma": "100"})
    free_switch = topo.gpu_pcie[2]
    assert [topo.nic_pcie[e["minor"]] for e in whole["rdma"]] == [free_switch]
    assert whole["rdma"][0]["resources"] == {"koordinator.sh/rdma": "100"}
    assert _vf(whole["rdma"][0]) is None
    taken = _check_nics(cp, topo)

    # Cards 2-3 are free but their switch's NIC is not (other NICs are): SamePCIe waits with
    # Koordinator's reason.
    apply(
        cp,
        [
            make_pod(
                "no-nic-there",
                NAMESPACE,
                cpu="100m",
                memory="64Mi",
                extra=_joint(2)[0],
                node_selector=SELECTOR,
                tolerations=[TAINT],
                annotations=_joint(2)[1],
            )
        ],
    )
    violation = "Device Joint-Allocate rules violation"
    messages = wait_for(
        lambda: [m for m in failed_scheduling(cp, NAMESPACE, "no-nic-there") if violation in m],
        timeout=60,
        what="FailedScheduling for no-nic-there naming the joint allocation",
    )
    assert f"1 node(s) {violation}" in messages[-1], messages[-1]
    cp.kubectl("delete", "pod", "-n", NAMESPACE, "no-nic-there", "--wait=false")

    # A restarted scheduler reads the VFs back from the bound pods: a new VF pod gets a fresh one.
    scheduler.component.stop_now(signal.SIGKILL)
    restarted = start_scheduler(cp, scheduler_kubeconfig, scheduler.component.name)
    scheduler.component, scheduler.port = restarted.component, restarted.port
    after = _place(
        cp, "vf-after-restart", {"koordinator.sh/rdma": "1"}, {ANNOTATION_DEVICE_ALLOCATE_HINT: VF_HINT}
    )
    vf = _vf(after["rdma"][0])
    assert vf is not None
    assert vf not in taken
    _check_nics(cp, topo)


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "devices.md"


def _guide_objects() -> list[dict[str, Any]]:
    """The YAML block of docs/devices.md's GPU + RDMA section, as a user would paste it."""
    text = GUIDE.read_text().split("### RDMA NICs and GPU + RDMA joint allocation (GDR)", 1)[1]
    text = text.split("\n### ", 1)[0]  # up to the next section
    (block,) = [part.split("```", 1)[0] for part in text.split("```yaml\n")[1:]]
    return [doc for doc in yaml.safe_load_all(block) if doc]


def test_the_gdr_guide_yaml_binds_as_the_guide_says(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    cp = control_plane
    namespace = "device-gdr-guide"
    cp.create_namespace(namespace)
    objects = _guide_objects()
    apply(cp, [o for o in objects if o["kind"] in ("Node", "Device")])
    wait_nodes_ready(cp)
    by_name = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Pod"}
    got = {}
    for name in ("gdr", "vf-only"):  # in the guide's order: the second lands beside the first
        cp.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(by_name[name]))
        pod = _bound(cp, namespace, name)
        assert pod["spec"]["nodeName"] == "gdr-demo"
        got[name] = _allocated(pod)
    assert [e["minor"] for e in got["gdr"]["gpu"]] == [0]
    assert got["gdr"]["rdma"] == [
        {
            "minor": 1,
            "resources": {"koordinator.sh/rdma": "1"},
            "extension": {"vfs": [{"busID": "0000:2a:00.2"}]},  # omitempty: VF 0 has no minor
        }
    ]
    assert got["vf-only"] == {
        "rdma": [
            {
                "minor": 1,
                "resources": {"koordinator.sh/rdma": "1"},
                "extension": {"vfs": [{"minor": 1, "busID": "0000:2a:00.3"}]},
            }
        ]
    }
