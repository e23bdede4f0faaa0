"""DeviceShare's RDMA NICs and joint GPU + RDMA allocation through the plugin's extension points.

The node and the expected allocations are Koordinator's own (``device_allocator_test.go``,
TestAutopilotAllocator: ``fakeDeviceCR``, an ``rdma: 1`` pod with the hint ``{"rdma":
{"selector": {"type": "fakeW"}, "vfSelector": {"type" in [general, ...]}}}`` and, with GPUs,
``device-joint-allocate: {"deviceTypes": ["gpu", "rdma"]}``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.client.backend import EventType, WatchEvent
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_ALLOCATED,
    ANNOTATION_DEVICE_JOINT_ALLOCATE,
    LABEL_SECONDARY_DEVICE_WELL_PLANNED,
)
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.plugins.device_share import DeviceShare
from scheduler.plugins.device_share.joint import ERR_JOINT_ALLOCATE
from scheduler.plugins.device_share.rdma import ERR_INSUFFICIENT_RDMA, ERR_INSUFFICIENT_VF
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.device_share_fixtures import device, gpu
from tests.scheduler.plugins.device_share_rdma_fixtures import koordinator_node, nic, vf_bus
from tests.scheduler.plugins.test_device_share import bound_annotations, filter_names, plugin, snapshot

VF_HINT = {"rdma": {"selector": {"matchLabels": {"type": "fakeW"}}, "vfSelector": {}}}
JOINT = {"deviceTypes": ["gpu", "rdma"]}
SAME_PCIE = {"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}


def vf_hint(vf_type: str) -> dict[str, Any]:
    """Koordinator's test hint: NICs labelled fakeW, a VF from a group typed general or ``vf_type``."""
    selector = {"matchExpressions": [{"key": "type", "operator": "In", "values": ["general", vf_type]}]}
    return {"rdma": {"selector": {"matchLabels": {"type": "fakeW"}}, "vfSelector": selector}}


def pod(
    name: str,
    requests: dict[str, str | int],
    hint: dict[str, Any] | None = None,
    joint: dict[str, Any] | None = None,
) -> PodInfo:
    obj = make_pod(name).uid(name).req({"cpu": "1", **requests}).obj()
    annotations = {}
    if hint is not None:
        annotations[ANNOTATION_DEVICE_ALLOCATE_HINT] = json.dumps(hint)
    if joint is not None:
        annotations[ANNOTATION_DEVICE_JOINT_ALLOCATE] = json.dumps(joint)
    obj.metadata.annotations = annotations
    return PodInfo.of(obj)


def joint_pod(name: str, gpus: int, joint: dict[str, Any] = JOINT) -> PodInfo:
    return pod(name, {"nvidia.com/gpu": gpus, "koordinator.sh/rdma": 1}, vf_hint("fakeG"), joint)


def place(p: DeviceShare, info: PodInfo, snap: Snapshot, node: str = "n") -> dict[str, Any]:
    """PreFilter, Filter, Reserve and PreBind on ``node``: the pod's device-allocated value."""
    state = CycleState()
    assert p.pre_filter(state, info, snap).status.ok
    rows = snap.candidate_rows()
    names = [snap.table.names[r] for r in rows.tolist()]
    assert p.filter(state, info, snap, rows).feasible.tolist()[names.index(node)]
    assert p.reserve(state, info, node).ok
    value: dict[str, Any] = json.loads(bound_annotations(p, state, info, node)[ANNOTATION_DEVICE_ALLOCATED])
    return value


def nics(allocated: dict[str, Any]) -> list[tuple[int, str | None]]:
    """(NIC minor, VF bus id) of each rdma entry."""
    result = []
    for entry in allocated.get("rdma", []):
        vfs = (entry.get("extension") or {}).get("vfs") or [{}]
        result.append((entry["minor"], vfs[0].get("busID")))
    return sorted(result)


