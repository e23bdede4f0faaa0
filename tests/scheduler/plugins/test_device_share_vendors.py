"""DeviceShare for Ascend NPUs (whole cards, vNPU templates, HCCS partitions), Cambricon MLUs (whole
and dynamic-smlu) and the vendor annotations of DevicePluginAdaption (Koordinator v1.6/v1.7)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apis.client.backend import EventType, ResourceType, WatchEvent
from apis.core import ConfigMap
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATED,
    ANNOTATION_GPU_PARTITIONS,
    LABEL_GPU_ISOLATION_PROVIDER,
    LABEL_GPU_MODEL,
    LABEL_GPU_PARTITION_POLICY,
    LABEL_GPU_VENDOR,
    parse_device_allocations,
)
from apis.features import FeatureGates
from apis.scheduling.device import Device
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins.default_binder import DefaultBinder
from scheduler.plugins.device_share import DeviceShare, DeviceShareArgs, new
from scheduler.plugins.device_share.adapter import BindContext, adapt
from scheduler.plugins.device_share.allocator import Allocation, GPUUsage
from scheduler.plugins.device_share.templates import ERR_NO_MATCHED_TEMPLATE, parse_templates
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.device_share_fixtures import GIB
from tests.scheduler.plugins.test_device_share import filter_names, minors

NPU_CORE = "huawei.com/npu-core"
NPU_CPU = "huawei.com/npu-cpu"
NPU_DVPP = "huawei.com/npu-dvpp"
RATIO = "koordinator.sh/gpu-memory-ratio"
MEMORY = "koordinator.sh/gpu-memory"
CORE = "koordinator.sh/gpu-core"
SHARED = "koordinator.sh/gpu.shared"

TEMPLATES = """
huawei-Ascend-910B3:
  vir05_1c_16g: {huawei.com/npu-core: "5", huawei.com/npu-cpu: "1", koordinator.sh/gpu-memory: 16Gi}
  vir10_3c_32g: {huawei.com/npu-core: "10", huawei.com/npu-cpu: "3", koordinator.sh/gpu-memory: 32Gi}
huawei-Ascend-310P3:
  vir01: {huawei.com/npu-core: "1", huawei.com/npu-cpu: "1", koordinator.sh/gpu-memory: 3Gi}
  vir01_same: {huawei.com/npu-core: "1", huawei.com/npu-cpu: "1", koordinator.sh/gpu-memory: 3Gi}
