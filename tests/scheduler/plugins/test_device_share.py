"""DeviceShare through its extension points: Koordinator's request shapes, reasons and annotation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from apis.client.backend import EventType, WatchEvent
from apis.core import Pod
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_ALLOCATED,
    LABEL_GPU_ISOLATION_PROVIDER,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
)
from apis.extension.reservation import ANNOTATION_RESERVE_POD
from apis.scheduling.device import Device
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins.default_binder import DefaultBinder
from scheduler.plugins.device_share import DeviceShare, DeviceShareArgs, new
from scheduler.plugins.device_share.allocator import Allocation, GPUUsage
from scheduler.plugins.device_share.plugin import (
    ERR_INSUFFICIENT_GPU,
    ERR_ISOLATION_PROVIDER,
    allocated_annotation,
)
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.device_share_fixtures import GIB, device, eight_gpus, gpu


class RecordingBackend:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.custom_patches: list[tuple[str, dict[str, Any]]] = []
        self.bindings: list[tuple[str, str, dict[str, str]]] = []

    async def patch_pod(self, pod: Pod, patch: dict[str, Any]) -> None:
        self.patches.append((pod.metadata.name or "", patch))

    async def bind(self, pod: Pod, node_name: str, *, annotations: Mapping[str, str] | None = None) -> None:
        self.bindings.append((pod.metadata.name or "", node_name, dict(annotations or {})))

    async def patch_custom(
        self, resource: Any, namespace: str | None, name: str, patch: dict[str, Any]
    ) -> None:
        self.custom_patches.append((name, patch))


def plugin(*devices: Device, args: DeviceShareArgs | None = None) -> tuple[DeviceShare, RecordingBackend]:
    backend = RecordingBackend()
    handle = Handle(backend=backend, snapshot=lambda: make_snapshot([]))  # type: ignore[arg-type]
    p = new(args, handle)
    p._on_device(WatchEvent(EventType.REPLACED, objects=list(devices)))
    return p, backend


def snapshot(*names: str) -> Snapshot:
    return make_snapshot([make_node(n).alloc(cpu="64", memory="512Gi").obj() for n in names])


def gpu_pod(name: str, **requests: str | int) -> PodInfo:
    return make_pod(name).uid(name).req({"cpu": "1", **requests}).info()


def req(**kw: str | int) -> dict[str, str | int]:
    """Resource names with dots and slashes, from keyword-friendly spellings."""
    names = {
        "core": "koordinator.sh/gpu-core",
        "ratio": "koordinator.sh/gpu-memory-ratio",
        "memory": "koordinator.sh/gpu-memory",
        "shared": "koordinator.sh/gpu.shared",
        "kgpu": "koordinator.sh/gpu",
        "nvidia": "nvidia.com/gpu",
        "legacy_core": "kubernetes.io/gpu-core",
        "legacy_ratio": "kubernetes.io/gpu-memory-ratio",
    }
    return {names[k]: v for k, v in kw.items()}


def schedule(
    p: DeviceShare, pod: PodInfo, snap: Snapshot, node: str | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """PreFilter, Filter, Score, Reserve and PreBind on the best node; the node and its gpu entries."""
    state = CycleState()
    result = p.pre_filter(state, pod, snap)
    assert result.status.ok, result.status
    rows = snap.candidate_rows()
    feasible = p.filter(state, pod, snap, rows).feasible
    rows = rows[feasible]
    if rows.size == 0:
        return None, []
    scores = p.normalize_scores(state, pod, p.score(state, pod, snap, rows))
    names = [snap.table.names[r] for r in rows.tolist()]
    best = node or max(sorted(names), key=lambda n: int(scores[names.index(n)]))
    assert p.reserve(state, pod, best).ok
    annotation = bound_annotations(p, state, pod, best).get(ANNOTATION_DEVICE_ALLOCATED)
    if annotation is None:
        return best, []
    return best, json.loads(annotation)["gpu"]


def bound_annotations(p: DeviceShare, state: CycleState, pod: PodInfo, node: str) -> dict[str, str]:
    """PreBind, then DefaultBinder's Bind: the annotations the pod is given, patched before its
    Binding or carried by it (the API server copies a Binding's annotations onto the pod)."""
    backend = p.handle.backend
    assert isinstance(backend, RecordingBackend)
    patched, bound = len(backend.patches), len(backend.bindings)

    async def pre_bind_and_bind() -> None:
        assert (await p.pre_bind(state, pod, node)).ok
        assert (await DefaultBinder(p.handle).bind(state, pod, node)).ok

    asyncio.run(pre_bind_and_bind())
    annotations: dict[str, str] = {}
    for _, patch in backend.patches[patched:]:
        annotations.update(patch.get("metadata", {}).get("annotations", {}))
    for _, _, carried in backend.bindings[bound:]:
        annotations.update(carried)
    return annotations


def minors(entries: list[dict[str, Any]]) -> list[int]:
    return [e["minor"] for e in entries]


def test_pod_without_gpu_skips_the_plugin() -> None:
    p, _ = plugin(eight_gpus("g0"))
    state = CycleState()
    assert (
        p.pre_filter(
            state, make_pod("web").req({"cpu": "1", "example.com/foo": 1}).info(), snapshot("g0")
        ).status.code
        is Code.SKIP
    )


@pytest.mark.parametrize(
    ("requests", "count", "core", "ratio"),
    [
        (req(nvidia=1), 1, "100", "100"),
        (req(nvidia=2), 2, "100", "100"),
        (req(kgpu=100), 1, "100", "100"),
        (req(kgpu=50), 1, "50", "50"),
        (req(kgpu=200), 2, "100", "100"),
        (req(core=50, ratio=50), 1, "50", "50"),
        (req(ratio=50), 1, "0", "50"),
        (req(core=200, ratio=200), 2, "100", "100"),
        (req(legacy_core=50, legacy_ratio=50), 1, "50", "50"),
        (req(shared=2, core=100, ratio=100), 2, "50", "50"),
    ],
)
def test_request_shapes_allocate_koordinator_entries(
    requests: dict[str, str | int], count: int, core: str, ratio: str
) -> None:
    p, _ = plugin(eight_gpus("g0"))
    node, entries = schedule(p, gpu_pod("p", **requests), snapshot("g0"))
    assert node == "g0"
    assert len(entries) == count
    assert len(set(minors(entries))) == count
    for entry in entries:
        res = entry["resources"]
        assert res["koordinator.sh/gpu-core"] == core
        assert res["koordinator.sh/gpu-memory-ratio"] == ratio
        # Koordinator writes both memory forms: the ratio converted with the card's memory.
        assert res["koordinator.sh/gpu-memory"] == (
            "80Gi" if ratio == "100" else ("40Gi" if ratio == "50" else "0")
        )


def test_gpu_memory_bytes_converts_to_a_ratio_of_the_card() -> None:
    p, _ = plugin(device("g0", gpu(0, memory_gib=16)))
    _, entries = schedule(p, gpu_pod("p", **req(memory=str(4 * GIB))), snapshot("g0"))
    assert entries == [
        {
            "minor": 0,
            "resources": {
                "koordinator.sh/gpu-core": "0",
                "koordinator.sh/gpu-memory": "4Gi",
                "koordinator.sh/gpu-memory-ratio": "25",
            },
        }
    ]


@pytest.mark.parametrize(
    "requests",
    [
        req(nvidia=1, core=50),
        req(kgpu=150),
        req(core=50),
        req(ratio=150),
        req(ratio=50, memory="1Gi"),
        req(shared=2, core=51),
    ],
)
def test_other_combinations_are_rejected_for_every_node(requests: dict[str, str | int]) -> None:
    p, _ = plugin(eight_gpus("g0"))
    status = p.pre_filter(CycleState(), gpu_pod("p", **requests), snapshot("g0")).status
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def filter_names(
    p: DeviceShare, pod: PodInfo, snap: Snapshot
) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """Feasible nodes, reason -> nodes, and unresolvable nodes after PreFilter and Filter."""
    state = CycleState()
    assert p.pre_filter(state, pod, snap).status.ok
    rows = snap.candidate_rows()
    result = p.filter(state, pod, snap, rows)
    names = [snap.table.names[r] for r in rows.tolist()]
    feasible = [n for n, ok in zip(names, result.feasible.tolist(), strict=True) if ok]
    reasons = {
        reason: [n for n, hit in zip(names, mask.tolist(), strict=True) if hit]
        for reason, mask in result.rejections
        if mask.any()
    }
    unresolvable = (
        result.unresolvable if result.unresolvable is not None else np.zeros(len(names), dtype=bool)
    )
    return feasible, reasons, [n for n, hit in zip(names, unresolvable.tolist(), strict=True) if hit]


def test_insufficient_gpus_and_nodes_without_device() -> None:
    # A node without a Device passes, as in Koordinator: its GPUs are only counted by
    # NodeResourcesFit (kube-scheduler's behaviour), and no card is named there.
    p, backend = plugin(device("small", gpu(0), gpu(1)), eight_gpus("big"))
    snap = snapshot("plain", "small", "big")
    feasible, reasons, unresolvable = filter_names(p, gpu_pod("p", **req(nvidia=4)), snap)
    assert feasible == ["plain", "big"]
    assert reasons == {ERR_INSUFFICIENT_GPU: ["small"]}
    assert unresolvable == []
    node, entries = schedule(p, gpu_pod("q", **req(nvidia=1)), snap, node="plain")
    assert node == "plain"
    assert entries == []  # nothing allocated, nothing written
    assert backend.patches == []
    assert backend.bindings[-1][2] == {}


def test_shared_gpu_refused_on_unsupported_models_and_other_isolation_providers() -> None:
    args = DeviceShareArgs.model_validate(
        {"gpuShareUnsupportedModels": [{"vendor": "nvidia", "model": "A100"}]}
    )
    p, _ = plugin(eight_gpus("a100"), eight_gpus("h100"), eight_gpus("hami"), args=args)
    nodes = [
        make_node("a100")
        .alloc(cpu="64", memory="512Gi")
        .label(LABEL_GPU_VENDOR, "nvidia")
        .label(LABEL_GPU_MODEL, "A100"),
        make_node("h100")
        .alloc(cpu="64", memory="512Gi")
        .label(LABEL_GPU_VENDOR, "nvidia")
        .label(LABEL_GPU_MODEL, "H100"),
        make_node("hami").alloc(cpu="64", memory="512Gi").label(LABEL_GPU_ISOLATION_PROVIDER, "HAMi-core"),
    ]
    snap = make_snapshot([n.obj() for n in nodes])
    unsupported = "model 'A100' of vendor 'nvidia' does not support GPU Share"
    feasible, reasons, unresolvable = filter_names(p, gpu_pod("p", **req(core=50, ratio=50)), snap)
    assert (feasible, reasons, unresolvable) == (["h100", "hami"], {unsupported: ["a100"]}, ["a100"])
    # Whole cards are not sharing: every model takes them.
    assert filter_names(p, gpu_pod("w", **req(nvidia=1)), snap)[0] == ["a100", "h100", "hami"]
    isolated = make_pod("i").uid("i").label(LABEL_GPU_ISOLATION_PROVIDER, "HAMi-core")
    feasible, reasons, _ = filter_names(p, isolated.req({"cpu": "1", **req(core=50, ratio=50)}).info(), snap)
    assert feasible == ["hami"]
    assert reasons[ERR_ISOLATION_PROVIDER] == ["a100", "h100"]


def test_unhealthy_cards_are_not_allocated() -> None:
    p, _ = plugin(device("g0", gpu(0, healthy=False), gpu(1)))
    _, entries = schedule(p, gpu_pod("p", **req(nvidia=1)), snapshot("g0"))
    assert minors(entries) == [1]
    _, second = schedule(p, gpu_pod("q", **req(nvidia=1)), snapshot("g0"))
    assert second == []


def test_shared_gpus_bin_pack_by_default_never_above_100_core() -> None:
    p, _ = plugin(device("g0", gpu(0), gpu(1)))
    snap = snapshot("g0")
    placed = [schedule(p, gpu_pod(f"p{i}", **req(core=50, ratio=50)), snap)[1] for i in range(4)]
    assert [minors(e) for e in placed] == [[0], [0], [1], [1]]
    node, _ = schedule(p, gpu_pod("p4", **req(core=50, ratio=50)), snap)
    assert node is None


def test_least_allocated_spreads_shared_gpus() -> None:
    args = DeviceShareArgs.model_validate({"scoringStrategy": {"type": "LeastAllocated"}})
    p, _ = plugin(device("g0", gpu(0), gpu(1)), args=args)
    snap = snapshot("g0")
    placed = [minors(schedule(p, gpu_pod(f"p{i}", **req(core=50, ratio=50)), snap)[1]) for i in range(2)]
    assert placed == [[0], [1]]


def test_binpack_prefers_the_node_already_in_use() -> None:
    p, _ = plugin(eight_gpus("a"), eight_gpus("b"))
    snap = snapshot("a", "b")
    first, _ = schedule(p, gpu_pod("p0", **req(nvidia=1)), snap, node="b")
    assert first == "b"
    second, _ = schedule(p, gpu_pod("p1", **req(nvidia=1)), snap)
    assert second == "b"


def test_two_whole_gpus_share_a_pcie_switch_when_one_has_room() -> None:
    p, _ = plugin(eight_gpus("g0"))
    snap = snapshot("g0")
    _, first = schedule(p, gpu_pod("p0", **req(nvidia=1)), snap)
    assert minors(first) == [0]
    _, pair = schedule(p, gpu_pod("p1", **req(nvidia=2)), snap)
    assert minors(pair) == [2, 3]  # switch pci1 is whole; pci0 has only minor 1 left


def test_required_pcie_scope_hint() -> None:
    # minors 0 and 2 are taken: no PCIe switch of NUMA node 0 has two free cards.
    p, _ = plugin(eight_gpus("g0"))
    snap = snapshot("g0")
    for m in (0, 2):
        p.store.hold(f"x{m}", "g0", [Allocation(m, GPUUsage(100, 80 * GIB, 100))], assumed=False)
    assert p.store.usage("g0").keys() == {0, 2}
    hinted = make_pod("h").uid("h").req({"cpu": "1", **req(nvidia=2)})
    hint = {"gpu": {"requiredTopologyScope": "PCIe"}}
    pod = hinted.obj()
    pod.metadata.annotations = {ANNOTATION_DEVICE_ALLOCATE_HINT: json.dumps(hint)}
    _, entries = schedule(p, PodInfo.of(pod), snap)
    assert minors(entries) in ([4, 5], [6, 7])


def test_required_pcie_scope_rejects_when_no_switch_holds_the_request() -> None:
    p, _ = plugin(eight_gpus("g0"))
    pod = make_pod("h").uid("h").req({"cpu": "1", **req(nvidia=3)}).obj()
    pod.metadata.annotations = {ANNOTATION_DEVICE_ALLOCATE_HINT: '{"gpu":{"requiredTopologyScope":"PCIe"}}'}
    node, _ = schedule(p, PodInfo.of(pod), snapshot("g0"))
    assert node is None
    numa = make_pod("n").uid("n").req({"cpu": "1", **req(nvidia=4)}).obj()
    numa.metadata.annotations = {
        ANNOTATION_DEVICE_ALLOCATE_HINT: '{"gpu":{"requiredTopologyScope":"NUMANode"}}'
    }
    _, entries = schedule(p, PodInfo.of(numa), snapshot("g0"))
    assert minors(entries) == [0, 1, 2, 3]


def test_unreserve_gives_the_cards_back() -> None:
    p, _ = plugin(device("g0", gpu(0)))
    snap = snapshot("g0")
    state = CycleState()
    pod = gpu_pod("p", **req(nvidia=1))
    p.pre_filter(state, pod, snap)
    assert p.reserve(state, pod, "g0").ok
    assert p.store.usage("g0")
    p.unreserve(state, pod, "g0")
    assert not p.store.usage("g0")


def test_restart_rebuilds_usage_from_bound_pods_annotations() -> None:
    p, _ = plugin(device("g0", gpu(0), gpu(1)))
    snap = snapshot("g0")
    _, entries = schedule(p, gpu_pod("p", **req(core=60, ratio=60)), snap)
    bound = make_pod("p").uid("p").req({"cpu": "1", **req(core=60, ratio=60)}).on("g0").obj()
    bound.metadata.annotations = {ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": entries})}
    restarted, _ = plugin(device("g0", gpu(0), gpu(1)))
    restarted._on_pod(WatchEvent(EventType.REPLACED, objects=[bound]))
    assert restarted.store.usage("g0") == p.store.usage("g0")
    # 60 + 50 > 100 on the same card: the second pod goes to the other one.
    _, second = schedule(restarted, gpu_pod("q", **req(core=50, ratio=50)), snap)
    assert minors(second) == [1 - entries[0]["minor"]]
    # The pod finishing frees its card.
    done = bound.model_copy(deep=True)
    done.status.phase = "Succeeded"
    restarted._on_pod(WatchEvent(EventType.MODIFIED, obj=done))
    assert set(restarted.store.usage("g0")) == {1 - entries[0]["minor"]}


def test_a_deleted_device_leaves_the_node_to_gpu_counts() -> None:
    p, _ = plugin(eight_gpus("g0"))
    p._on_device(WatchEvent(EventType.DELETED, obj=eight_gpus("g0")))
    assert p.store.gpus("g0") == []
    node, entries = schedule(p, gpu_pod("p", **req(nvidia=1)), snapshot("g0"))
    assert (node, entries) == ("g0", [])


def test_args_defaults_and_names() -> None:
    args = DeviceShareArgs()
    assert args.scoring_strategy.type == "MostAllocated"
    assert [r.name for r in args.scoring_strategy.resources] == [
        "koordinator.sh/gpu-memory-ratio",
        "koordinator.sh/gpu-memory",
        "koordinator.sh/rdma",
        "koordinator.sh/fpga",
    ]
    wire = DeviceShareArgs.model_validate({"disableDeviceNUMATopologyAlignment": True})
    assert wire.disable_device_numa_topology_alignment
    assert "disableDeviceNUMATopologyAlignment" in wire.model_dump(by_alias=True)
    with pytest.raises(ValueError, match="LeastAllocated"):
        DeviceShareArgs.model_validate({"scoringStrategy": {"type": "Balanced"}})
    with pytest.raises(ValueError, match="not in valid range"):
        DeviceShareArgs.model_validate({"scoringStrategy": {"resources": [{"name": "x", "weight": 101}]}})


def test_a_reserve_pod_gets_cards_recorded_on_its_reservation() -> None:
    p, backend = plugin(eight_gpus("g0"))
    pod = make_pod("reserve").uid("reserve").req({"cpu": "1", **req(nvidia=2)}).obj()
    pod.metadata.annotations = {ANNOTATION_RESERVE_POD: "true"}
    state = CycleState()
    info = PodInfo.of(pod)
    assert p.pre_filter(state, info, snapshot("g0")).status.ok
    assert p.reserve(state, info, "g0").ok
    assert sorted(p.store.usage("g0")) == [0, 1]
    asyncio.run(p.pre_bind(state, info, "g0"))
    assert not backend.patches  # not a pod: Koordinator writes it on the Reservation object
    name, patch = backend.custom_patches[-1]
    assert name == "reserve"
    entries = json.loads(patch["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED])["gpu"]
    assert minors(entries) == [0, 1]
    p.unreserve(state, info, "g0")
    assert not p.store.usage("g0")


def test_preemption_sees_a_victims_cards_as_free() -> None:
    p, _ = plugin(device("g0", gpu(0), gpu(1)))
    victim = make_pod("victim").uid("victim").req({"cpu": "1", **req(nvidia=2)}).on("g0").obj()
    victim.metadata.annotations = {ANNOTATION_DEVICE_ALLOCATED: allocated_annotation([*whole(0), *whole(1)])}
    p._on_pod(WatchEvent(EventType.ADDED, obj=victim))
    node = make_node("g0").alloc({"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "2"}).obj()
    snap = make_snapshot([node], [victim])
    preemptor = gpu_pod("big", **req(nvidia=2))
    assert filter_names(p, preemptor, snap)[1] == {ERR_INSUFFICIENT_GPU: ["g0"]}
    restore = snap.simulate_removal([PodInfo.of(victim)])
    assert filter_names(p, preemptor, snap)[0] == ["g0"]
    restore()
    assert filter_names(p, preemptor, snap)[0] == []


def whole(minor: int) -> list[Allocation]:
    return [Allocation(minor, GPUUsage(100, 80 * GIB, 100))]


def test_scoring_weights_choose_which_resource_bin_packs() -> None:
    # Card 0 is fuller by memory bytes, card 1 by memory ratio (as bytes- and ratio-asking pods leave them).
    def on(resource: str) -> DeviceShare:
        args = DeviceShareArgs.model_validate(
            {"scoringStrategy": {"resources": [{"name": resource, "weight": 1}]}}
        )
        p, _ = plugin(device("g0", gpu(0), gpu(1)), args=args)
        p.store.hold("a", "g0", [Allocation(0, GPUUsage(0, 40 * GIB, 10))], assumed=False)
        p.store.hold("b", "g0", [Allocation(1, GPUUsage(0, 8 * GIB, 50))], assumed=False)
        return p

    shared = req(core=10, ratio=10)
    assert minors(
        schedule(on("koordinator.sh/gpu-memory-ratio"), gpu_pod("p", **shared), snapshot("g0"))[1]
    ) == [1]
    assert minors(schedule(on("koordinator.sh/gpu-memory"), gpu_pod("p", **shared), snapshot("g0"))[1]) == [0]


def test_an_unknown_device_type_is_ignored_with_one_warning_and_a_negative_minor_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    p, _ = plugin(device("g0", gpu(0), gpu(1)))
    snap = snapshot("g0")
    _, entries = schedule(p, gpu_pod("p", **req(core=60, ratio=60)), snap)
    odd = make_pod("odd").uid("odd").req({"cpu": "1"}).on("g0").obj()
    odd.metadata.annotations = {ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": entries, "tpu": entries})}
    negative = make_pod("neg").uid("neg").req({"cpu": "1"}).on("g0").obj()
    negative.metadata.annotations = {
        ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": [{**entries[0], "minor": -1}]})
    }
    restarted, _ = plugin(device("g0", gpu(0), gpu(1)))
    for _ in range(2):  # a relist says nothing new
        restarted._on_pod(WatchEvent(EventType.REPLACED, objects=[negative, odd]))
    # The gpu entry is held, the tpu one ignored; the pod with a negative minor holds nothing.
    assert restarted.store.usage("g0") == p.store.usage("g0")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2
    assert "pod default/neg: devices not counted" in warnings[0]
    assert "gpu[0].minor" in warnings[0]
    assert (
        "pod default/odd: scheduling.koordinator.sh/device-allocated: unknown device type(s) ['tpu']"
        in (warnings[1])
    )