def cards(allocated: dict[str, Any]) -> list[int]:
    return sorted(e["minor"] for e in allocated.get("gpu", []))


def bind(
    p: DeviceShare, name: str, allocated: dict[str, Any], requests: dict[str, str | int], node: str = "n"
) -> None:
    """A pod bound on ``node`` with this device-allocated annotation, seen by the pod informer."""
    obj = make_pod(name).uid(name).req({"cpu": "1", **requests}).on(node).obj()
    obj.metadata.annotations = {ANNOTATION_DEVICE_ALLOCATED: json.dumps(allocated)}
    p._on_pod(WatchEvent(EventType.ADDED, obj=obj))


def one_vf(minor: int, bus: str) -> dict[str, Any]:
    return {
        "minor": minor,
        "resources": {"koordinator.sh/rdma": "1"},
        "extension": {"vfs": [{"busID": vf_bus(bus, 0)}]},
    }


# ---- Koordinator's examples (TestAutopilotAllocator) ----


def test_rdma_only_pod_gets_one_vf_of_the_first_nic() -> None:
    p, _ = plugin(koordinator_node("n"))
    allocated = place(p, pod("p", {"koordinator.sh/rdma": 1}, vf_hint("fakeC")), snapshot("n"))
    assert allocated == {
        "rdma": [
            {
                "minor": 1,
                "resources": {"koordinator.sh/rdma": "1"},
                "extension": {"vfs": [{"busID": "0000:1f:00.2"}]},  # omitempty: VF 0 has no minor
            }
        ]
    }


@pytest.mark.parametrize(
    ("gpus", "want_cards", "want_nics"),
    [
        (1, [0], [1]),
        (2, [0, 1], [1]),
        (3, [0, 1, 2], [1, 2]),
        (4, [0, 1, 2, 3], [1, 2]),
        (6, [0, 1, 2, 3, 4, 5], [1, 2, 3]),
        (8, list(range(8)), [1, 2, 3, 4]),
    ],
)
def test_joint_pod_gets_a_vf_on_each_pcie_switch_of_its_gpus(
    gpus: int, want_cards: list[int], want_nics: list[int]
) -> None:
    p, _ = plugin(koordinator_node("n"))
    allocated = place(p, joint_pod("p", gpus), snapshot("n"))
    assert cards(allocated) == want_cards
    buses = {1: "1f", 2: "90", 3: "51", 4: "b9"}
    assert nics(allocated) == [(m, vf_bus(buses[m], 0)) for m in want_nics]
    assert all(e["resources"] == {"koordinator.sh/rdma": "1"} for e in allocated["rdma"])


@pytest.mark.parametrize(
    ("gpus", "want_cards", "want_nics"),
    [(2, [2, 3], [(2, "0000:90:00.2")]), (3, [1, 2, 3], [(1, "0000:1f:00.3"), (2, "0000:90:00.2")])],
)
def test_joint_pod_beside_assigned_devices(
    gpus: int, want_cards: list[int], want_nics: list[tuple[int, str]]
) -> None:
    p, _ = plugin(koordinator_node("n"))
    whole = {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory-ratio": "100",
        "koordinator.sh/gpu-memory": "80Gi",
    }
    bind(
        p,
        "assigned",
        {"gpu": [{"minor": 0, "resources": whole}], "rdma": [one_vf(1, "1f")]},
        {"nvidia.com/gpu": 1},
    )
    allocated = place(p, joint_pod("p", gpus), snapshot("n"))
    assert cards(allocated) == want_cards
    assert nics(allocated) == want_nics


