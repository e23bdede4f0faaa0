from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import numa
from apis.quantity import Quantity


def test_keys() -> None:
    assert numa.ANNOTATION_NUMA_TOPOLOGY_SPEC == "scheduling.koordinator.sh/numa-topology-spec"
    assert numa.ANNOTATION_RESOURCE_SPEC == "scheduling.koordinator.sh/resource-spec"
    assert numa.ANNOTATION_RESOURCE_STATUS == "scheduling.koordinator.sh/resource-status"
    assert numa.ANNOTATION_NODE_CPU_TOPOLOGY == "node.koordinator.sh/cpu-topology"
    assert numa.ANNOTATION_NODE_BE_CPU_SHARED_POOLS == "node.koordinator.sh/be-cpu-shared-pools"
    assert numa.ANNOTATION_KUBELET_CPU_MANAGER_POLICY == "kubelet.koordinator.sh/cpu-manager-policy"
    assert numa.ANNOTATION_NODE_RESERVATION == "node.koordinator.sh/reservation"
    assert numa.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE == "node.koordinator.sh/system-qos-resource"
    assert numa.LABEL_NUMA_TOPOLOGY_POLICY == "node.koordinator.sh/numa-topology-policy"
    assert numa.LABEL_NODE_ENABLE_NUMA_RESERVATION == "node.koordinator.sh/enable-numa-reservation"


@pytest.mark.parametrize(
    ("raw", "policy", "exclusive"),
    [
        pytest.param(
            '{"numaTopologyPolicy":"Restricted", "singleNUMANodeExclusive":"Preferred"}',
            "Restricted",
            "Preferred",
            id="v1.6-notes",
        ),
        pytest.param(
            '{"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "Required"}',
            "SingleNUMANode",
            "Required",
            id="single",
        ),
        pytest.param(
            '{"numaTopologyPolicy": "", "singleNUMANodeExclusive": ""}', "", None, id="empty-values"
        ),
        pytest.param("{}", "", None, id="empty-object"),
        pytest.param('{"numaTopologyPolicy": "BestEffort"}', "BestEffort", None, id="best-effort"),
    ],
)
def test_numa_topology_spec(raw: str, policy: str, exclusive: str | None) -> None:
    spec = numa.parse_numa_topology_spec(raw)
    assert (spec.numa_topology_policy, spec.single_numa_node_exclusive) == (policy, exclusive)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param('{"numaTopologyPolicy": "None"}', "numaTopologyPolicy", id="none-word"),
        pytest.param('{"numaTopologyPolicy": "restricted"}', "numaTopologyPolicy", id="lowercase"),
        pytest.param('{"singleNUMANodeExclusive": "Always"}', "singleNUMANodeExclusive", id="exclusive"),
        pytest.param('{"numaTopologyPolicy": 1}', "numaTopologyPolicy", id="int"),
    ],
)
def test_numa_topology_spec_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        numa.parse_numa_topology_spec(raw)
    assert caught.value.key == numa.ANNOTATION_NUMA_TOPOLOGY_SPEC
    assert fragment in caught.value.problem


def test_resource_spec() -> None:
    spec = numa.parse_resource_spec(
        '{"requiredCPUBindPolicy": "FullPCPUs", "preferredCPUBindPolicy": "SpreadByPCPUs",'
        ' "preferredCPUExclusivePolicy": "PCPULevel"}'
    )
    assert (
        spec.required_cpu_bind_policy,
        spec.preferred_cpu_bind_policy,
        spec.preferred_cpu_exclusive_policy,
    ) == (
        "FullPCPUs",
        "SpreadByPCPUs",
        "PCPULevel",
    )
    assert spec.to_wire() == {
        "requiredCPUBindPolicy": "FullPCPUs",
        "preferredCPUBindPolicy": "SpreadByPCPUs",
        "preferredCPUExclusivePolicy": "PCPULevel",
    }
    assert numa.get_resource_spec({}) == numa.ResourceSpec()


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(
            '{"requiredCPUBindPolicy": "FullPCPUsOnly"}', "requiredCPUBindPolicy", id="node-policy-name"
        ),
        pytest.param(
            '{"preferredCPUExclusivePolicy": "CoreLevel"}', "preferredCPUExclusivePolicy", id="exclusive"
        ),
    ],
)
def test_resource_spec_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        numa.parse_resource_spec(raw)
    assert caught.value.key == numa.ANNOTATION_RESOURCE_SPEC
    assert fragment in caught.value.problem


def test_resource_status() -> None:
    status = numa.parse_resource_status(
        '{"cpuset": "0-3,8", "numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "8Gi"}}]}'
    )
    assert status.cpuset == "0-3,8"
    assert status.numa_node_resources is not None
    assert status.numa_node_resources[0].resources == {
        "cpu": Quantity.parse("4"),
        "memory": Quantity.parse("8Gi"),
    }
    with pytest.raises(InvalidAnnotation) as caught:
        numa.parse_resource_status('{"numaNodeResources": [{"resources": {}}]}')
    assert "numaNodeResources[0].node: Field required" in caught.value.problem


