from __future__ import annotations

import json

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import device
from apis.quantity import Quantity

V17_ASCEND_PARTITIONS = """{
"4": [
{
"minors": [0,1,2,3],
"gpuLinkType": "HCCS",
"allocationScore": "1"
}
]
}"""

# The v1.6 release notes publish this block verbatim: comments, a bare quantity, a nested object
# inside a list and trailing commas. It is not JSON.
V16_PARTITIONS_AS_PUBLISHED = """{
  "1": [
      "NVLINK": {
          {
            # Which GPUs are included
            "minors": [
                0
            ],
            # GPU Interconnect Type
            "gpuLinkType": "NVLink",
            "ringBusBandwidth": 400Gi
            "allocationScore": "1",
          },
          ...
      }
      ...
  ]
}"""

V16_PARTITIONS_CORRECTED = """{
  "1": [{"minors": [0], "gpuLinkType": "NVLink", "ringBusBandwidth": "400Gi", "allocationScore": 1}],
  "2": [{"minors": [0, 1], "gpuLinkType": "NVLink", "ringBusBandwidth": "400Gi", "allocationScore": 1}]
}"""

V16_PARTITION_SPEC_AS_PUBLISHED = """{
  # BestEffort|Restricted
  "allocatePolicy": "Restricted",
}"""

V16_JOINT_HINT_AS_PUBLISHED = """{
 "rdma": {
   "vfSelector": {} //apply VF
 }
}"""


def test_resource_names() -> None:
    assert device.RESOURCE_GPU == "koordinator.sh/gpu"
    assert device.RESOURCE_GPU_SHARED == "koordinator.sh/gpu.shared"
    assert device.RESOURCE_GPU_MEMORY_RATIO == "koordinator.sh/gpu-memory-ratio"
    assert device.RESOURCE_HYGON_DCU == "dcu.com/gpu"
    assert device.RESOURCE_HUAWEI_NPU_DVPP == "huawei.com/npu-dvpp"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kubernetes.io/gpu", "koordinator.sh/gpu"),
        ("kubernetes.io/gpu-core", "koordinator.sh/gpu-core"),
        ("kubernetes.io/gpu-memory", "koordinator.sh/gpu-memory"),
        ("kubernetes.io/gpu-memory-ratio", "koordinator.sh/gpu-memory-ratio"),
        ("kubernetes.io/rdma", "koordinator.sh/rdma"),
        ("kubernetes.io/fpga", "koordinator.sh/fpga"),
        ("koordinator.sh/gpu", "koordinator.sh/gpu"),
        ("nvidia.com/gpu", "nvidia.com/gpu"),
        ("koordinator.sh/gpu-shared", "koordinator.sh/gpu-shared"),
    ],
)
def test_canonical_device_resource(name: str, expected: str) -> None:
    assert device.canonical_device_resource(name) == expected


def test_labels_and_vendor_keys() -> None:
    assert device.LABEL_GPU_VENDOR == "node.koordinator.sh/gpu-vendor"
    assert device.LABEL_GPU_MODEL == "node.koordinator.sh/gpu-model"
    assert device.LABEL_GPU_DRIVER_VERSION == "node.koordinator.sh/gpu-driver-version"
    assert device.LABEL_GPU_ISOLATION_PROVIDER == "koordinator.sh/gpu-isolation-provider"
    assert device.GPU_ISOLATION_PROVIDER_HAMI_CORE == "HAMi-core"
    assert device.ANNOTATION_CAMBRICON_DSMLU_ASSIGNED == "CAMBRICON_DSMLU_ASSIGHED"
    assert device.ANNOTATION_CAMBRICON_DSMLU_PROFILE == "CAMBRICON_DSMLU_PROFILE"
    assert device.ANNOTATION_METAX_GPU_DEVICES_ALLOCATED == "metax-tech.com/gpu-devices-allocated"
    assert device.ANNOTATION_HUAWEI_ASCEND_310P == "huawei.com/Ascend310P"
    assert device.DEPRECATED_LABEL_GPU_MODEL == "kubernetes.io/gpu-model"
    assert {"nvidia", "huawei", "cambricon", "metax", "baidu"} <= set(device.GPU_VENDORS)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [({}, "Prefer"), ({device.LABEL_GPU_PARTITION_POLICY: "Honor"}, "Honor")]
    + [({device.LABEL_GPU_PARTITION_POLICY: v}, "Prefer") for v in ("Prefer", "honor", "", "Strict")],
)
def test_gpu_partition_policy(labels: dict[str, str], expected: str) -> None:
    assert device.gpu_partition_policy(labels) == expected