"""
HCCS = {"4": [{"minors": [0, 1, 2, 3], "gpuLinkType": "HCCS", "allocationScore": "1"},
              {"minors": [4, 5, 6, 7], "gpuLinkType": "HCCS", "allocationScore": "1"}]}  # fmt: skip


def npu(minor: int) -> dict[str, Any]:
    """An Ascend 910B3 as the v1.7 notes show it: 20 AI cores, 7 AI CPUs, 64 GiB."""
    return {
        "type": "gpu",
        "minor": minor,
        "id": f"NPU-{minor}",
        "health": True,
        "resources": {NPU_CORE: "20", NPU_CPU: "7", NPU_DVPP: "100", MEMORY: "64Gi", RATIO: "100"},
        "topology": {"socketID": minor // 4, "nodeID": minor // 4, "pcieID": f"pci{minor // 4}"},
    }


def mlu(minor: int) -> dict[str, Any]:
    return {
        "type": "gpu",
        "minor": minor,
        "id": f"MLU-{minor}",
        "health": True,
        "resources": {CORE: "100", MEMORY: "24Gi", RATIO: "100"},
        "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0"},
    }


def ascend(name: str, count: int = 8, model: str = "Ascend-910B3", honor: bool = True) -> Device:
    labels = {LABEL_GPU_VENDOR: "huawei", LABEL_GPU_MODEL: model}
    if honor:
        labels[LABEL_GPU_PARTITION_POLICY] = "Honor"
    return Device.model_validate(
        {
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {ANNOTATION_GPU_PARTITIONS: json.dumps(HCCS)} if count == 8 else {},
            },
            "spec": {"devices": [npu(m) for m in range(count)]},
        }
    )


def cambricon(name: str, count: int = 2) -> Device:
    labels = {LABEL_GPU_VENDOR: "cambricon", LABEL_GPU_MODEL: "MLU370-X8"}
    return Device.model_validate(
        {"metadata": {"name": name, "labels": labels}, "spec": {"devices": [mlu(m) for m in range(count)]}}
    )


def nvidia(name: str) -> Device:
    gpu = {**mlu(0), "resources": {CORE: "100", MEMORY: "80Gi", RATIO: "100"}}
    return Device.model_validate({"metadata": {"name": name}, "spec": {"devices": [gpu]}})


class Backend:
    def __init__(self) -> None:
        self.pod_patches: list[tuple[str, dict[str, Any]]] = []
        self.node_patches: list[tuple[str, dict[str, Any]]] = []
        self.bindings: list[tuple[str, dict[str, str]]] = []

    async def patch_pod(self, pod: Any, patch: dict[str, Any]) -> None:
        self.pod_patches.append((pod.metadata.name or "", patch))

    async def bind(self, pod: Any, node_name: str, *, annotations: Mapping[str, str] | None = None) -> None:
        self.bindings.append((pod.metadata.name or "", dict(annotations or {})))

    async def patch_custom(
        self, resource: ResourceType[Any], namespace: str | None, name: str, patch: dict[str, Any]
    ) -> None:
        self.node_patches.append((name, patch))


def plugin(
    *devices: Device,
    templates: str | None = TEMPLATES,
    adaption: bool = True,
    nodes: Snapshot | None = None,
) -> tuple[DeviceShare, Backend]:
    backend = Backend()
    snap = nodes or snapshot(*(d.metadata.name or "" for d in devices))
    handle = Handle(
        backend=backend,  # type: ignore[arg-type]
        snapshot=lambda: snap,
        features=FeatureGates(device_plugin_adaption=adaption),
    )
    p = new(DeviceShareArgs(), handle)
    p._on_device(WatchEvent(EventType.REPLACED, objects=list(devices)))
    if templates is not None:
        cm = ConfigMap.model_validate(
            {
                "metadata": {"namespace": "koordinator-system", "name": "gpu-shared-resource-templates"},
                "data": {"data.yaml": templates},
            }
        )
        p.templates.on_event(WatchEvent(EventType.REPLACED, objects=[cm]))
    return p, backend


def snapshot(*names: str) -> Snapshot:
    return make_snapshot([make_node(n).alloc(cpu="64", memory="512Gi").obj() for n in names])


def pod(name: str, labels: dict[str, str] | None = None, **requests: int) -> PodInfo:
    builder = make_pod(name).uid(name).namespace("ai")
    for key, value in (labels or {}).items():
        builder = builder.label(key, value)
    names = {
        "npu_core": NPU_CORE,
        "npu_cpu": NPU_CPU,
        "npu_dvpp": NPU_DVPP,
        "ratio": RATIO,
        "memory": MEMORY,
        "core": CORE,
        "shared": SHARED,
        "nvidia": "nvidia.com/gpu",
    }
    return builder.req({"cpu": "1", **{names[k]: v for k, v in requests.items()}}).info()


def bind(p: DeviceShare, backend: Backend, info: PodInfo, node: str) -> tuple[bool, dict[str, Any]]:
    """Reserve, PreBind and DefaultBinder's Bind on ``node``: whether it bound, and the metadata
    the pod is given: patched before its Binding (labels: a Binding carries none) or carried by it
    (the API server copies a Binding's annotations onto the pod)."""
    state = CycleState()
    assert p.pre_filter(state, info, p.handle.snapshot()).status.ok
    if not p.reserve(state, info, node).ok:
        return False, {}
    patched, bound = len(backend.pod_patches), len(backend.bindings)
    status = asyncio.run(p.pre_bind(state, info, node))
    if not status.ok:
        p.unreserve(state, info, node)
        return False, {}
    assert asyncio.run(DefaultBinder(p.handle).bind(state, info, node)).ok
    assert len(backend.bindings) == bound + 1
    meta: dict[str, Any] = {"annotations": {}}
    for _, patch in backend.pod_patches[patched:]:
        meta["annotations"].update(patch["metadata"].get("annotations", {}))
        if "labels" in patch["metadata"]:
            meta["labels"] = patch["metadata"]["labels"]
    meta["annotations"].update(backend.bindings[-1][1])
    return True, meta


def gpu_entries(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    return list(json.loads(metadata["annotations"][ANNOTATION_DEVICE_ALLOCATED])["gpu"])


# ---- Ascend NPU ----


def test_whole_npus_take_an_hccs_partition_and_get_huawei_annotations() -> None:
    p, backend = plugin(ascend("npu-0"))
    p.store.hold("x", "npu-0", [Allocation(1, GPUUsage(0, 64 * GIB, 100, (20, 7, 100)))], assumed=False)
    # Card 1 is taken: four NPUs take the other HCCS quad, never a set across the two.
    ok, meta = bind(p, backend, pod("w", npu_core=80, ratio=400), "npu-0")
    assert ok
    entries = gpu_entries(meta)
    assert minors(entries) == [4, 5, 6, 7]
    assert entries[0]["resources"] == {
        NPU_CORE: "20",
        NPU_CPU: "7",
        NPU_DVPP: "100",
        MEMORY: "64Gi",
        RATIO: "100",
    }
    ann = meta["annotations"]
    assert ann["huawei.com/npu-core"] == "4,5,6,7"
    assert ann["predicate-time"] == ann["scheduling.koordinator.sh/bind-timestamp"]
    assert ann["scheduling.koordinator.sh/gpu-minors"] == "4,5,6,7"
    # Honor: two NPUs are no partition size of the table (Koordinator: unsupported number).
    assert filter_names(p, pod("t", npu_core=40, ratio=200), snapshot("npu-0"))[0] == []
    assert bind(p, backend, pod("q", npu_core=80, ratio=400), "npu-0")[0] is False


def test_without_honor_npus_follow_pcie_and_numa_topology() -> None:
    p, backend = plugin(ascend("npu-0", honor=False))
    ok, meta = bind(p, backend, pod("w", npu_core=40, ratio=200), "npu-0")
    assert ok
    assert minors(gpu_entries(meta)) == [0, 1]
    ok, meta = bind(p, backend, pod("one", npu_core=20, ratio=100), "npu-0")
    assert minors(gpu_entries(meta)) == [2]


def test_npus_are_not_gpus() -> None:
    p, _ = plugin(ascend("npu-0", count=2, honor=False), nvidia("gpu-0"))
    snap = snapshot("npu-0", "gpu-0")
    assert filter_names(p, pod("n", nvidia=1), snap)[0] == ["gpu-0"]
    assert filter_names(p, pod("a", npu_core=20, ratio=100), snap)[0] == ["npu-0"]


def test_a_vnpu_matches_one_template_and_is_tagged_with_it() -> None:
    p, backend = plugin(ascend("npu-0", count=1))
    ok, meta = bind(p, backend, pod("v", shared=1, npu_core=5, npu_cpu=1, memory=16 * GIB), "npu-0")
    assert ok
    (entry,) = gpu_entries(meta)
    assert entry["extension"] == {"gpuSharedResourceTemplate": "vir05_1c_16g"}
    assert entry["resources"] == {NPU_CORE: "5", NPU_CPU: "1", MEMORY: "16Gi", RATIO: "25"}
    assert meta["annotations"]["huawei.com/npu-core"] == "0-vir05_1c_16g"


def test_vnpus_never_overcommit_a_cards_ai_cpus() -> None:
    # 7 AI CPUs: two vir10_3c_32g (6) leave one, but no memory; vir05_1c_16g then does not fit either.
    p, backend = plugin(ascend("npu-0", count=1))
    big = {"shared": 1, "npu_core": 10, "npu_cpu": 3, "memory": 32 * GIB}
    assert bind(p, backend, pod("a", **big), "npu-0")[0]
    assert bind(p, backend, pod("b", **big), "npu-0")[0]
    small = pod("c", shared=1, npu_core=5, npu_cpu=1, memory=16 * GIB)
    assert filter_names(p, small, snapshot("npu-0"))[0] == []
    used = p.store.usage("npu-0")[0]
    assert used.npu == (20, 6, 0)
    assert used.memory == 64 * GIB


def test_a_request_matching_no_template_is_refused_everywhere() -> None:
    p, _ = plugin(ascend("npu-0", count=1))
    state = CycleState()
    odd = pod("o", shared=1, npu_core=7, npu_cpu=1, memory=16 * GIB)
    status = p.pre_filter(state, odd, snapshot("npu-0")).status
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert ERR_NO_MATCHED_TEMPLATE in " ".join(status.reasons)


def test_a_node_whose_model_has_no_matching_template_is_rejected_with_the_reason() -> None:
    p, _ = plugin(ascend("b3", count=1), ascend("b4", count=1, model="Ascend-910B4"))
    feasible, reasons, unresolvable = filter_names(
        p, pod("v", shared=1, npu_core=5, npu_cpu=1, memory=16 * GIB), snapshot("b3", "b4")
    )
    assert feasible == ["b3"]
    assert reasons == {ERR_NO_MATCHED_TEMPLATE: ["b4"]}
    assert unresolvable == ["b4"]


def test_several_matching_templates_leave_the_allocation_untagged() -> None:
    p, backend = plugin(ascend("p3", count=1, model="Ascend-310P3"))
    ok, meta = bind(p, backend, pod("v", shared=1, npu_core=1, npu_cpu=1, memory=3 * GIB), "p3")
    assert ok
    assert "extension" not in gpu_entries(meta)[0]
    assert meta["annotations"]["huawei.com/npu-core"] == "0"


@pytest.mark.parametrize(
    "requests",
    [
        {"shared": 2, "npu_core": 10, "npu_cpu": 2, "memory": 32 * GIB},
        {"shared": 1, "npu_core": 5, "npu_cpu": 1, "npu_dvpp": 101, "memory": 16 * GIB},
        {"npu_core": 5, "memory": 16 * GIB},
        {"npu_core": 20, "ratio": 150},
        {"npu_core": 20, "ratio": 100, "core": 100},
    ],
)
def test_npu_combinations_koordinator_refuses(requests: dict[str, int]) -> None:
    p, _ = plugin(ascend("npu-0", count=1))
    for _ in range(2):  # the second time from what gpu_request kept
        status = p.pre_filter(CycleState(), pod("x", **requests), snapshot("npu-0")).status
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert "invalid GPU request" in " ".join(status.reasons)


def test_restart_reads_npu_usage_back_from_the_annotation() -> None:
    p, backend = plugin(ascend("npu-0", count=1))
    ok, meta = bind(p, backend, pod("v", shared=1, npu_core=10, npu_cpu=3, memory=32 * GIB), "npu-0")
    assert ok
    raw = meta["annotations"][ANNOTATION_DEVICE_ALLOCATED]
    restarted, _ = plugin(ascend("npu-0", count=1))
    bound = make_pod("v").uid("v").on("npu-0").obj()
    bound.metadata.annotations = {ANNOTATION_DEVICE_ALLOCATED: raw}
    restarted._on_pod(WatchEvent(EventType.REPLACED, objects=[bound]))
    assert restarted.store.usage("npu-0") == p.store.usage("npu-0")
    assert restarted.store.usage("npu-0")[0] == GPUUsage(0, 32 * GIB, 50, (10, 3, 0))


# ---- Cambricon MLU ----


def test_mlu_whole_and_dynamic_smlu() -> None:
    p, backend = plugin(cambricon("mlu-0"))
    ok, meta = bind(p, backend, pod("whole", core=100, ratio=100), "mlu-0")
    assert ok
    assert meta["annotations"]["CAMBRICON_DSMLU_PROFILE"] == "0_100_96"
    assert backend.node_patches[-1][0] == "mlu-0"
    lock = backend.node_patches[-1][1]["metadata"]["annotations"]["cambricon.com/dsmlu.lock"]
    assert lock.endswith(",ai,whole")
    ok, meta = bind(p, backend, pod("s", shared=1, core=10, memory=GIB), "mlu-0")
    assert ok
    entry = gpu_entries(meta)[0]
    assert entry["minor"] == 1
    assert entry["resources"] == {CORE: "10", MEMORY: "1Gi", RATIO: "5"}
    assert meta["annotations"]["CAMBRICON_DSMLU_ASSIGHED"] == "false"
    assert meta["annotations"]["CAMBRICON_DSMLU_PROFILE"] == "1_10_4"


def test_a_fresh_cambricon_lock_fails_the_bind_a_stale_one_is_taken_over() -> None:
    now = datetime.now(UTC)
    for held_since, binds in ((now - timedelta(minutes=1), False), (now - timedelta(minutes=6), True)):
        stamp = held_since.strftime("%Y-%m-%dT%H:%M:%SZ")
        node = make_node("mlu-0").alloc(cpu="64", memory="512Gi").obj()
        node.metadata.annotations = {"cambricon.com/dsmlu.lock": f"{stamp},ai,other"}
        p, backend = plugin(cambricon("mlu-0"), nodes=make_snapshot([node]))
        ok, _ = bind(p, backend, pod("s", shared=1, core=10, memory=GIB), "mlu-0")
        assert ok is binds
        # A failed bind gives the card back.
        assert (p.store.usage("mlu-0") == {}) is not binds


def test_several_mlus_are_refused_by_the_adapter_as_koordinator_does() -> None:
    p, backend = plugin(cambricon("mlu-0"))
    assert bind(p, backend, pod("two", core=200, ratio=200), "mlu-0")[0] is False
    # Without DevicePluginAdaption only device-allocated is written, and two cards are fine.
    plain, plain_backend = plugin(cambricon("mlu-0"), adaption=False)
    ok, meta = bind(plain, plain_backend, pod("two", core=200, ratio=200), "mlu-0")
    assert ok
    assert set(meta["annotations"]) == {ANNOTATION_DEVICE_ALLOCATED}
    assert plain_backend.node_patches == []


# ---- HAMi and the general adaptation ----


def test_hami_core_pods_get_the_vgpu_node_label() -> None:
    node = make_node("g0").alloc(cpu="64", memory="512Gi").label(LABEL_GPU_ISOLATION_PROVIDER, "HAMi-core")
    p, backend = plugin(nvidia("g0"), nodes=make_snapshot([node.obj()]))
    hami = pod("h", labels={LABEL_GPU_ISOLATION_PROVIDER: "HAMi-core"}, core=50, ratio=50)
    ok, meta = bind(p, backend, hami, "g0")
    assert ok
    assert meta["labels"] == {"hami.io/vgpu-node": "g0"}
    assert meta["annotations"]["scheduling.koordinator.sh/gpu-minors"] == "0"
    ok, meta = bind(p, backend, pod("plain", core=10, ratio=10), "g0")
    assert "labels" not in meta


def test_ascend_310p_duo_annotation() -> None:
    ctx = BindContext("ai", "p", {}, "n", {}, "huawei", "Ascend-310P3-300I-DUO", datetime.now(UTC))
    allocations = [Allocation(0, GPUUsage()), Allocation(1, GPUUsage())]
    adapted = adapt(ctx, allocations, None)
    assert not isinstance(adapted, str)
    assert adapted.annotations["huawei.com/Ascend310P"] == "Ascend310P-0,Ascend310P-1"


def test_templates_parse_quantities_and_reject_garbage() -> None:
    parsed = parse_templates(TEMPLATES)
    assert parsed["huawei-Ascend-910B3"]["vir05_1c_16g"] == {NPU_CORE: 5, NPU_CPU: 1, MEMORY: 16 * GIB}
    with pytest.raises(ValueError, match=r"data\.yaml"):
        parse_templates("huawei-x: [1, 2]")


def test_annotation_round_trip_of_a_vnpu() -> None:
    p, backend = plugin(ascend("npu-0", count=1))
    _, meta = bind(p, backend, pod("v", shared=1, npu_core=5, npu_cpu=1, memory=16 * GIB), "npu-0")
    parsed = parse_device_allocations(meta["annotations"][ANNOTATION_DEVICE_ALLOCATED])
    assert parsed["gpu"][0].extension is not None
    assert parsed["gpu"][0].extension.gpu_shared_resource_template == "vir05_1c_16g"


def test_matched_resources_in_the_args_enforce_templates_on_gpu_shares_too() -> None:
    """``gpuSharedResourceTemplatesConfig.matchedResources`` may name a generic GPU resource: a
    shared GPU request naming it must then equal a template of the node's model, as in Koordinator."""
    templates = "nvidia-L40S:\n  half: {" + f"{CORE}: '50', {RATIO}: '50'" + "}\n"
    device = nvidia("g0")
    device.metadata.labels = {LABEL_GPU_VENDOR: "nvidia", LABEL_GPU_MODEL: "L40S"}
    p, backend = plugin(device, templates=templates)
    p.templates.config = p.templates.config.model_copy(update={"matched_resources": [CORE]})
    ok, meta = bind(p, backend, pod("half", core=50, ratio=50), "g0")
    assert ok
    assert gpu_entries(meta)[0]["extension"] == {"gpuSharedResourceTemplate": "half"}
    status = p.pre_filter(CycleState(), pod("third", core=30, ratio=30), snapshot("g0")).status
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    # Whole cards are not shares: no template applies (the card is half used, hence insufficient).
    feasible, reasons, _ = filter_names(p, pod("whole", nvidia=1), snapshot("g0"))
    assert (feasible, reasons) == ([], {"Insufficient gpu devices": ["g0"]})
