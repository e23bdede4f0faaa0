"""koordlet's part of CPU normalization: the node's ``cpu-normalization-ratio`` divides the CFS quota
of LS/no-QoS pods (gate CPUNormalization) and of batch pods (gate BatchResource), read back from fake
v1 and v2 cgroup trees through the QoS manager's round."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from apis.core import Node, Pod
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLO
from koordlet.fs import HostFS
from koordlet.metric_cache import MetricCache
from koordlet.qos.cpu_normalization import normalize_quota, quota_of_milli
from koordlet.qos.evictor import Evictor
from koordlet.qos.manager import EVENT_INVALID_ANNOTATION, QoSManager
from koordlet.qos.node_qos import NodeQoS
from koordlet.states.resources import Kind
from koordlet.states.store import States
from tests.koordlet.qos.cgroupfs import CgroupTree

RATIO = "node.koordinator.sh/cpu-normalization-ratio"
CID = "a" * 64
KUBELET = "123000"


def _pod(
    name: str,
    qos: str | None,
    limits: list[dict[str, str]],
    kube_qos: str = "Burstable",
    annotations: dict[str, str] | None = None,
) -> Pod:
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"uid-{name}",
                "labels": {"koordinator.sh/qosClass": qos} if qos else {},
                "annotations": annotations or {},
            },
            "spec": {
                "nodeName": "node-a",
                "containers": [
                    {"name": f"c{i}", "resources": {"limits": lim}} for i, lim in enumerate(limits)
                ],
            },
            "status": {"qosClass": kube_qos, "phase": "Running"},
        }
    )


def _node(ratio: str | None) -> Node:
    return Node.model_validate(
        {
            "metadata": {"name": "node-a", "uid": "node-uid", "annotations": {RATIO: ratio} if ratio else {}},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}},
        }
    )


@dataclass
class FakeAPI:
    events: list[tuple[str, str, str]] = field(default_factory=list)

    async def evict(self, namespace: str, name: str) -> None:
        raise AssertionError("no eviction expected")

    async def pod_event(self, pod: Pod, reason: str, message: str, event_type: str, host: str) -> None:
        self.events.append((pod.metadata.name or "", reason, message))

    async def node_event(self, node: Node, reason: str, message: str) -> None:
        self.events.append((node.metadata.name or "", reason, message))


def _run(
    tmp_path: Path,
    version: Literal[1, 2],
    ratio: str | None,
    pods: list[Pod],
    gates: KoordletFeatureGates,
    slo: dict[str, Any] | None = None,
    rounds: int = 1,
) -> tuple[CgroupTree, FakeAPI]:
    tree = CgroupTree(tmp_path, version)
    for qos_dir in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
        tree.add(qos_dir)
    for p in pods:
        qos_dir = {"Guaranteed": "kubepods", "BestEffort": "kubepods/besteffort"}.get(
            p.status.qos_class or "", "kubepods/burstable"
        )
        tree.add(f"{qos_dir}/pod{p.metadata.uid}")
        tree.add(f"{qos_dir}/pod{p.metadata.uid}/{CID}")
        # what kubelet wrote before koordlet: a value no rule here computes
        mount = "sys/fs/cgroup/cpu" if version == 1 else "sys/fs/cgroup"
        knob = "cpu.cfs_quota_us" if version == 1 else "cpu.max"
        (tmp_path / mount / qos_dir / f"pod{p.metadata.uid}" / knob).write_text(
            KUBELET if version == 1 else f"{KUBELET} 100000"
        )
    states = States()
    states.replace(Kind.NODE, [_node(ratio)])
    states.replace(Kind.POD, pods)
    states.replace(
        Kind.NODE_SLO,
        [NodeSLO.model_validate({"metadata": {"name": "node-a"}, "spec": slo})] if slo else [],
    )
    api = FakeAPI()
    manager = QoSManager("node-a", NodeQoS(HostFS(tmp_path), version, gates), MetricCache(), gates)
    for _ in range(rounds):
        asyncio.run(manager.round(states, Evictor(api)))
    return tree, api


def _quota(tree: CgroupTree, cgroup: str) -> str:
    return tree.read(cgroup, "cpu.cfs_quota_us" if tree.version == 1 else "cpu.max")


ON = KoordletFeatureGates(cpu_normalization=True)
LS = "kubepods/burstable/poduid-ls"
BE = "kubepods/besteffort/poduid-be"


@pytest.mark.parametrize(("version", "want"), [(1, "160000"), (2, "160000 100000")])
def test_ls_pod_quota_divided_by_the_ratio(tmp_path: Path, version: Literal[1, 2], want: str) -> None:
    tree, api = _run(tmp_path, version, "1.25", [_pod("ls", "LS", [{"cpu": "2"}])], ON)
    assert _quota(tree, LS) == want
    # the container's cgroup (unlimited in the fake tree) keeps its own value
    assert _quota(tree, f"{LS}/{CID}") == ("-1" if version == 1 else "max 100000")
    assert api.events == []


@pytest.mark.parametrize(("version", "want"), [(1, "200000"), (2, "200000 100000")])
def test_batch_pod_quota_from_batch_cpu_divided_by_the_ratio(
    tmp_path: Path, version: Literal[1, 2], want: str
) -> None:
    pod = _pod("be", "BE", [{"kubernetes.io/batch-cpu": "3000"}], kube_qos="BestEffort")
    tree, _ = _run(tmp_path, version, "1.5", [pod], KoordletFeatureGates())
    assert _quota(tree, BE) == want


@pytest.mark.parametrize("ratio", [None, "1.00"])
def test_no_ratio_or_one_gives_the_quota_of_the_limit(tmp_path: Path, ratio: str | None) -> None:
    pods = [
        _pod("ls", None, [{"cpu": "1500m"}, {"cpu": "500m"}]),
        _pod("be", "BE", [{"kubernetes.io/batch-cpu": "3000"}], kube_qos="BestEffort"),
    ]
    tree, _ = _run(tmp_path, 1, ratio, pods, ON)
    assert _quota(tree, LS) == "200000"
    assert _quota(tree, BE) == "300000"


def test_a_container_above_the_new_pod_quota_is_lowered_first(tmp_path: Path) -> None:
    """cgroups v1 refuses a parent quota below a child's: the child is brought down to it."""
    tree = CgroupTree(tmp_path, 1)
    tree.add(LS)
    tree.add(f"{LS}/{CID}")
    (tmp_path / f"sys/fs/cgroup/cpu/{LS}/{CID}/cpu.cfs_quota_us").write_text("200000\n")
    (tmp_path / f"sys/fs/cgroup/cpu/{LS}/cpu.cfs_quota_us").write_text("200000\n")
    states = States()
    states.replace(Kind.NODE, [_node("1.25")])
    states.replace(Kind.POD, [_pod("ls", "LS", [{"cpu": "2"}])])
    states.replace(Kind.NODE_SLO, [])
    manager = QoSManager("node-a", NodeQoS(HostFS(tmp_path), 1, ON), MetricCache(), ON)
    asyncio.run(manager.round(states, Evictor(FakeAPI())))
    assert _quota(tree, LS) == "160000"
    assert _quota(tree, f"{LS}/{CID}") == "160000"