def test_joint_pod_takes_what_nics_with_vfs_there_are_on_its_switches() -> None:
    # Koordinator's "Only 1 RDMA and 4 PCIE with 2 GPUs Per PCIE, allocate 4 GPUs": the NIC on the
    # second switch has no VF, so the pod gets one NIC, as many as it asked for.
    p, _ = plugin(koordinator_node("n", vfs_on=(1,), one_numa=True))
    allocated = place(p, joint_pod("p", 4), snapshot("n"))
    assert cards(allocated) == [0, 1, 2, 3]
    assert nics(allocated) == [(1, "0000:1f:00.2")]
    # SamePCIe needs a NIC on each of the two switches: none fits the node.
    _, reasons, _ = filter_names(p, joint_pod("q", 4, SAME_PCIE), snapshot("n"))
    assert reasons == {ERR_INSUFFICIENT_RDMA: ["n"]}


def test_apply_for_all_takes_every_selected_nic_without_vf() -> None:
    # Koordinator's hostNetwork case: rdma ApplyForAll drops out of the joint allocation.
    p, _ = plugin(koordinator_node("n"))
    hint = {"rdma": {"selector": {"matchLabels": {"type": "fakeW"}}, "allocateStrategy": "ApplyForAll"}}
    allocated = place(
        p, pod("p", {"nvidia.com/gpu": 1, "koordinator.sh/rdma": 1}, hint, JOINT), snapshot("n")
    )
    assert cards(allocated) == [0]
    assert nics(allocated) == [(1, None), (2, None), (3, None), (4, None)]


# ---- request shapes and hints ----


def test_rdma_above_100_takes_whole_nics_and_bad_units_are_refused() -> None:
    p, _ = plugin(koordinator_node("n"))
    allocated = place(p, pod("p", {"koordinator.sh/rdma": 200}), snapshot("n"))
    assert allocated["rdma"] == [
        {"minor": 1, "resources": {"koordinator.sh/rdma": "100"}},
        {"minor": 2, "resources": {"koordinator.sh/rdma": "100"}},
    ]
    # the legacy name is the same resource
    assert nics(place(p, pod("q", {"kubernetes.io/rdma": 100}), snapshot("n"))) == [(3, None)]
    status = p.pre_filter(CycleState(), pod("r", {"koordinator.sh/rdma": 150}), snapshot("n")).status
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "invalid resource unit koordinator.sh/rdma: 150" in status.message()


def test_requests_as_count_and_device_level_exclusivity() -> None:
    p, _ = plugin(koordinator_node("n"))
    as_count = {"rdma": {"allocateStrategy": "RequestsAsCount"}}
    allocated = place(p, pod("p", {"koordinator.sh/rdma": 2}, as_count), snapshot("n"))
    assert allocated["rdma"] == [
        {"minor": 1, "resources": {"koordinator.sh/rdma": "1"}},
        {"minor": 2, "resources": {"koordinator.sh/rdma": "1"}},
    ]
    exclusive = {"rdma": {"allocateStrategy": "RequestsAsCount", "exclusivePolicy": "DeviceLevel"}}
    # 100 per NIC: only the two untouched NICs hold it.
    allocated = place(p, pod("q", {"koordinator.sh/rdma": 2}, exclusive), snapshot("n"))
    assert allocated["rdma"] == [
        {"minor": 3, "resources": {"koordinator.sh/rdma": "100"}},
        {"minor": 4, "resources": {"koordinator.sh/rdma": "100"}},
    ]
    # no NIC is left entirely free for a third exclusive one; a shared one still fits
    _, reasons, _ = filter_names(p, pod("r", {"koordinator.sh/rdma": 1}, exclusive), snapshot("n"))
    assert reasons == {ERR_INSUFFICIENT_RDMA: ["n"]}
    assert nics(place(p, pod("s", {"koordinator.sh/rdma": 1}, as_count), snapshot("n"))) == [(1, None)]


