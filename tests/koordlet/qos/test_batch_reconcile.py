"""The reconcile keeps a BE pod's batch-resource cgroups (Koordinator's BatchResource reconcilers, pod
and container level): cpu.shares, CFS quota and memory limit on the pod and on each container found
by its ID, on fake v1 and v2 trees, through the QoS manager's round."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

import pytest

from apis.core import Node, Pod
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLO
from koordlet.fs import HostFS
from koordlet.metric_cache import MetricCache
from koordlet.qos.evictor import Evictor
from koordlet.qos.layout import CgroupLayout
from koordlet.qos.manager import QoSManager
from koordlet.qos.node_qos import NodeQoS
from koordlet.qos.resources import CgroupResource
from koordlet.states.resources import Kind
from koordlet.states.store import States
from tests.koordlet.qos.cgroupfs import CgroupTree

CID = "c" * 64
OTHER = "d" * 64
POD = "kubepods/besteffort/poduid-be"
CONTAINER = f"{POD}/{CID}"
MI = 1024 * 1024
BATCH = {"kubernetes.io/batch-cpu": "20", "kubernetes.io/batch-memory": "64Mi"}


class FakeAPI:
    async def evict(self, namespace: str, name: str) -> None:
        raise AssertionError("no eviction expected")

    async def pod_event(self, pod: Pod, reason: str, message: str, event_type: str, host: str) -> None:
        raise AssertionError(f"no pod event expected: {message}")

    async def node_event(self, node: Node, reason: str, message: str) -> None:
        raise AssertionError(f"no node event expected: {message}")


def be_pod(
    containers: dict[str, dict[str, str] | None],
    ids: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> Pod:
    """A BE pod whose containers request and limit the given resources (None: no resources); ``ids``
    names the container ID of each started container."""
    ids = ids if ids is not None else {name: CID for name in list(containers)[:1]}
    return Pod.model_validate(
        {
            "metadata": {
                "name": "be",
                "namespace": "default",
                "uid": "uid-be",
                "labels": labels if labels is not None else {"koordinator.sh/qosClass": "BE"},
            },
            "spec": {
                "nodeName": "node-a",
                "containers": [
                    {"name": name, "resources": {"requests": r, "limits": r} if r else {}}
                    for name, r in containers.items()
                ],
            },
            "status": {
                "qosClass": "BestEffort",
                "phase": "Running",
                "containerStatuses": [
                    {"name": name, "containerID": f"containerd://{cid}"} for name, cid in ids.items()
                ],
            },
        }
    )


def node(ratio: str | None = None) -> Node:
    annotations = {"node.koordinator.sh/cpu-normalization-ratio": ratio} if ratio else {}
    return Node.model_validate({"metadata": {"name": "node-a", "annotations": annotations}})


def tree_of(tmp_path: Path, version: Literal[1, 2], *containers: str) -> CgroupTree:
    tree = CgroupTree(tmp_path, version)
    for cgroup in ("kubepods", "kubepods/besteffort", POD, *(f"{POD}/{c}" for c in containers)):
        tree.add(cgroup)
    # kubelet's values for a BestEffort pod
    for cgroup in (POD, *(f"{POD}/{c}" for c in containers)):
        (tmp_path / tree_file(tree, cgroup, "shares")).write_text("2\n" if version == 1 else "1\n")
    return tree


def tree_file(tree: CgroupTree, cgroup: str, what: str) -> str:
    names = {
        1: {
            "shares": "cpu/cpu.shares",
            "quota": "cpu/cpu.cfs_quota_us",
            "memory": "memory/memory.limit_in_bytes",
        },
        2: {"shares": "cpu.weight", "quota": "cpu.max", "memory": "memory.max"},
    }[tree.version][what]
    controller, _, name = names.rpartition("/")
    return "/".join(p for p in ("sys/fs/cgroup", controller, cgroup, name) if p)


def values(tree: CgroupTree, cgroup: str) -> dict[str, str]:
    return {
        what: (tree.root / tree_file(tree, cgroup, what)).read_text().strip()
        for what in ("shares", "quota", "memory")
    }


def manager_of(
    tmp_path: Path, version: Literal[1, 2], gates: KoordletFeatureGates | None = None, **flags: Any
) -> QoSManager:
    gates = gates or KoordletFeatureGates()
    return QoSManager("node-a", NodeQoS(HostFS(tmp_path), version, gates), MetricCache(), gates, **flags)


def run_round(
    manager: QoSManager, pods: list[Pod], ratio: str | None = None, slo: dict[str, Any] | None = None
) -> None:
    states = States()
    states.replace(Kind.NODE, [node(ratio)])
    states.replace(Kind.POD, pods)
    states.replace(
        Kind.NODE_SLO, [NodeSLO.model_validate({"metadata": {"name": "node-a"}, "spec": slo})] if slo else []
    )
    asyncio.run(manager.round(states, Evictor(FakeAPI())))


V1_WANT = {"shares": "20", "quota": "2000", "memory": str(64 * MI)}
# cpu.weight of 20 shares: 1 + (20 - 2) * 9999 // 262142
V2_WANT = {"shares": "1", "quota": "2000 100000", "memory": str(64 * MI)}


@pytest.mark.parametrize(("version", "want"), [(1, V1_WANT), (2, V2_WANT)])
def test_the_pod_and_its_container_get_their_batch_values(
    tmp_path: Path, version: Literal[1, 2], want: dict[str, str]
) -> None:
    tree = tree_of(tmp_path, version, CID)
    manager = manager_of(tmp_path, version)
    run_round(manager, [be_pod({"main": BATCH})])
    assert values(tree, POD) == want
    assert values(tree, CONTAINER) == want
    assert manager.node_qos is not None
    assert manager.node_qos.writer.failures == []


def test_a_value_reset_by_kubelet_is_restored_next_round(tmp_path: Path) -> None:
    tree = tree_of(tmp_path, 1, CID)
    manager = manager_of(tmp_path, 1)
    pod = be_pod({"main": BATCH})
    run_round(manager, [pod])
    for what, kubelets in (("shares", "2"), ("quota", "-1"), ("memory", "9223372036854771712")):
        (tmp_path / tree_file(tree, CONTAINER, what)).write_text(kubelets + "\n")
        (tmp_path / tree_file(tree, POD, what)).write_text(kubelets + "\n")
    run_round(manager, [pod])
    assert values(tree, CONTAINER) == V1_WANT
    assert values(tree, POD) == V1_WANT


def test_each_container_gets_its_own_and_the_pod_their_sum(tmp_path: Path) -> None:
    tree = tree_of(tmp_path, 1, CID, OTHER)
    pod = be_pod(
        {"a": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "256Mi"}, "b": BATCH},
        ids={"a": CID, "b": OTHER},
    )
    run_round(manager_of(tmp_path, 1), [pod], ratio="2")
    assert values(tree, f"{POD}/{CID}") == {"shares": "1024", "quota": "50000", "memory": str(256 * MI)}
    assert values(tree, f"{POD}/{OTHER}") == {"shares": "20", "quota": "1000", "memory": str(64 * MI)}
    assert values(tree, POD) == {"shares": "1044", "quota": "51000", "memory": str(320 * MI)}


def test_a_container_naming_no_batch_resource_keeps_kubelets_values(tmp_path: Path) -> None:
    tree = tree_of(tmp_path, 1, CID, OTHER)
    pod = be_pod({"a": BATCH, "sidecar": None}, ids={"a": CID, "sidecar": OTHER})
    run_round(manager_of(tmp_path, 1), [pod])
    assert values(tree, f"{POD}/{CID}") == V1_WANT
    assert values(tree, f"{POD}/{OTHER}") == {"shares": "2", "quota": "-1", "memory": "9223372036854771712"}
    assert values(tree, POD) == V1_WANT


KUBELETS = {"shares": "2", "quota": "-1", "memory": "9223372036854771712"}


@pytest.mark.parametrize(
    ("pod", "flags"),
    [
        (be_pod({"main": None}), {}),  # a BE pod on no batch resource
        (be_pod({"main": BATCH}, labels={}), {}),  # not labelled BE
        (be_pod({"main": BATCH}), {"apply_batch_resources": False}),  # left to NRI
    ],
)
def test_pods_left_alone(tmp_path: Path, pod: Pod, flags: dict[str, Any]) -> None:
    tree = tree_of(tmp_path, 1, CID)
    run_round(manager_of(tmp_path, 1, **flags), [pod])
    assert values(tree, POD) == KUBELETS
    assert values(tree, CONTAINER) == KUBELETS


def test_the_batch_resource_gate_off_leaves_the_pod(tmp_path: Path) -> None:
    tree = tree_of(tmp_path, 1, CID)
    run_round(manager_of(tmp_path, 1, KoordletFeatureGates(batch_resource=False)), [be_pod({"main": BATCH})])
    assert values(tree, CONTAINER) == KUBELETS


def test_the_cfs_quota_policy_of_suppression_leaves_every_quota_unlimited(tmp_path: Path) -> None:
    tree = tree_of(tmp_path, 1, CID)
    (tmp_path / tree_file(tree, POD, "quota")).write_text("2000\n")
    (tmp_path / tree_file(tree, CONTAINER, "quota")).write_text("2000\n")
    slo = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
    run_round(manager_of(tmp_path, 1), [be_pod({"main": BATCH})], slo=slo)
    assert values(tree, POD) == {**V1_WANT, "quota": "-1"}
    assert values(tree, CONTAINER) == {**V1_WANT, "quota": "-1"}


def test_an_idle_cgroup_keeps_the_kernels_weight(tmp_path: Path) -> None:
    """The kernel refuses cpu.shares on a group with cpu.idle 1: the reconcile does not fight it."""
    tree = tree_of(tmp_path, 1, CID)
    (tmp_path / f"sys/fs/cgroup/cpu/{POD}/cpu.idle").write_text("1\n")
    (tmp_path / f"sys/fs/cgroup/cpu/{POD}/cpu.shares").write_text("3\n")
    manager = manager_of(tmp_path, 1)
    run_round(manager, [be_pod({"main": BATCH})])
    assert values(tree, POD) == {**V1_WANT, "shares": "3"}
    assert values(tree, CONTAINER) == V1_WANT
    assert manager.node_qos is not None
    assert manager.node_qos.writer.failures == []


def recorded_writes(manager: QoSManager, resource: CgroupResource) -> list[str]:
    assert manager.node_qos is not None
    writer = manager.node_qos.writer
    write = writer.write
    writes: list[str] = []

    def recording(path: str, what: CgroupResource, value: int | str, **kwargs: Any) -> bool:
        if what is resource and path.startswith(POD):
            writes.append(f"{path}={value}")
        return write(path, what, value, **kwargs)

    writer.write = recording  # type: ignore[method-assign]
    return writes


def test_a_quota_going_down_is_written_to_the_container_first_and_going_up_to_the_pod(
    tmp_path: Path,
) -> None:
    """cgroups v1 refuses a child quota above its parent's."""
    tree_of(tmp_path, 1, CID)
    manager = manager_of(tmp_path, 1)
    writes = recorded_writes(manager, CgroupResource.CPU_CFS_QUOTA)
    run_round(manager, [be_pod({"main": BATCH})])
    assert writes == [f"{CONTAINER}=2000", f"{POD}=2000"]
    writes.clear()
    run_round(manager, [be_pod({"main": {**BATCH, "kubernetes.io/batch-cpu": "40"}})])
    assert writes == [f"{POD}=4000", f"{CONTAINER}=4000"]


def test_a_container_without_a_cgroup_yet_is_skipped_without_a_report(tmp_path: Path) -> None:
    tree = tree_of(tmp_path, 1)
    manager = manager_of(tmp_path, 1)
    run_round(manager, [be_pod({"main": BATCH})])
    assert values(tree, POD) == V1_WANT
    assert manager.node_qos is not None
    assert manager.node_qos.writer.failures == []


@pytest.mark.parametrize(
    ("driver", "container_id", "want"),
    [
        ("cgroupfs", f"containerd://{CID}", f"p/{CID}"),
        ("systemd", f"containerd://{CID}", f"p/cri-containerd-{CID}.scope"),
        ("systemd", f"cri-o://{CID}", f"p/crio-{CID}.scope"),
        ("systemd", f"other://{CID}", None),
        ("cgroupfs", CID, None),
    ],
)
def test_a_containers_cgroup_is_named_after_its_id(
    driver: Literal["cgroupfs", "systemd"], container_id: str, want: str | None
) -> None:
    assert CgroupLayout(driver).container_dir("p", container_id) == want