def _preset(tmp_path: Path, cgroup: str, value: str) -> None:
    (tmp_path / f"sys/fs/cgroup/cpu/{cgroup}/cpu.cfs_quota_us").write_text(value + "\n")


def test_a_smaller_ratio_raises_the_pod_before_its_container(tmp_path: Path) -> None:
    """From 1.25 back to 1.00: the pod's quota goes up first, so the container may follow."""
    tree = CgroupTree(tmp_path, 1)
    tree.add(f"{LS}/{CID}")
    _preset(tmp_path, LS, "160000")
    _preset(tmp_path, f"{LS}/{CID}", "160000")
    writes: list[str] = []
    states = States()
    states.replace(Kind.NODE, [_node("1.00")])
    states.replace(Kind.POD, [_pod("ls", "LS", [{"cpu": "2"}])])
    states.replace(Kind.NODE_SLO, [])
    manager = QoSManager("node-a", NodeQoS(HostFS(tmp_path), 1, ON), MetricCache(), ON)
    assert manager.normalizer is not None
    write = manager.normalizer.writer.write

    def recording(path: str, resource: Any, value: int | str) -> bool:
        if path.startswith(LS):
            writes.append(f"{path}={value}")
        return write(path, resource, value)

    manager.normalizer.writer.write = recording  # type: ignore[method-assign]
    asyncio.run(manager.round(states, Evictor(FakeAPI())))
    assert writes == [f"{LS}=200000", f"{LS}/{CID}=200000"]
    assert _quota(tree, f"{LS}/{CID}") == "200000"


