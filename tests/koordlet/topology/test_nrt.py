"""The NodeResourceTopology koordlet writes, exactly, from fake machines, kubelets, nodes and pods."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apis.errors import InvalidAnnotation
from apis.extension.numa import KubeletCPUManagerPolicy, get_cpu_topology
from apis.quantity import Quantity
from apis.topology import NodeResourceTopology
from koordlet.fs import HostFS
from koordlet.topology.host import HostTopology, read_host_topology
from koordlet.topology.kubelet import KubeletConfig
from koordlet.topology.nrt import desired_topology, merge_topology, new_topology
from tests.koordlet.topology.builders import node, pod
from tests.koordlet.topology.fake_sysfs import FakeMachine, linux_numbering

GiB_KB = 1024 * 1024
STATIC = KubeletConfig.model_validate(
    {
        "cpuManagerPolicy": "static",
        "kubeReserved": {"cpu": "1"},
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "pod",
    }
)


@pytest.fixture
def host(tmp_path: Path) -> HostTopology:
    """2 sockets x 2 NUMA x 8 cores x 2 threads, 64Gi per NUMA node."""
    FakeMachine(tmp_path).build(
        linux_numbering(2, 2, 8, 2), dict.fromkeys(range(4), 64 * GiB_KB), smt_active=1
    )
    return read_host_topology(HostFS(tmp_path))


def _zone(
    name: str, cpu: str, memory: str, cpu_alloc: str | None = None, mem_alloc: str | None = None
) -> dict[str, Any]:
    def res(n: str, cap: str, alloc: str | None = None) -> dict[str, str]:
        return {"name": n, "capacity": cap, "allocatable": alloc or cap, "available": alloc or cap}

    return {
        "name": name,
        "type": "Node",
        "resources": [
            res("cpu", cpu, cpu_alloc),
            res("hugepages-1Gi", "0"),
            res("hugepages-2Mi", "0"),
            res("memory", memory, mem_alloc),
        ],
    }


def _written(host: HostTopology, n: Any, pods: list[Any], **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("cpu_manager", STATIC.cpu_manager(host.cpus))
    kwargs.setdefault("topology_policy", STATIC.nrt_topology_policy())
    status = desired_topology(host, n, pods, **kwargs)
    merged = merge_topology(new_topology(n), status)
    assert merged is not None
    return merged.to_wire()


def test_the_nrt_of_a_static_kubelet_node_with_lse_lsr_ls_and_kubelet_pods(host: HostTopology) -> None:
    n = node(
        annotations={
            "node.koordinator.sh/reservation": '{"reservedCPUs":"63"}',
            "node.koordinator.sh/system-qos-resource": '{"cpuset":"62"}',
        }
    )
    pods = [
        pod("lse", qos="LSE", cpuset="0-3", kube_qos="Guaranteed"),
        pod("lsr", qos="LSR", cpuset="8-9,40-41", kube_qos="Guaranteed"),
        pod("ls", qos="LS"),
        pod("g", kube_qos="Guaranteed"),
        pod("done", qos="LSE", cpuset="24-25", phase="Succeeded"),
    ]
    state = {
        "u-g": frozenset({16, 17}),
        "u-ls": frozenset({18}),
        "u-lsr": frozenset({8}),
        "u-gone": frozenset({20}),
    }
    wire = _written(host, n, pods, kubelet_state=state)
    annotations = wire["metadata"]["annotations"]
    assert wire["metadata"]["name"] == "n1"
    assert wire["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "Koordinator"}
    assert wire["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": "n1",
            "uid": "uid-n1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert wire["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    assert wire["zones"] == [_zone(f"node-{i}", "16", "64Gi") for i in range(4)]
    # LS pool: every CPU less the kubelet's pod CPUs (16-17, 20 of a pod no longer listed), the
    # LSE and LSR cpusets, the node reservation (63) and the exclusive SYSTEM cpuset (62); the
    # kubelet's own reserved CPU 0 would stay (it is in the LSE cpuset here anyway)
    assert json.loads(annotations["node.koordinator.sh/cpu-shared-pools"]) == [
        {"socket": 0, "node": 0, "cpuset": "4-7,32-39"},
        {"socket": 0, "node": 1, "cpuset": "10-15,42-47"},
        {"socket": 1, "node": 2, "cpuset": "18-19,21-23,48-55"},
        {"socket": 1, "node": 3, "cpuset": "24-31,56-61"},
    ]
    # BE pool: LSR CPUs are shared with BE pods, LSE ones are not
    assert json.loads(annotations["node.koordinator.sh/be-cpu-shared-pools"]) == [
        {"socket": 0, "node": 0, "cpuset": "4-7,32-39"},
        {"socket": 0, "node": 1, "cpuset": "8-15,40-47"},
        {"socket": 1, "node": 2, "cpuset": "18-19,21-23,48-55"},
        {"socket": 1, "node": 3, "cpuset": "24-31,56-61"},
    ]
    assert json.loads(annotations["node.koordinator.sh/pod-cpu-allocs"]) == [
        {"uid": "u-g", "namespace": "default", "name": "g", "cpuset": "16-17", "managedByKubelet": True} | {},
        {"uid": "u-gone", "cpuset": "20", "managedByKubelet": True},
    ]
    assert (
        annotations["kubelet.koordinator.sh/cpu-manager-policy"] == '{"policy":"static","reservedCPUs":"0"}'
    )
    assert annotations["node.koordinator.sh/reservation"] == '{"reservedCPUs":"63"}'
    assert annotations["node.koordinator.sh/system-qos-resource"] == '{"cpuset":"62"}'
    assert json.loads(annotations["node.koordinator.sh/cpu-basic-info"]) == {
        "cpuModel": "Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz",
        "hyperThreadEnabled": True,
        "vendorID": "GenuineIntel",
    }
    detail = get_cpu_topology(annotations).detail or []
    assert [(c.id, c.core, c.socket, c.node) for c in detail[:2] + detail[32:34]] == [
        (0, 0, 0, 0), (1, 1, 0, 0), (32, 0, 0, 0), (33, 1, 0, 0),
    ]  # fmt: skip
    assert len(detail) == 64
    assert annotations["node.koordinator.sh/cpu-topology"].startswith(
        '{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":1,"core":1,'
    )


def test_none_policy_kubelet_and_no_pods(host: HostTopology) -> None:
    none = KubeletConfig()
    wire = _written(
        host, node(), [], cpu_manager=none.cpu_manager(host.cpus), topology_policy=none.nrt_topology_policy()
    )
    annotations = wire["metadata"]["annotations"]
    assert wire["topologyPolicies"] == ["None"]
    assert annotations["kubelet.koordinator.sh/cpu-manager-policy"] == '{"policy":"none"}'
    assert annotations["node.koordinator.sh/pod-cpu-allocs"] == "null"
    assert annotations["node.koordinator.sh/cpu-shared-pools"] == (
        '[{"socket":0,"node":0,"cpuset":"0-7,32-39"},{"socket":0,"node":1,"cpuset":"8-15,40-47"},'
        '{"socket":1,"node":2,"cpuset":"16-23,48-55"},{"socket":1,"node":3,"cpuset":"24-31,56-63"}]'
    )
    assert "node.koordinator.sh/reservation" not in annotations
    assert "node.koordinator.sh/system-qos-resource" not in annotations


def test_an_unreadable_kubelet_config_gives_an_unknown_policy_and_topology_none(host: HostTopology) -> None:
    wire = _written(host, node(), [], cpu_manager=None, topology_policy="None")
    assert wire["metadata"]["annotations"]["kubelet.koordinator.sh/cpu-manager-policy"] == "{}"


def test_a_reservation_of_cpu_amount_takes_whole_cores_and_a_shared_system_cpuset_stays(
    host: HostTopology,
) -> None:
    n = node(
        annotations={
            "node.koordinator.sh/reservation": '{"resources":{"cpu":"1500m"},"applyPolicy":"Default"}',
            "node.koordinator.sh/system-qos-resource": '{"cpuset":"1","cpusetExclusive":false}',
        }
    )
    annotations = _written(host, n, [])["metadata"]["annotations"]
    # ceil(1.5) = 2 CPUs, the two threads of core 0
    assert json.loads(annotations["node.koordinator.sh/reservation"]) == {
        "resources": {"cpu": "1500m"},
        "reservedCPUs": "0,32",
        "applyPolicy": "Default",
    }
    assert json.loads(annotations["node.koordinator.sh/cpu-shared-pools"])[0] == {
        "socket": 0,
        "node": 0,
        "cpuset": "1-7,33-39",
    }


def test_enable_numa_reservation_spreads_the_kubelet_reservation_over_the_zones(host: HostTopology) -> None:
    n = node(
        labels={"node.koordinator.sh/enable-numa-reservation": "true"},
        capacity={"cpu": "64", "memory": "256Gi"},
        allocatable={"cpu": "62", "memory": "252Gi"},
    )
    wire = _written(host, n, [])
    assert wire["zones"] == [_zone(f"node-{i}", "16", "64Gi", "15500m", "63Gi") for i in range(4)]
    assert wire["metadata"]["labels"]["node.koordinator.sh/enable-numa-reservation"] == "true"


def test_one_numa_node_machine(tmp_path: Path) -> None:
    FakeMachine(tmp_path).build(linux_numbering(1, 1, 4, 2), {0: 16 * GiB_KB}, numa_dirs=False)
    host = read_host_topology(HostFS(tmp_path))
    wire = _written(host, node(), [pod("lse", qos="LSE", cpuset="1,5", kube_qos="Guaranteed")])
    assert wire["zones"] == [_zone("node-0", "8", "16Gi")]
    assert wire["metadata"]["annotations"]["node.koordinator.sh/cpu-shared-pools"] == (
        '[{"socket":0,"node":0,"cpuset":"0,2-4,6-7"}]'
    )


def test_merging_keeps_what_others_wrote_and_reports_no_change_the_second_time(host: HostTopology) -> None:
    n = node()
    status = desired_topology(host, n, [], cpu_manager=None, topology_policy="None")
    existing = NodeResourceTopology.model_validate(
        new_topology(n).to_wire()
        | {
            "zones": [
                {
                    "name": "node-0",
                    "type": "Node",
                    "resources": [
                        {"name": "cpu", "capacity": "2", "allocatable": "2", "available": "2"},
                        {
                            "name": "kubernetes.io/batch-cpu",
                            "capacity": "9k",
                            "allocatable": "9k",
                            "available": "9k",
                        },
                    ],
                },
                {"name": "node-9", "type": "Node"},
            ]
        }
    )
    existing.metadata.annotations = {"someone/else": "x", "node.koordinator.sh/reservation": "{}"}
    merged = merge_topology(existing, status)
    assert merged is not None
    zone0 = merged.numa_zones()[0]
    assert [r.name for r in zone0.resources or ()] == [
        "cpu",
        "hugepages-1Gi",
        "hugepages-2Mi",
        "kubernetes.io/batch-cpu",
        "memory",
    ]
    assert zone0.resource("kubernetes.io/batch-cpu").allocatable == Quantity.parse("9k")  # type: ignore[union-attr]
    assert zone0.resource("cpu").capacity == Quantity.parse("16")  # type: ignore[union-attr]
    assert sorted(merged.numa_zones()) == [0, 1, 2, 3]  # node-9 is gone
    annotations = merged.metadata.annotations or {}
    assert annotations["someone/else"] == "x"
    assert "node.koordinator.sh/reservation" not in annotations  # the node has none any more
    assert merge_topology(merged, status) is None


def test_a_malformed_pod_resource_status_is_left_out_and_a_malformed_node_reservation_raises(
    host: HostTopology,
) -> None:
    bad: list[tuple[Any, str]] = []
    pods = [pod("bad", qos="LSE", raw_status='{"cpuset":"x-y"}'), pod("bad2", raw_status="{not json")]
    wire = _written(host, node(), pods, bad_pods=bad)
    pools = json.loads(wire["metadata"]["annotations"]["node.koordinator.sh/cpu-shared-pools"])
    assert pools[0]["cpuset"] == "0-7,32-39"
    assert [(p.metadata.name, problem.split(":")[0]) for p, problem in bad] == [
        # The cpuset is checked as the annotation is read, so both say which annotation is bad alike.
        ("bad", "invalid value for scheduling.koordinator.sh/resource-status"),
        ("bad2", "invalid value for scheduling.koordinator.sh/resource-status"),
    ]
    with pytest.raises(InvalidAnnotation, match=r"node\.koordinator\.sh/reservation"):
        desired_topology(
            host,
            node(annotations={"node.koordinator.sh/reservation": '{"reservedCPUs": 5}'}),
            [],
            cpu_manager=KubeletCPUManagerPolicy(),
            topology_policy="None",
        )
