"""The load file's ``topology`` of a KWOK node: the layout a real host of that shape shows, and the
NRT the simulation writes for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from apis.topology import NodeResourceTopology
from koordlet.fs import HostFS
from koordlet.simulate.model import LoadFile, load_file
from koordlet.simulate.topology import TopologySimulation
from koordlet.simulate.topology_spec import NodeTopologySpec
from koordlet.topology.host import read_host_topology
from tests.koordlet.topology.builders import node, pod
from tests.koordlet.topology.fake_api import FakeTopologyAPI
from tests.koordlet.topology.fake_sysfs import FakeMachine, linux_numbering

LOAD = """
nodes:
- name: n1
  usage: {cpu: "1", memory: 1Gi}
  topology:
    sockets: 2
    numaNodesPerSocket: 2
    coresPerNUMANode: 8
    threadsPerCore: 2
    memoryPerNUMANode: 64Gi
    cpuModel: Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz
    vendorID: GenuineIntel
    kubelet:
      cpuManagerPolicy: static
      reservedSystemCPUs: "0"
      topologyManagerPolicy: single-numa-node
      topologyManagerScope: pod
- names: [n2, n3]
  topology: {coresPerNUMANode: 4, threadsPerCore: 1, memoryPerNUMANode: 8Gi}
- name: no-topology
  usage: {cpu: "1"}
"""


def test_a_simulated_layout_is_what_koordlet_reads_from_a_host_of_that_shape(tmp_path: Path) -> None:
    spec = LoadFile.model_validate(yaml.safe_load(LOAD)).topologies()["n1"]
    FakeMachine(tmp_path).build(
        linux_numbering(2, 2, 8, 2), dict.fromkeys(range(4), 64 * 1024 * 1024), smt_active=1
    )
    real = read_host_topology(HostFS(tmp_path))
    simulated = spec.host()
    assert simulated.cpus == real.cpus
    assert simulated.memory == real.memory
    assert simulated.basic_info == real.basic_info


def test_the_load_file_stays_compatible_and_checks_the_new_fields(tmp_path: Path) -> None:
    load = LoadFile.model_validate(yaml.safe_load(LOAD))
    assert sorted(load.topologies()) == ["n1", "n2", "n3"]
    assert load.for_node("no-topology") is not None
    path = tmp_path / "old.yaml"
    path.write_text("nodes:\n- name: a\n  usage: {cpu: '1'}\ndefault: {usage: {cpu: 250m}}\n")
    assert load_file(path).topologies() == {}
    with pytest.raises(ValidationError, match="cpuManagerPolcy"):
        NodeTopologySpec.model_validate(
            {"coresPerNUMANode": 1, "memoryPerNUMANode": "1Gi", "kubelet": {"cpuManagerPolcy": "static"}}
        )
    with pytest.raises(ValidationError, match="coresPerNUMANode"):
        NodeTopologySpec.model_validate({"memoryPerNUMANode": "1Gi"})
    with pytest.raises(ValidationError, match=r"default\.topology"):
        LoadFile.model_validate(
            {"default": {"topology": {"coresPerNUMANode": 1, "memoryPerNUMANode": "1Gi"}}}
        )


async def test_the_simulation_writes_an_nrt_per_node_of_the_file_with_its_pods() -> None:
    load = LoadFile.model_validate(yaml.safe_load(LOAD))
    lse = pod("lse", qos="LSE", cpuset="1-3", kube_qos="Guaranteed")
    other = pod("elsewhere", qos="LSE", cpuset="4-5", kube_qos="Guaranteed").model_copy(deep=True)
    other.spec.node_name = "n2"
    api = FakeTopologyAPI([node("n1"), node("n2"), node("no-topology")], [lse, other])
    await TopologySimulation(load, 1.0).report_once(api, api.states())
    assert sorted(api.topologies) == ["n1", "n2"]  # n3 is not a node (yet)
    n1: NodeResourceTopology = api.topologies["n1"]
    assert n1.topology_policies == ["SingleNUMANodePodLevel"]
    annotations = n1.metadata.annotations or {}
    assert json.loads(annotations["kubelet.koordinator.sh/cpu-manager-policy"]) == {
        "policy": "static",
        "reservedCPUs": "0",
    }
    assert json.loads(annotations["node.koordinator.sh/cpu-shared-pools"])[0]["cpuset"] == "0,4-7,32-39"
    n2 = api.topologies["n2"]
    assert [(z.name, str(z.resource("cpu").capacity)) for z in n2.zones] == [("node-0", "4")]  # type: ignore[union-attr]
    assert json.loads((n2.metadata.annotations or {})["node.koordinator.sh/cpu-shared-pools"]) == [
        {"socket": 0, "node": 0, "cpuset": "0-3"}
    ]


def test_the_documented_example_describes_the_dev_clusters_nodes() -> None:
    load = load_file(Path(__file__).parents[3] / "docs" / "examples" / "koordlet" / "topology.yaml")
    specs = load.topologies()
    assert sorted(specs) == [f"cpu-{i}" for i in range(4)] + [f"gpu-{i}" for i in range(8)]
    assert len(specs["cpu-0"].host().cpus) == 32
    gpu = specs["gpu-0"].host()
    assert len(gpu.cpus) == 96
    assert specs["gpu-0"].kubelet.nrt_topology_policy() == "SingleNUMANodePodLevel"
    assert specs["gpu-0"].kubelet.cpu_manager(gpu.cpus).reserved_cpus == "0,48"


async def test_a_malformed_pod_on_each_of_two_nodes_gets_one_event_each() -> None:
    load = LoadFile.model_validate(yaml.safe_load(LOAD))
    bad1 = pod("bad1", qos="LSE", raw_status='{"cpuset":"x"}')
    bad2 = pod("bad2", qos="LSE", raw_status='{"cpuset":"y"}').model_copy(deep=True)
    bad2.spec.node_name = "n2"
    api = FakeTopologyAPI([node("n1"), node("n2")], [bad1, bad2])
    simulation = TopologySimulation(load, 1.0)
    for _ in range(3):
        await simulation.report_once(api, api.states())
    assert sorted(str(e["name"]) for e in api.events) == ["bad1", "bad2"]
