"""GPU partitions (v1.6): whole cards taken as a partition of the Device's gpu-partitions table."""

from __future__ import annotations

import json
from typing import Any

from apis.extension.device import (
    ANNOTATION_GPU_PARTITION_SPEC,
    ANNOTATION_GPU_PARTITIONS,
    LABEL_GPU_MODEL,
    LABEL_GPU_PARTITION_POLICY,
)
from apis.scheduling.device import Device
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.device_share.allocator import Allocation, GPUUsage
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.device_share_fixtures import GIB, eight_gpus
from tests.scheduler.plugins.test_device_share import minors, plugin, req, schedule, snapshot


def _table(pair_scores: tuple[int, int, int, int] = (1, 1, 1, 1)) -> dict[str, Any]:
    def part(ms: list[int], score: int, bandwidth: str = "400Gi") -> dict[str, Any]:
        return {
            "minors": ms,
            "gpuLinkType": "NVLink",
            "ringBusBandwidth": bandwidth,
            "allocationScore": score,
        }

    return {
        "2": [part([2 * i, 2 * i + 1], s) for i, s in enumerate(pair_scores)],
        "4": [part([0, 1, 2, 3], 1), part([4, 5, 6, 7], 1)],
        "8": [part(list(range(8)), 1)],
    }


def partitioned(name: str, table: dict[str, Any], *, honor_label_on_device: bool = False) -> Device:
    device = eight_gpus(name)
    device.metadata.annotations = {ANNOTATION_GPU_PARTITIONS: json.dumps(table)}
    if honor_label_on_device:
        device.metadata.labels = {LABEL_GPU_PARTITION_POLICY: "Honor"}
    return device


def pod(name: str, count: int, spec: dict[str, Any] | None = None) -> PodInfo:
    obj = make_pod(name).uid(name).req({"cpu": "1", **req(nvidia=count)}).obj()
    if spec is not None:
        obj.metadata.annotations = {ANNOTATION_GPU_PARTITION_SPEC: json.dumps(spec)}
    return PodInfo.of(obj)


def honor_snapshot(name: str) -> Any:
    node = make_node(name).alloc(cpu="64", memory="512Gi").label(LABEL_GPU_PARTITION_POLICY, "Honor")
    return make_snapshot([node.obj()])


def whole(minor: int) -> list[Allocation]:
    return [Allocation(minor, GPUUsage(100, 80 * GIB, 100))]


def test_honor_takes_the_pair_that_keeps_a_quad_free() -> None:
    p, _ = plugin(partitioned("g0", _table()))
    p.store.hold("x", "g0", whole(4), assumed=False)
    _, entries = schedule(p, pod("p", 2), honor_snapshot("g0"))
    # Card 4 broke the quad 4-7: [6,7] keeps the quad 0-3 whole ([0,1] or [2,3] would break it),
    # where the plain topology search would take the lowest free switch, [0,1].
    assert minors(entries) == [6, 7]
    plain, _ = plugin(eight_gpus("g0"))
    plain.store.hold("x", "g0", whole(4), assumed=False)
    assert minors(schedule(plain, pod("p", 2), snapshot("g0"))[1]) == [0, 1]


def test_honor_refuses_a_count_the_table_does_not_have() -> None:
    p, _ = plugin(partitioned("g0", _table()))
    node, _ = schedule(p, pod("p", 3), honor_snapshot("g0"))
    assert node is None
    # Without Honor (and no partition spec) the table is not consulted.
    p2, _ = plugin(partitioned("g0", _table()))
    node, entries = schedule(p2, pod("p", 3), snapshot("g0"))
    assert (node, len(entries)) == ("g0", 3)


def test_the_policy_label_may_be_on_the_device() -> None:
    p, _ = plugin(partitioned("g0", _table(), honor_label_on_device=True))
    assert schedule(p, pod("p", 3), snapshot("g0"))[0] is None


def test_restricted_uses_only_the_best_scored_partitions() -> None:
    # Pair [0,1] scores best (1), the others 2; card 0 is taken.
    table = _table((1, 2, 2, 2))
    p, _ = plugin(partitioned("g0", table))
    p.store.hold("x", "g0", whole(0), assumed=False)
    assert schedule(p, pod("r", 2, {"allocatePolicy": "Restricted"}), snapshot("g0"))[0] is None
    _, entries = schedule(p, pod("b", 2, {"allocatePolicy": "BestEffort"}), snapshot("g0"))
    assert minors(entries) == [2, 3]


def test_ring_bus_bandwidth_is_a_floor() -> None:
    table = _table()
    table["2"][0]["ringBusBandwidth"] = "100Gi"  # pair 0-1 is slow
    p, _ = plugin(partitioned("g0", table))
    _, entries = schedule(p, pod("p", 2, {"ringBusBandwidth": "200Gi"}), snapshot("g0"))
    assert minors(entries) == [2, 3]


def test_a_shared_request_ignores_partitions() -> None:
    p, _ = plugin(partitioned("g0", _table()))
    shared = make_pod("s").uid("s").req({"cpu": "1", **req(core=50, ratio=50)}).info()
    _, entries = schedule(p, shared, honor_snapshot("g0"))
    assert minors(entries) == [0]


def _modelled(name: str, model: str) -> Device:
    device = eight_gpus(name)
    device.metadata.labels = {LABEL_GPU_MODEL: model}
    return device


def test_built_in_tables_for_h100_h800_h20_without_an_annotation() -> None:
    for model in ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H800", "NVIDIA-H20"):
        p, _ = plugin(_modelled("g0", model))
        p.store.hold("x", "g0", whole(4), assumed=False)
        # The built-in table (pairs, quads, all 8) is honoured: the pair that keeps quad 0-3 free.
        assert minors(schedule(p, pod("p", 2), honor_snapshot("g0"))[1]) == [6, 7], model
        assert schedule(p, pod("q", 3), honor_snapshot("g0"))[0] is None, model


def test_no_built_in_table_for_other_models_or_an_annotated_device() -> None:
    p, _ = plugin(_modelled("g0", "NVIDIA-A100-SXM4-80GB"))
    assert len(schedule(p, pod("q", 3), honor_snapshot("g0"))[1]) == 3
    # A Device's own table wins over the built-in one, even on an H800.
    device = partitioned("g1", {"3": [{"minors": [5, 6, 7], "allocationScore": 1}]})
    device.metadata.labels = {LABEL_GPU_MODEL: "NVIDIA-H800"}
    p2, _ = plugin(device)
    assert minors(schedule(p2, pod("q", 3), honor_snapshot("g1"))[1]) == [5, 6, 7]
    assert schedule(p2, pod("r", 2), honor_snapshot("g1"))[0] is None


def test_koordlet_and_scheduler_share_one_table() -> None:
    from apis.extension.gpu_partition_tables import builtin_partition_table
    from koordlet.devices.partitions import partition_table

    assert partition_table("NVIDIA H20", list(range(8)), True) == builtin_partition_table(
        "NVIDIA-H20", list(range(8))
    )