def test_device_allocated() -> None:
    raw = (
        '{"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": 100,'
        ' "koordinator.sh/gpu-memory": "16Gi",'
        ' "koordinator.sh/gpu-memory-ratio": 100}}],'
        ' "rdma": [{"minor": 1, "id": "0000:09:00.0", "resources": {"koordinator.sh/rdma": 100},'
        ' "extension": {"vfs": [{"minor": 3, "busID": "0000:09:00.3"}]}}]}'
    )
    allocations = device.parse_device_allocations(raw)
    gpu = allocations["gpu"][0]
    assert gpu.minor == 0
    assert gpu.resources["koordinator.sh/gpu-memory"] == Quantity.parse("16Gi")
    rdma = allocations["rdma"][0]
    assert rdma.id == "0000:09:00.0"
    assert rdma.extension is not None
    assert rdma.extension.vfs is not None
    assert rdma.extension.vfs[0].bus_id == "0000:09:00.3"
    assert device.get_device_allocations({}) is None


def test_device_allocated_shared_template() -> None:
    raw = '{"gpu": [{"minor": 2, "resources": {}, "extension": {"gpuSharedResourceTemplate": "vir02"}}]}'
    allocation = device.parse_device_allocations(raw)["gpu"][0]
    assert allocation.extension is not None
    assert allocation.extension.gpu_shared_resource_template == "vir02"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param('{"gpu": {"minor": 0}}', "gpu: Input should be a valid array", id="not-a-list"),
        pytest.param('{"gpu": [{"resources": {}}]}', "gpu[0].minor: Field required", id="no-minor"),
        pytest.param('{"gpu": [{"minor": "0", "resources": {}}]}', "gpu[0].minor", id="minor-string"),
        pytest.param(
            '{"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "lots"}}]}',
            "gpu[0].resources.koordinator.sh/gpu-core",
            id="bad-quantity",
        ),
        pytest.param(
            '{"gpu": [{"minor": 4294967296, "resources": {}}]}', "gpu[0].minor", id="minor-overflow"
        ),
    ],
)
def test_device_allocated_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        device.parse_device_allocations(raw)
    assert caught.value.key == device.ANNOTATION_DEVICE_ALLOCATED
    assert fragment in caught.value.problem


@pytest.mark.parametrize(
    ("raw", "device_type", "scope"),
    [
        pytest.param('{\n "gpu": {\n "requiredTopologyScope": "PCIe"\n }\n }', "gpu", "PCIe", id="v1.6-pcie"),
        pytest.param(
            '{\n "gpu": {\n "requiredTopologyScope": "NUMANode"\n }\n }', "gpu", "NUMANode", id="v1.6-numa"
        ),
        pytest.param('{"rdma": {"vfSelector": {}}}', "rdma", None, id="v1.6-vf-corrected"),
        pytest.param('{"gpu": {"requiredTopologyScope": ""}}', "gpu", None, id="empty-scope-is-unset"),
    ],
)
def test_device_allocate_hint(raw: str, device_type: str, scope: str | None) -> None:
    hints = device.parse_device_allocate_hints(raw)
    assert hints[device_type].required_topology_scope == scope


