"""koordlet's topology round on a fake host: the NRT created, left alone while nothing changes,
updated when a pod's cpuset changes, and the pods' cgroups following; failed reads logged once."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from apis.slo.nodeslo import NodeSLO
from koordlet.config import KoordletConfig
from koordlet.fs import HostFS
from koordlet.qos.layout import CgroupLayout
from koordlet.qos.writer import CgroupWriter
from koordlet.topology.agent import host_topology_reporter
from koordlet.topology.cpuset_apply import CPUSetApplier
from koordlet.topology.host import read_host_topology
from koordlet.topology.nrt import desired_topology
from koordlet.topology.reporter import HostTopologyReporter, write_topology
from tests.koordlet.qos.cgroupfs import CgroupTree
from tests.koordlet.topology.builders import node, pod
from tests.koordlet.topology.fake_api import FakeTopologyAPI
from tests.koordlet.topology.fake_sysfs import FakeMachine, linux_numbering

GiB_KB = 1024 * 1024
KUBELET = Path("/var/lib/kubelet/config.yaml")


def _machine(root: Path) -> FakeMachine:
    return FakeMachine(root).build(linux_numbering(1, 2, 4, 2), {0: 8 * GiB_KB, 1: 8 * GiB_KB}, smt_active=1)


def _pools(api: FakeTopologyAPI, key: str = "node.koordinator.sh/cpu-shared-pools") -> list[str]:
    annotations = api.topologies["n1"].metadata.annotations or {}
    return [p.get("cpuset", "") for p in json.loads(annotations[key])]


async def test_a_round_creates_then_updates_only_on_change_and_applies_cpusets(tmp_path: Path) -> None:
    machine = _machine(tmp_path)
    machine.write(
        "var/lib/kubelet/config.yaml",
        "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\n"
        "topologyManagerPolicy: restricted\ntopologyManagerScope: pod\n",
    )
    machine.write(
        "var/lib/kubelet/cpu_manager_state",
        json.dumps({"policyName": "static", "defaultCpuSet": "0-5,8-15", "entries": {"u-g": {"app": "6-7"}}}),
    )
    tree = CgroupTree(tmp_path, 2)
    layout = CgroupLayout("cgroupfs")
    lse = pod("lse", qos="LSE", cpuset="1-2", kube_qos="Guaranteed")
    ls = pod("ls", qos="LS")
    for p in (lse, ls):
        directory = layout.pod_dir(p.status.qos_class, p.metadata.uid or "")  # type: ignore[arg-type]
        tree.add(directory)
        tree.add(f"{directory}/{'c' * 64}")
    api = FakeTopologyAPI([node()], [lse, ls, pod("g", kube_qos="Guaranteed")])
    applier = CPUSetApplier(CgroupWriter(HostFS(tmp_path), 2), layout)
    reporter = HostTopologyReporter("n1", HostFS(tmp_path), KUBELET, applier=applier)

    nrt = await reporter.report_once(api, api.states())
    assert api.writes == [("create", "n1")]
    assert nrt is not None
    assert nrt.topology_policies == ["RestrictedPodLevel"]
    # node 0: CPUs 0-3 and 8-11 less LSE 1-2; node 1: 4-7, 12-15 less the kubelet's 6-7
    assert _pools(api) == ["0,3,8-11", "4-5,12-15"]
    annotations = api.topologies["n1"].metadata.annotations or {}
    assert json.loads(annotations["node.koordinator.sh/pod-cpu-allocs"]) == [
        {"namespace": "default", "name": "g", "uid": "u-g", "cpuset": "6-7", "managedByKubelet": True}
    ]
    ls_dir = layout.pod_dir("Burstable", "u-ls")
    assert tree.read(ls_dir, "cpuset.cpus", "cpuset") == "0,3-5,8-15"
    assert tree.read(f"{ls_dir}/{'c' * 64}", "cpuset.cpus", "cpuset") == "0,3-5,8-15"
    assert tree.read(layout.pod_dir("Guaranteed", "u-lse"), "cpuset.cpus", "cpuset") == "1-2"

    await reporter.report_once(api, api.states())
    assert api.writes == [("create", "n1")]  # nothing changed: nothing written

    api.pods[0] = pod("lse", qos="LSE", cpuset="4", kube_qos="Guaranteed")
    await reporter.report_once(api, api.states())
    assert api.writes == [("create", "n1"), ("update", "n1")]
    assert _pools(api) == ["0-3,8-11", "5,12-15"]
    assert tree.read(ls_dir, "cpuset.cpus", "cpuset") == "0-3,5,8-15"
    assert tree.read(layout.pod_dir("Guaranteed", "u-lse"), "cpuset.cpus", "cpuset") == "4"


async def test_missing_kubelet_config_and_node_are_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _machine(tmp_path)
    caplog.set_level(logging.INFO, "koordlet.topology")
    reporter = HostTopologyReporter("n1", HostFS(tmp_path), KUBELET)
    absent = FakeTopologyAPI([])
    for _ in range(3):
        assert await reporter.report_once(absent, absent.states()) is None
    api = FakeTopologyAPI([node()])
    for _ in range(3):
        await reporter.report_once(api, api.states())
    messages = [r.getMessage() for r in caplog.records]
    assert sum("node n1: not found" in m for m in messages) == 1
    assert sum("kubelet config" in m and "config.yaml" in m for m in messages) == 1
    annotations = api.topologies["n1"].metadata.annotations or {}
    assert annotations["kubelet.koordinator.sh/cpu-manager-policy"] == "{}"
    assert api.topologies["n1"].topology_policies == ["None"]


async def test_a_topology_created_meanwhile_is_left_for_the_next_round(tmp_path: Path) -> None:
    _machine(tmp_path)
    api = FakeTopologyAPI([node()])
    api.conflict_on_create = True
    host = read_host_topology(HostFS(tmp_path))
    status = desired_topology(host, node(), [], cpu_manager=None, topology_policy="None")
    assert await write_topology(api, node(), status, None) == (None, False)


async def test_malformed_annotations_get_one_warning_event_each(tmp_path: Path) -> None:
    _machine(tmp_path)
    bad_pod = pod("bad", qos="LSE", raw_status='{"cpuset":"0-x"}')
    api = FakeTopologyAPI([node()], [bad_pod, pod("ls", qos="LS")])
    reporter = HostTopologyReporter("n1", HostFS(tmp_path), KUBELET)
    for _ in range(3):
        await reporter.report_once(api, api.states())
    assert api.events == [
        {
            "kind": "Pod",
            "name": "bad",
            "namespace": "default",
            "uid": "u-bad",
            "reason": "InvalidResourceStatus",
            "message": "invalid value for scheduling.koordinator.sh/resource-status: cpuset: "
            "invalid CPU list '0-x': '0-x' is not a CPU id or range (got '0-x')",
        }
    ]
    assert "n1" in api.topologies  # the rest of the node is reported
    api.nodes["n1"] = node(annotations={"node.koordinator.sh/system-qos-resource": '{"cpuset": 1}'})
    for _ in range(2):
        await reporter.report_once(api, api.states())
    assert [(e["kind"], e["name"], e["reason"]) for e in api.events[1:]] == [
        ("Node", "n1", "InvalidAnnotation")
    ]
    assert "node.koordinator.sh/system-qos-resource" in (api.events[1]["message"] or "")
    api.nodes["n1"] = node()
    api.pods = []  # the bad pod is gone and comes back: it is complained about again
    await reporter.report_once(api, api.states())
    api.pods = [bad_pod]
    await reporter.report_once(api, api.states())
    assert [e["name"] for e in api.events] == ["bad", "n1", "bad"]


def test_the_agent_applies_cpusets_where_cgroups_are_and_honours_the_gate_and_the_flag(
    tmp_path: Path,
) -> None:

    bare = host_topology_reporter(KoordletConfig(node_name="n1", host_root=tmp_path))
    assert bare.applier is None  # no cgroup mount: reported, nothing applied
    CgroupTree(tmp_path, 2)
    config = KoordletConfig(node_name="n1", host_root=tmp_path, feature_gates="BECPUManager=true")
    reporter = host_topology_reporter(config)
    assert reporter.applier is not None
    assert reporter.applier.be_cpu_manager
    assert reporter.kubelet_config == Path("/var/lib/kubelet/config.yaml")
    off = host_topology_reporter(config.model_copy(update={"apply_cpusets": False}))
    assert off.applier is None


async def test_an_ls_host_application_of_the_nodeslo_gets_the_ls_pools(tmp_path: Path) -> None:
    _machine(tmp_path)
    tree = CgroupTree(tmp_path, 2)
    tree.add("host-latency-sensitive/nginx")
    tree.add("apps/exporter")
    layout = CgroupLayout("cgroupfs")
    lse = pod("lse", qos="LSE", cpuset="1-2", kube_qos="Guaranteed")
    api = FakeTopologyAPI([node()], [lse])
    api.node_slos = [
        NodeSLO.model_validate(
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeSLO",
                "metadata": {"name": "n1"},
                "spec": {
                    "hostApplications": [
                        {"name": "nginx", "qos": "LS"},
                        {"name": "exporter", "qos": "LS", "cgroupPath": {"parentDir": "apps"}},
                        {"name": "bad", "cgroupPath": {"base": "Nowhere"}},
                    ]
                },
            }
        )
    ]
    applier = CPUSetApplier(CgroupWriter(HostFS(tmp_path), 2), layout)
    reporter = HostTopologyReporter("n1", HostFS(tmp_path), KUBELET, applier=applier)
    await reporter.report_once(api, api.states())
    # the LS pools: every CPU but the LSE pod's 1-2
    assert tree.read("host-latency-sensitive/nginx", "cpuset.cpus", "cpuset") == "0,3-15"
    assert tree.read("apps/exporter", "cpuset.cpus", "cpuset") == "0,3-15"

    api.pods = [pod("lse", qos="LSE", cpuset="1-4", kube_qos="Guaranteed")]
    await reporter.report_once(api, api.states())
    assert tree.read("host-latency-sensitive/nginx", "cpuset.cpus", "cpuset") == "0,5-15"
