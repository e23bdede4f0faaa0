"""What NRI applies at creation beyond the cpuset, with the reconcile's rules: a BE pod's batch
resources (its containers' adjustment and its pod cgroup at RunPodSandbox), the pod cgroup's CPU QoS
(``cpu.idle`` under coreSched, ``cpu.bvt_warp_ns`` under group identity) and the pod's resctrl group
and RDT class, read back from fake cgroup v1/v2 and resctrl trees."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

import pytest

from apis.core import Pod
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.fs import HostFS
from koordlet.nri import adjust
from koordlet.nri.plugin import NRIPlugin
from koordlet.nri.pod_cgroups import HostPodCgroups
from koordlet.nri.proto import api_pb2
from koordlet.qos.node_qos import NodeQoS
from tests.koordlet.nri.test_plugin import Pods, sandbox
from tests.koordlet.qos.cgroupfs import CgroupTree, resctrl_tree

SPEC = "node.koordinator.sh/extended-resource-spec"
RESCTRL = "node.koordinator.sh/resctrl"
BATCH = {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "256Mi"}
BATCH_LIMITS = {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "512Mi"}
BE_PARENT = "/kubepods/besteffort/podu-be"
CORE_SCHED = {
    "resourceQOSStrategy": {
        "policies": {"cpuPolicy": "coreSched"},
        "lsClass": {"cpuQOS": {"enable": True}},
        "beClass": {"cpuQOS": {"enable": True}},
    }
}
GROUP_IDENTITY = {
    "resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True}}, "beClass": {"cpuQOS": {"enable": True}}}
}


def be_sandbox(name: str = "be", **annotations: str) -> api_pb2.PodSandbox:
    spec = {"containers": {"main": {"requests": BATCH, "limits": BATCH_LIMITS}}}
    return sandbox(name, qos="BE", parent=BE_PARENT, annotations={SPEC: json.dumps(spec), **annotations})


def create(plugin: NRIPlugin, pod: api_pb2.PodSandbox, container: str = "main") -> api_pb2.LinuxResources:
    request = api_pb2.CreateContainerRequest(pod=pod, container=api_pb2.Container(id="c1", name=container))
    return asyncio.run(plugin.create_container(request)).adjust.linux.resources


def test_a_be_container_starts_with_shares_quota_and_memory_of_its_batch_resources() -> None:
    resources = create(NRIPlugin(Pods()), be_sandbox())
    # MilliCPUToShares(500) = 512, MilliCPUToQuota(1000) = 100000 µs, 512Mi in bytes
    assert resources.cpu.shares.value == 512
    assert resources.cpu.quota.value == 100_000
    assert resources.memory.limit.value == 512 * 1024 * 1024
    assert not resources.cpu.cpus
    assert not resources.HasField("rdt_class")


def test_the_watched_pods_spec_gives_the_batch_resources_when_the_sandbox_has_no_annotation() -> None:
    watched = Pod.model_validate(
        {
            "metadata": {"uid": "u-be"},
            "spec": {
                "containers": [
                    {"name": "main", "resources": {"requests": BATCH, "limits": BATCH_LIMITS}},
                    {"name": "side", "resources": {}},
                ]
            },
            "status": {"qosClass": "BestEffort"},
        }
    )
    plugin = NRIPlugin(Pods(watched={"u-be": watched}))
    the_sandbox = sandbox("be", qos="BE", parent=BE_PARENT)
    assert create(plugin, the_sandbox).cpu.shares.value == 512
    assert not create(plugin, the_sandbox, "side").HasField("cpu")


@pytest.mark.parametrize(
    ("slo", "ratio", "quota"),
    [
        ({}, 1.25, 80_000),  # ceil(100000 / 1.25): the node's CPU normalization
        (
            {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}},
            None,
            -1,  # suppression by the besteffort quota: BE pods unlimited below it
        ),
    ],
)
def test_the_batch_quota_follows_the_normalization_ratio_and_the_suppress_policy(
    slo: dict[str, Any], ratio: float | None, quota: int
) -> None:
    plugin = NRIPlugin(Pods(slo=NodeSLOSpec.model_validate(slo), ratio=ratio))
    assert create(plugin, be_sandbox()).cpu.quota.value == quota


def test_only_be_pods_and_only_with_the_gate_get_batch_resources() -> None:
    ls = be_sandbox()
    ls.labels["koordinator.sh/qosClass"] = "LS"
    assert not create(NRIPlugin(Pods()), ls).HasField("cpu")
    off = NRIPlugin(Pods(), gates=KoordletFeatureGates(batch_resource=False))
    assert not create(off, be_sandbox()).HasField("cpu")


async def test_an_update_keeps_the_batch_resources() -> None:
    request = api_pb2.UpdateContainerRequest(
        pod=be_sandbox(), container=api_pb2.Container(id="c1", name="main")
    )
    response = await NRIPlugin(Pods()).update_container(request)
    [update] = response.update
    assert (update.linux.resources.cpu.shares.value, update.linux.resources.memory.limit.value) == (
        512,
        512 * 1024 * 1024,
    )


def host(
    tmp_path: Path, version: Literal[1, 2], *, anolis: bool = False
) -> tuple[CgroupTree, HostPodCgroups]:
    tree = CgroupTree(tmp_path, version, anolis=anolis)
    for cgroup in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
        tree.add(cgroup)
    node_qos = NodeQoS(HostFS(tmp_path), version, KoordletFeatureGates())
    return tree, HostPodCgroups(node_qos.writer, node_qos.layout, node_qos.resctrl)


def run_pod_sandbox(plugin: NRIPlugin, pod: api_pb2.PodSandbox) -> None:
    asyncio.run(plugin.state_change(api_pb2.StateChangeEvent(event=api_pb2.RUN_POD_SANDBOX, pod=pod)))


@pytest.mark.parametrize("version", [1, 2])
def test_run_pod_sandbox_writes_the_be_pods_cgroup_batch_resources_and_cpu_idle(
    tmp_path: Path, version: Literal[1, 2]
) -> None:
    tree, pod_cgroups = host(tmp_path, version)
    tree.add("kubepods/besteffort/podu-be")
    tree.add("kubepods/burstable/podu-ls")
    plugin = NRIPlugin(Pods(slo=NodeSLOSpec.model_validate(CORE_SCHED)), pod_cgroups=pod_cgroups)
    run_pod_sandbox(plugin, be_sandbox())
    run_pod_sandbox(plugin, sandbox("ls", qos="LS", parent="/kubepods/burstable/podu-ls"))
    be, ls = "kubepods/besteffort/podu-be", "kubepods/burstable/podu-ls"
    assert tree.read(be, "cpu.idle") == "1"
    assert tree.read(ls, "cpu.idle") == "0"
    if version == 1:
        assert tree.read(be, "cpu.shares") == "512"
        assert tree.read(be, "cpu.cfs_quota_us") == "100000"
        assert tree.read(be, "memory.limit_in_bytes", "memory") == str(512 * 1024 * 1024)
        assert tree.read(ls, "cpu.shares") == "1024"  # not a BE pod: kubelet's
    else:
        assert tree.read(be, "cpu.weight") == "20"  # 512 shares on cpu.weight's scale
        assert tree.read(be, "cpu.max") == "100000 100000"
        assert tree.read(be, "memory.max") == str(512 * 1024 * 1024)


def test_group_identity_writes_the_bvt_of_the_class_where_the_kernel_has_it(tmp_path: Path) -> None:
    tree, pod_cgroups = host(tmp_path, 1, anolis=True)
    tree.add("kubepods/besteffort/podu-be")
    plugin = NRIPlugin(Pods(slo=NodeSLOSpec.model_validate(GROUP_IDENTITY)), pod_cgroups=pod_cgroups)
    run_pod_sandbox(plugin, be_sandbox())
    assert tree.read("kubepods/besteffort/podu-be", "cpu.bvt_warp_ns") == "-1"
    assert tree.read("kubepods/besteffort/podu-be", "cpu.idle") == "0"


def test_without_the_bvt_knob_and_with_the_gate_off_nothing_of_cpu_qos_is_written(tmp_path: Path) -> None:
    tree, pod_cgroups = host(tmp_path, 1)
    tree.add("kubepods/besteffort/podu-be")
    plugin = NRIPlugin(Pods(slo=NodeSLOSpec.model_validate(GROUP_IDENTITY)), pod_cgroups=pod_cgroups)
    run_pod_sandbox(plugin, be_sandbox())
    assert not (tmp_path / "sys/fs/cgroup/cpu/kubepods/besteffort/podu-be/cpu.bvt_warp_ns").exists()
    assert pod_cgroups.writer.failures == []
    off = NRIPlugin(
        Pods(slo=NodeSLOSpec.model_validate(CORE_SCHED)),
        pod_cgroups=pod_cgroups,
        gates=KoordletFeatureGates(group_identity=False),
    )
    run_pod_sandbox(off, be_sandbox())
    assert tree.read("kubepods/besteffort/podu-be", "cpu.idle") == "0"


def test_a_pod_with_its_own_resctrl_gets_its_group_at_run_pod_sandbox_and_the_class_at_creation(
    tmp_path: Path,
) -> None:
    tree, pod_cgroups = host(tmp_path, 1)
    tree.add("kubepods/burstable/podu-own")
    base = resctrl_tree(tmp_path, cbm="7ff", l3_ids=2)
    own = sandbox(
        "own",
        qos="LS",
        parent="/kubepods/burstable/podu-own",
        annotations={
            RESCTRL: '{"llc": {"schemata": {"range": [0, 50]}}, "mb": {"schemata": {"percent": 35}}}'
        },
    )
    plugin = NRIPlugin(Pods(), pod_cgroups=pod_cgroups, gates=KoordletFeatureGates(resctrl_hook=True))
    assert not create(plugin, own).HasField("rdt_class")  # no group yet: containerd would fail it
    run_pod_sandbox(plugin, own)
    assert (base / "koordlet-u-own/schemata").read_text() == "L3:0=3f;1=3f\nMB:0=40;1=40\n"
    assert create(plugin, own).rdt_class.value == "koordlet-u-own"
    asyncio.run(plugin.state_change(api_pb2.StateChangeEvent(event=api_pb2.REMOVE_POD_SANDBOX, pod=own)))
    assert not (base / "koordlet-u-own").exists()


def test_without_resctrl_no_rdt_class_is_set(tmp_path: Path) -> None:
    tree, pod_cgroups = host(tmp_path, 1)
    tree.add("kubepods/burstable/podu-own")
    own = sandbox(
        "own",
        qos="LS",
        parent="/kubepods/burstable/podu-own",
        annotations={RESCTRL: '{"llc": {"schemata": {"range": [0, 50]}}}'},
    )
    plugin = NRIPlugin(Pods(), pod_cgroups=pod_cgroups, gates=KoordletFeatureGates(resctrl_hook=True))
    run_pod_sandbox(plugin, own)
    assert not (tmp_path / "sys/fs/resctrl").exists()
    request = api_pb2.CreateContainerRequest(pod=own, container=api_pb2.Container(name="main"))
    assert not asyncio.run(plugin.create_container(request)).HasField("adjust")


def test_the_adjustment_carries_the_rdt_class_and_an_update_does_not() -> None:
    settings = adjust.ContainerSettings(rdt_class="koordlet-u1")
    assert adjust.adjustment(settings).linux.resources.rdt_class.value == "koordlet-u1"
    assert adjust.update("c1", settings) is None