def test_device_allocate_hint_all_fields() -> None:
    hints = device.parse_device_allocate_hints(
        '{"gpu": {"selector": {"matchLabels": {"model": "H20"}}, "allocateStrategy": "RequestsAsCount",'
        ' "requiredTopologyScope": "Device", "exclusivePolicy": "PCIeLevel"}}'
    )
    hint = hints["gpu"]
    assert hint.selector is not None
    assert hint.selector.match_labels == {"model": "H20"}
    assert (hint.allocate_strategy, hint.exclusive_policy) == ("RequestsAsCount", "PCIeLevel")
    assert device.DEVICE_TOPOLOGY_SCOPE_LEVEL["Device"] > device.DEVICE_TOPOLOGY_SCOPE_LEVEL["Node"]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(V16_JOINT_HINT_AS_PUBLISHED, "malformed JSON", id="v1.6-notes-with-comment"),
        pytest.param('{"gpu": {"requiredTopologyScope": "Rack"}}', "gpu.requiredTopologyScope", id="scope"),
        pytest.param('{"gpu": {"allocateStrategy": "All"}}', "gpu.allocateStrategy", id="strategy"),
        pytest.param('{"gpu": {"exclusivePolicy": "NodeLevel"}}', "gpu.exclusivePolicy", id="exclusive"),
        pytest.param(
            '{"gpu": {"selector": {"matchLabels": {"a": 1}}}}', "gpu.selector.matchLabels.a", id="sel"
        ),
    ],
)
def test_device_allocate_hint_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        device.parse_device_allocate_hints(raw)
    assert caught.value.key == device.ANNOTATION_DEVICE_ALLOCATE_HINT
    assert fragment in caught.value.problem


@pytest.mark.parametrize(
    ("raw", "types", "scope"),
    [
        pytest.param('{\n "deviceTypes": ["gpu","rdma"]\n }', ["gpu", "rdma"], None, id="v1.6-notes"),
        pytest.param(
            '{"deviceTypes": ["gpu","rdma"], "requiredScope": "SamePCIe"}',
            ["gpu", "rdma"],
            "SamePCIe",
            id="s",
        ),
    ],
)
def test_device_joint_allocate(raw: str, types: list[str], scope: str | None) -> None:
    joint = device.parse_device_joint_allocate(raw)
    assert (joint.device_types, joint.required_scope) == (types, scope)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param('{"deviceTypes": ["gpu"], "requiredScope": "SameNUMA"}', "requiredScope", id="scope"),
        pytest.param('{"deviceTypes": "gpu"}', "deviceTypes", id="types-string"),
    ],
)
def test_device_joint_allocate_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        device.parse_device_joint_allocate(raw)
    assert caught.value.key == device.ANNOTATION_DEVICE_JOINT_ALLOCATE
    assert fragment in caught.value.problem


@pytest.mark.parametrize(
    ("raw", "policy", "bandwidth"),
    [
        pytest.param('{"allocatePolicy": "Restricted"}', "Restricted", None, id="v1.6-corrected"),
        pytest.param("{}", "BestEffort", None, id="empty-object"),
        pytest.param('{"allocatePolicy": ""}', "BestEffort", None, id="empty-policy"),
        pytest.param(
            '{"allocatePolicy": "BestEffort", "ringBusBandwidth": "400Gi"}', "BestEffort", "400Gi", id="bw"
        ),
    ],
)
def test_gpu_partition_spec(raw: str, policy: str, bandwidth: str | None) -> None:
    spec = device.parse_gpu_partition_spec(raw)
    assert spec.allocate_policy == policy
    assert spec.ring_bus_bandwidth == (Quantity.parse(bandwidth) if bandwidth else None)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(V16_PARTITION_SPEC_AS_PUBLISHED, "malformed JSON", id="v1.6-notes-as-published"),
        pytest.param(
            '{"allocatePolicy": "Strict"}',
            "allocatePolicy: Input should be 'Restricted' or 'BestEffort'",
            id="p",
        ),
        pytest.param('{"ringBusBandwidth": true}', "ringBusBandwidth", id="bw-bool"),
    ],
)
def test_gpu_partition_spec_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        device.parse_gpu_partition_spec(raw)
    assert caught.value.key == device.ANNOTATION_GPU_PARTITION_SPEC
    assert fragment in caught.value.problem


def test_gpu_partitions_v17_release_notes() -> None:
    table = device.parse_gpu_partition_table(V17_ASCEND_PARTITIONS)
    partition = table[4][0]
    assert (partition.minors, partition.gpu_link_type, partition.allocation_score) == (
        [0, 1, 2, 3],
        "HCCS",
        1,
    )


