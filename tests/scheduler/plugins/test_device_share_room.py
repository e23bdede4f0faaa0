"""DeviceShare's room for gangs and preemption (``interfaces.MemberRoom``): how many pods of one
GPU shape a node's cards still hold, counted as Reserve takes them."""

from __future__ import annotations

import json

from apis.extension.device import ANNOTATION_DEVICE_ALLOCATE_HINT
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.extensions import MemberRoom
from scheduler.plugins.device_share.allocator import Allocation, GPUUsage
from tests.scheduler.builders import make_pod
from tests.scheduler.plugins.device_share_fixtures import eight_gpus
from tests.scheduler.plugins.test_device_share import plugin, req, snapshot

PCIE = {ANNOTATION_DEVICE_ALLOCATE_HINT: json.dumps({"gpu": {"requiredTopologyScope": "PCIe"}})}


def test_pairs_on_one_switch_count_switches_with_two_free_cards() -> None:
    p, _ = plugin(eight_gpus("g0"))  # four switches of two cards
    assert isinstance(p, MemberRoom)
    obj = make_pod("pair").uid("pair").req({"cpu": "1", **req(nvidia=2)}).obj()
    obj.metadata.annotations = dict(PCIE)
    pod = PodInfo.of(obj)
    room = p.member_room(pod, snapshot("g0", "plain"), ["g0", "plain"], limit=10)
    assert room is not None
    assert room.shape == "sets of 2 whole GPUs in one PCIe"
    assert room.per_node == {"g0": 4}  # "plain" has no Device: not limited by cards
    p.store.hold("other", "g0", [Allocation(0, GPUUsage(100, 80 * 2**30, 100))], assumed=False)
    assert p.member_room(pod, snapshot("g0"), ["g0"], limit=10).per_node == {"g0": 3}  # type: ignore[union-attr]


def test_shares_are_counted_up_to_the_limit() -> None:
    p, _ = plugin(eight_gpus("g0"))
    half = make_pod("half").uid("half").req({"cpu": "1", **req(core=50, ratio=50)}).info()
    snap = snapshot("g0")
    assert p.member_room(half, snap, ["g0"], limit=5).per_node == {"g0": 5}  # type: ignore[union-attr]
    assert p.member_room(half, snap, ["g0"], limit=100).per_node == {"g0": 16}  # type: ignore[union-attr]
    web = make_pod("web").req({"cpu": "1"}).info()
    assert p.member_room(web, snap, ["g0"], limit=5) is None  # asks for no GPU