def test_node_topology_annotations() -> None:
    topo = numa.parse_cpu_topology(
        '{"detail": [{"id": 0, "core": 0, "socket": 0, "node": 0},'
        ' {"id": 1, "core": 0, "socket": 0, "node": 0}]}'
    )
    assert topo.detail is not None
    assert len(topo.detail) == 2
    allocs = numa.parse_pod_cpu_allocs(
        '[{"namespace": "ns", "name": "p", "uid": "u", "cpuset": "2-3", "managedByKubelet": true}]'
    )
    assert allocs[0].managed_by_kubelet is True
    pools = numa.parse_cpu_shared_pools('[{"cpuset": "0-7"}, {"socket": 1, "node": 1, "cpuset": "8-15"}]')
    assert [(p.socket, p.node, p.cpuset) for p in pools] == [(0, 0, "0-7"), (1, 1, "8-15")]
    policy = numa.parse_kubelet_cpu_manager_policy(
        '{"policy": "static", "options": {"full-pcpus-only": "true"}, "reservedCPUs": "0-1"}'
    )
    assert policy.reserved_cpus == "0-1"
    assert numa.get_node_be_cpu_shared_pools({}) == []
    assert numa.get_pod_cpu_allocs({}) == []


@pytest.mark.parametrize(
    ("parser", "key", "raw"),
    [
        pytest.param(
            numa.parse_cpu_topology, numa.ANNOTATION_NODE_CPU_TOPOLOGY, '{"detail": [{"id": 0}]}', id="topo"
        ),
        pytest.param(
            numa.parse_pod_cpu_allocs, numa.ANNOTATION_NODE_CPU_ALLOCS, '{"name": "p"}', id="allocs"
        ),
        pytest.param(
            numa.parse_cpu_shared_pools, numa.ANNOTATION_NODE_CPU_SHARED_POOLS, '[{"node": "0"}]', id="pools"
        ),
        pytest.param(
            numa.parse_kubelet_cpu_manager_policy,
            numa.ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
            '{"options": {"full-pcpus-only": true}}',
            id="kubelet",
        ),
    ],
)
def test_node_topology_annotations_reject(parser: object, key: str, raw: str) -> None:
    assert callable(parser)
    with pytest.raises(InvalidAnnotation) as caught:
        parser(raw)
    assert caught.value.key == key


@pytest.mark.parametrize(
    ("labels", "kubelet", "expected"),
    [
        pytest.param({}, None, "None", id="none"),
        pytest.param({numa.LABEL_NODE_CPU_BIND_POLICY: "FullPCPUsOnly"}, None, "FullPCPUsOnly", id="label"),
        pytest.param({numa.LABEL_NODE_CPU_BIND_POLICY: "SpreadByPCPUs"}, None, "SpreadByPCPUs", id="spread"),
        pytest.param({numa.LABEL_NODE_CPU_BIND_POLICY: "Bogus"}, None, "None", id="unknown"),
        pytest.param(
            {},
            numa.KubeletCPUManagerPolicy(policy="static", options={"full-pcpus-only": "true"}),
            "FullPCPUsOnly",
            id="kubelet-full-pcpus",
        ),
        pytest.param(
            {numa.LABEL_NODE_CPU_BIND_POLICY: "SpreadByPCPUs"},
            numa.KubeletCPUManagerPolicy(policy="static", options={"full-pcpus-only": "true"}),
            "FullPCPUsOnly",
            id="kubelet-wins",
        ),
        pytest.param({}, numa.KubeletCPUManagerPolicy(policy="none"), "None", id="kubelet-none"),
    ],
)
def test_node_cpu_bind_policy(
    labels: dict[str, str], kubelet: numa.KubeletCPUManagerPolicy | None, expected: str
) -> None:
    assert numa.node_cpu_bind_policy(labels, kubelet) == expected


def test_node_numa_labels() -> None:
    strategy = numa.LABEL_NODE_NUMA_ALLOCATE_STRATEGY
    assert numa.node_numa_allocate_strategy({strategy: "MostAllocated"}, "LeastAllocated") == "MostAllocated"
    assert numa.node_numa_allocate_strategy({strategy: "Random"}, "LeastAllocated") == "LeastAllocated"
    assert (
        numa.node_numa_topology_policy({numa.LABEL_NUMA_TOPOLOGY_POLICY: "SingleNUMANode"})
        == "SingleNUMANode"
    )
    assert numa.node_numa_topology_policy(None) == ""


def test_node_reservation() -> None:
    reservation = numa.parse_node_reservation(
        '{"resources": {"cpu": "2", "memory": "4Gi"}, "reservedCPUs": "0-5",'
        ' "applyPolicy": "ReservedCPUsOnly"}'
    )
    assert reservation.reserved_cpus == "0-5"
    assert reservation.apply_policy == "ReservedCPUsOnly"
    assert numa.get_node_reservation({}) == numa.NodeReservation()
    with pytest.raises(InvalidAnnotation) as caught:
        numa.parse_node_reservation('{"applyPolicy": "Always"}')
    assert "applyPolicy" in caught.value.problem