def test_gpu_partitions_v16_corrected() -> None:
    table = device.parse_gpu_partition_table(V16_PARTITIONS_CORRECTED)
    assert sorted(table) == [1, 2]
    assert table[2][0].ring_bus_bandwidth == Quantity.parse("400Gi")
    assert table[2][0].allocation_score == 1


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(V16_PARTITIONS_AS_PUBLISHED, "malformed JSON", id="v1.6-notes-as-published"),
        pytest.param('{"four": []}', "four (key)", id="non-numeric-key"),
        pytest.param('{"4": [{"gpuLinkType": "NVLink"}]}', "4[0].minors: Field required", id="no-minors"),
        pytest.param(
            '{"4": [{"minors": [0], "allocationScore": "high"}]}', "4[0].allocationScore", id="score-text"
        ),
        pytest.param(
            '{"4": [{"minors": [0], "allocationScore": 1.5}]}', "4[0].allocationScore", id="score-float"
        ),
        pytest.param('{"4": [{"minors": ["0"]}]}', "4[0].minors[0]", id="minor-string"),
        pytest.param("null", "object", id="null"),
    ],
)
def test_gpu_partitions_reject(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        device.parse_gpu_partition_table(raw)
    assert caught.value.key == device.ANNOTATION_GPU_PARTITIONS
    assert fragment in caught.value.problem


def test_getters_absent() -> None:
    assert device.get_device_allocate_hints(None) is None
    assert device.get_device_joint_allocate({}) is None
    assert device.get_gpu_partition_spec({}) is None
    assert device.get_gpu_partition_table({device.ANNOTATION_GPU_PARTITIONS: ""}) is None
    assert device.is_secondary_device_well_planned({device.LABEL_SECONDARY_DEVICE_WELL_PLANNED: "true"})


@pytest.mark.parametrize(
    ("parser", "raw", "fragment"),
    [
        pytest.param(
            device.parse_device_allocations,
            '{"gpu": [{"minor": -1, "resources": {"koordinator.sh/gpu-core": "100"}}]}',
            "gpu[0].minor",
            id="negative-minor",
        ),
        pytest.param(
            device.parse_device_allocations,
            '{"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-memory": "-8Gi"}}]}',
            "is negative",
            id="negative-amount",
        ),
        pytest.param(
            device.parse_gpu_partition_table,
            '{"2": [{"minors": [0, -1]}]}',
            "minors[1]",
            id="negative-partition-minor",
        ),
    ],
)
def test_negative_minors_and_amounts_are_refused(parser: object, raw: str, fragment: str) -> None:
    assert callable(parser)
    with pytest.raises(InvalidAnnotation) as caught:
        parser(raw)
    assert fragment in caught.value.problem


def test_a_vf_minor_of_minus_one_is_koordinators_and_accepted() -> None:
    # Koordinator's koordlet reports every VF with minor -1 (states_device_linux.go) and its
    # scheduler copies the VF into the allocation, as in its PodResources proxy's test.
    vf = {"minor": -1, "busID": "0000:01:00.2"}
    raw = json.dumps({"rdma": [{"minor": 0, "resources": {}, "extension": {"vfs": [vf]}}]})
    (allocated,) = device.parse_device_allocations(raw)["rdma"]
    assert allocated.extension is not None
    assert allocated.extension.vfs is not None
    assert (allocated.extension.vfs[0].minor, allocated.extension.vfs[0].bus_id) == (-1, "0000:01:00.2")


@pytest.mark.parametrize("field", ["selector", "vfSelector"])
def test_a_hint_selector_with_an_unknown_operator_is_refused(field: str) -> None:
    selector = {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}
    raw = json.dumps({"rdma": {field: selector}})
    with pytest.raises(InvalidAnnotation) as caught:
        device.parse_device_allocate_hints(raw)
    assert f"rdma.{field}: matchExpressions[0].operator: 'Bogus' is not one of" in caught.value.problem
    ok = '{"rdma": {"selector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}}'
    assert device.parse_device_allocate_hints(ok)["rdma"].selector is not None


def test_unknown_device_types_are_named_for_a_warning() -> None:
    allocations = device.parse_device_allocations(
        '{"gpu": [], "tpu": [], "fpga": [], "rdma": [], "Bogus": [{"minor": 0, "resources": {}}]}'
    )
    assert device.unknown_device_types(allocations) == ["Bogus", "tpu"]