def test_containers_of_a_multi_container_pod_are_kept_within_the_pod(tmp_path: Path) -> None:
    tree = CgroupTree(tmp_path, 1)
    other = "b" * 64
    tree.add(f"{LS}/{CID}")
    tree.add(f"{LS}/{other}")
    _preset(tmp_path, LS, "300000")
    _preset(tmp_path, f"{LS}/{CID}", "100000")
    _preset(tmp_path, f"{LS}/{other}", "200000")
    states = States()
    states.replace(Kind.NODE, [_node("2")])
    states.replace(Kind.POD, [_pod("ls", "LS", [{"cpu": "1"}, {"cpu": "2"}])])
    states.replace(Kind.NODE_SLO, [])
    manager = QoSManager("node-a", NodeQoS(HostFS(tmp_path), 1, ON), MetricCache(), ON)
    asyncio.run(manager.round(states, Evictor(FakeAPI())))
    assert _quota(tree, LS) == "150000"
    assert _quota(tree, f"{LS}/{CID}") == "100000"
    assert _quota(tree, f"{LS}/{other}") == "150000"


def test_pods_left_alone(tmp_path: Path) -> None:
    pods = [
        _pod("lsr", "LSR", [{"cpu": "2"}], kube_qos="Guaranteed"),
        _pod("lse", "LSE", [{"cpu": "2"}], kube_qos="Guaranteed"),
        _pod(
            "ls",
            None,
            [{"cpu": "2"}],
            annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset": "0-1"}'},
        ),
    ]
    tree, _ = _run(tmp_path, 1, "1.25", pods, ON)
    assert _quota(tree, "kubepods/poduid-lsr") == KUBELET
    assert _quota(tree, "kubepods/poduid-lse") == KUBELET
    assert _quota(tree, LS) == KUBELET


def test_cpu_normalization_gate_off_leaves_ls_pods(tmp_path: Path) -> None:
    tree, _ = _run(tmp_path, 1, "1.25", [_pod("ls", "LS", [{"cpu": "2"}])], KoordletFeatureGates())
    assert _quota(tree, LS) == KUBELET


def test_a_container_without_a_cpu_limit_leaves_the_pod_unlimited(tmp_path: Path) -> None:
    tree, _ = _run(tmp_path, 1, "1.25", [_pod("ls", "LS", [{"cpu": "2"}, {}])], ON)
    assert _quota(tree, LS) == "-1"


def test_batch_pods_unlimited_under_cfs_quota_suppression(tmp_path: Path) -> None:
    """The besteffort cgroup's quota rules them then, and must not be below a child's."""
    slo = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
    pod = _pod("be", "BE", [{"kubernetes.io/batch-cpu": "3000"}], kube_qos="BestEffort")
    tree, _ = _run(tmp_path, 1, "1.5", [pod], KoordletFeatureGates(), slo=slo)
    assert _quota(tree, BE) == "-1"


def test_a_malformed_ratio_is_an_event_on_the_node_and_changes_nothing(tmp_path: Path) -> None:
    pods = [
        _pod("ls", "LS", [{"cpu": "2"}]),
        _pod("be", "BE", [{"kubernetes.io/batch-cpu": "3000"}], kube_qos="BestEffort"),
    ]
    tree, api = _run(tmp_path, 1, "fast", pods, ON, rounds=2)
    assert _quota(tree, LS) == KUBELET
    assert _quota(tree, BE) == KUBELET
    assert len(api.events) == 1
    name, reason, message = api.events[0]
    assert (name, reason) == ("node-a", EVENT_INVALID_ANNOTATION)
    assert RATIO in message


def test_quota_arithmetic() -> None:
    assert quota_of_milli(0) == -1
    assert quota_of_milli(5) == 1000
    assert normalize_quota(100000, 1.3) == 76924
    assert normalize_quota(-1, 2.0) == -1
    assert normalize_quota(100000, 0.5) == 100000


def test_the_guides_numbers_are_what_koordlet_writes() -> None:
    """docs/colocation.md's koordlet paragraph quotes these quotas."""
    guide = (Path(__file__).resolve().parents[3] / "docs" / "colocation.md").read_text()
    assert normalize_quota(quota_of_milli(2000), 1.25) == 160000
    assert normalize_quota(quota_of_milli(3000), 1.5) == 200000
    assert "A 2-core LS limit at ratio 1.25 is 160000 µs" in guide
    assert "batch-cpu limit of 3000 at ratio 1.5\nis 200000 µs" in guide