@pytest.mark.parametrize(
    ("raw", "cpuset", "exclusive"),
    [
        pytest.param('{"cpuset": "0-1"}', "0-1", True, id="default-exclusive"),
        pytest.param('{"cpuset": "0-1", "cpusetExclusive": false}', "0-1", False, id="shared"),
        pytest.param('{"cpuset": "0-1", "cpusetExclusive": true}', "0-1", True, id="explicit"),
    ],
)
def test_system_qos_resource(raw: str, cpuset: str, exclusive: bool) -> None:
    resource = numa.parse_system_qos_resource(raw)
    assert (resource.cpuset, resource.is_cpuset_exclusive) == (cpuset, exclusive)


def test_system_qos_resource_rejects() -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        numa.parse_system_qos_resource('{"cpusetExclusive": "false"}')
    assert caught.value.key == numa.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE
    assert "cpusetExclusive" in caught.value.problem


@pytest.mark.parametrize(
    ("parser", "key", "raw", "fragment"),
    [
        pytest.param(
            numa.parse_resource_status,
            numa.ANNOTATION_RESOURCE_STATUS,
            '{"cpuset": "banana"}',
            "cpuset: invalid CPU list 'banana'",
            id="status-banana",
        ),
        pytest.param(
            numa.parse_resource_status,
            numa.ANNOTATION_RESOURCE_STATUS,
            '{"cpuset": "\\u0663"}',
            "cpuset",
            id="status-arabic-indic-digit",
        ),
        pytest.param(
            numa.parse_resource_status,
            numa.ANNOTATION_RESOURCE_STATUS,
            '{"cpuset": "' + ",".join(["0-1048575"] * 100) + '"}',
            "CPU ids stop at 8191",
            id="status-stalling-ranges",
        ),
        pytest.param(
            numa.parse_resource_status,
            numa.ANNOTATION_RESOURCE_STATUS,
            '{"cpuset": "' + ",".join(["0-8191"] * 100) + '"}',
            "more than 8192 CPU ids in all",
            id="status-repeated-ranges",
        ),
        pytest.param(
            numa.parse_resource_status,
            numa.ANNOTATION_RESOURCE_STATUS,
            '{"numaNodeResources": [{"node": -1, "resources": {"cpu": "1"}}]}',
            "numaNodeResources[0].node",
            id="status-negative-numa",
        ),
        pytest.param(
            numa.parse_resource_status,
            numa.ANNOTATION_RESOURCE_STATUS,
            '{"numaNodeResources": [{"node": 0, "resources": {"cpu": "-4"}}]}',
            "is negative",
            id="status-negative-amount",
        ),
        pytest.param(
            numa.parse_cpu_topology,
            numa.ANNOTATION_NODE_CPU_TOPOLOGY,
            '{"detail": [{"id": -1, "core": 0, "socket": 0, "node": 0}]}',
            "detail[0].id",
            id="topology-negative-cpu",
        ),
        pytest.param(
            numa.parse_cpu_topology,
            numa.ANNOTATION_NODE_CPU_TOPOLOGY,
            '{"detail": [{"id": 8192, "core": 0, "socket": 0, "node": 0}]}',
            "detail[0].id",
            id="topology-cpu-past-the-cap",
        ),
        pytest.param(
            numa.parse_cpu_topology,
            numa.ANNOTATION_NODE_CPU_TOPOLOGY,
            '{"detail": [{"id": 0, "core": 0, "socket": 0, "node": -2}]}',
            "detail[0].node",
            id="topology-negative-numa",
        ),
        pytest.param(
            numa.parse_cpu_shared_pools,
            numa.ANNOTATION_NODE_CPU_SHARED_POOLS,
            '[{"socket": -1, "cpuset": "0-1"}]',
            "[0].socket",
            id="pools-negative-socket",
        ),
        pytest.param(
            numa.parse_pod_cpu_allocs,
            numa.ANNOTATION_NODE_CPU_ALLOCS,
            '[{"uid": "u", "cpuset": "0-3,x"}]',
            "[0].cpuset",
            id="allocs-bad-cpuset",
        ),
        pytest.param(
            numa.parse_node_reservation,
            numa.ANNOTATION_NODE_RESERVATION,
            '{"resources": {"cpu": "-2"}}',
            "resources.cpu",
            id="reservation-negative-cpu",
        ),
        pytest.param(
            numa.parse_node_reservation,
            numa.ANNOTATION_NODE_RESERVATION,
            '{"reservedCPUs": "0-1048575"}',
            "reservedCPUs",
            id="reservation-huge-cpus",
        ),
        pytest.param(
            numa.parse_system_qos_resource,
            numa.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
            '{"cpuset": "-3"}',
            "cpuset",
            id="system-qos-negative-cpu",
        ),
    ],
)
def test_meaningless_ids_cpu_lists_and_amounts_are_refused_naming_the_annotation(
    parser: object, key: str, raw: str, fragment: str
) -> None:
    assert callable(parser)
    with pytest.raises(InvalidAnnotation) as caught:
        parser(raw)
    assert caught.value.key == key
    assert fragment in caught.value.problem