def test_vf_selector_picks_the_group_and_nodes_without_vfs_are_unresolvable() -> None:
    labelled = device(
        "n",
        nic(1, numa=0, pcie="0", bus="1f", vfs=4, vf_labels={"type": "general"}),
        nic(2, numa=0, pcie="0", bus="90", vfs=4, vf_labels={"type": "fast"}),
    )
    bare = device("bare", nic(1, numa=0, pcie="0", vfs=0))
    gpus_only = device("gpus", gpu(0))
    p, _ = plugin(labelled, bare, gpus_only)
    fast = {"rdma": {"vfSelector": {"matchLabels": {"type": "fast"}}}}
    feasible, reasons, unresolvable = filter_names(
        p, pod("p", {"koordinator.sh/rdma": 1}, fast), snapshot("n", "bare", "gpus", "none")
    )
    # a node without Device passes (its koordinator.sh/rdma is only counted, by NodeResourcesFit)
    assert feasible == ["n", "none"]
    assert reasons == {ERR_INSUFFICIENT_RDMA: ["gpus"], ERR_INSUFFICIENT_VF: ["bare"]}
    assert unresolvable == ["bare", "gpus"]
    allocated = place(p, pod("p", {"koordinator.sh/rdma": 1}, fast), snapshot("n", "bare", "gpus"))
    assert nics(allocated) == [(2, "0000:90:00.2")]


def test_same_pcie_refuses_nics_on_another_switch() -> None:
    node = device("n", gpu(0, numa=0, pcie="0"), nic(1, numa=0, pcie="9"))
    p, _ = plugin(node)
    # Without SamePCIe the NIC elsewhere will do.
    assert nics(place(p, joint_pod("p", 1), snapshot("n"))) == [(1, "0000:1f:00.2")]
    p, _ = plugin(node)
    _, reasons, unresolvable = filter_names(p, joint_pod("q", 1, SAME_PCIE), snapshot("n"))
    assert reasons == {ERR_JOINT_ALLOCATE: ["n"]}
    assert unresolvable == []


def test_same_pcie_pod_lands_where_its_gpus_have_a_nic() -> None:
    far = device("far", gpu(0, numa=0, pcie="0"), nic(1, numa=0, pcie="9"))
    near = device("near", gpu(0, numa=0, pcie="0"), nic(1, numa=0, pcie="0"))
    p, _ = plugin(far, near)
    feasible, _, _ = filter_names(p, joint_pod("p", 1, SAME_PCIE), snapshot("far", "near"))
    assert feasible == ["near"]


# ---- VFs are never given twice; usage survives a restart ----


def test_each_vf_goes_to_one_pod_and_a_restart_reads_them_back() -> None:
    node = device("n", nic(1, numa=0, pcie="0", bus="1f", vfs=3))
    p, _ = plugin(node)
    snap = snapshot("n")
    got = [nics(place(p, pod(f"p{i}", {"koordinator.sh/rdma": 1}, VF_HINT), snap)) for i in range(3)]
    assert got == [[(1, vf_bus("1f", k))] for k in range(3)]
    _, reasons, _ = filter_names(p, pod("more", {"koordinator.sh/rdma": 1}, VF_HINT), snap)
    assert reasons == {ERR_INSUFFICIENT_RDMA: ["n"]}

    restarted, _ = plugin(node)
    for i, entries in enumerate(got):
        entry = {
            "minor": 1,
            "resources": {"koordinator.sh/rdma": "1"},
            "extension": {"vfs": [{"minor": i, "busID": entries[0][1]}]},
        }
        if i != 1:
            bind(restarted, f"p{i}", {"rdma": [entry]}, {"koordinator.sh/rdma": 1})
    assert restarted.store.rdma_usage("n").amounts == {1: 2}
    # the middle VF's pod is gone: the next pod gets exactly that VF
    assert nics(place(restarted, pod("q", {"koordinator.sh/rdma": 1}, VF_HINT), snap)) == [
        (1, vf_bus("1f", 1))
    ]


def test_unreserve_gives_the_nics_and_vfs_back() -> None:
    p, _ = plugin(koordinator_node("n"))
    state = CycleState()
    info = joint_pod("p", 2)
    assert p.pre_filter(state, info, snapshot("n")).status.ok
    assert p.reserve(state, info, "n").ok
    assert p.store.rdma_usage("n").vfs == {1: {"0000:1f:00.2": 1}}
    p.unreserve(state, info, "n")
    assert p.store.rdma_usage("n").amounts == {}
    assert p.store.rdma_usage("n").vfs == {}


# ---- scoring and well-planned secondary devices ----


def test_nics_bin_pack_by_default() -> None:
    p, _ = plugin(device("a", nic(1, numa=0, pcie="0")), device("b", nic(1, numa=0, pcie="0")))
    bind(p, "used", {"rdma": [{"minor": 1, "resources": {"koordinator.sh/rdma": "30"}}]}, {}, node="b")
    snap = snapshot("a", "b")
    state = CycleState()
    info = pod("p", {"koordinator.sh/rdma": 10})
    assert p.pre_filter(state, info, snap).status.ok
    rows = snap.candidate_rows()
    scores = p.normalize_scores(state, info, p.score(state, info, snap, rows)).tolist()
    names = [snap.table.names[r] for r in rows.tolist()]
    # MostAllocated over the node's NICs: (0 + 10)% on a, (30 + 10)% on b
    assert dict(zip(names, scores, strict=True)) == {"a": 25, "b": 100}


def test_well_planned_nics_are_left_to_reserve_for_whole_gpu_joint_pods() -> None:
    node = koordinator_node("n")
    node.metadata.labels = {LABEL_SECONDARY_DEVICE_WELL_PLANNED: "true"}
    p, _ = plugin(node)
    # every NIC's amount is taken
    for m in (1, 2, 3, 4):
        bind(p, f"full{m}", {"rdma": [{"minor": m, "resources": {"koordinator.sh/rdma": "100"}}]}, {})
    feasible, _, _ = filter_names(p, joint_pod("p", 1), snapshot("n"))
    assert feasible == ["n"]
    state = CycleState()
    info = joint_pod("p", 1)
    p.pre_filter(state, info, snapshot("n"))
    status = p.reserve(state, info, "n")
    assert status.code is Code.UNSCHEDULABLE
    assert ERR_INSUFFICIENT_RDMA in status.message()
    # an RDMA-only pod (no primary GPU) is checked in Filter as usual
    _, reasons, _ = filter_names(p, pod("q", {"koordinator.sh/rdma": 1}, VF_HINT), snapshot("n"))
    assert reasons == {ERR_INSUFFICIENT_RDMA: ["n"]}


def test_unhealthy_nics_are_not_allocated() -> None:
    p, _ = plugin(device("n", nic(1, numa=0, pcie="0", healthy=False), nic(2, numa=0, pcie="0", bus="90")))
    assert nics(place(p, pod("p", {"koordinator.sh/rdma": 100}), snapshot("n"))) == [(2, None)]


def test_preemption_sees_a_victims_nic_as_free() -> None:
    p, _ = plugin(device("n", nic(1, numa=0, pcie="0")))
    victim = make_pod("victim").uid("victim").req({"cpu": "1", "koordinator.sh/rdma": 100}).on("n").obj()
    victim.metadata.annotations = {
        ANNOTATION_DEVICE_ALLOCATED: json.dumps(
            {"rdma": [{"minor": 1, "resources": {"koordinator.sh/rdma": "100"}}]}
        )
    }
    p._on_pod(WatchEvent(EventType.ADDED, obj=victim))
    node = make_node("n").alloc({"cpu": "64", "memory": "512Gi", "koordinator.sh/rdma": "100"}).obj()
    snap = make_snapshot([node], [victim])
    preemptor = pod("big", {"koordinator.sh/rdma": 100})
    assert filter_names(p, preemptor, snap)[1] == {ERR_INSUFFICIENT_RDMA: ["n"]}
    restore = snap.simulate_removal([PodInfo.of(victim)])
    assert filter_names(p, preemptor, snap)[0] == ["n"]
    restore()
    assert filter_names(p, preemptor, snap)[0] == []
