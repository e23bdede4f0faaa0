"""The Fragmentation strategy's mix from the cluster's pods (``fragmentation.mix: Cluster``, the
default): every pod asking for GPUs counts while it is in the cluster (and, among the last ones
deleted while pending, after), so a burst of one shape
among the recent pods does not make the strategy forget the shapes the cluster runs (FGD scores
against the whole workload's distribution). And it counts the cards a pod's cpu strands by each
card's share of its node, as MostAllocated does (host_share.py)."""

from __future__ import annotations

import numpy as np
import pytest

from apis.client.backend import PODS, EventType, WatchEvent
from apis.core import Pod
from scheduler.plugins.device_share import DeviceShareArgs
from scheduler.plugins.device_share.allocator import GPU, GPUUsage
from scheduler.plugins.device_share.args import FragmentationArgs
from scheduler.plugins.device_share.cluster_mix import UNSERVED_KEPT, ClusterMix
from scheduler.plugins.device_share.fragmentation_strategy import FragmentationStrategy
from scheduler.plugins.device_share.plugin import DeviceShare
from scheduler.plugins.device_share.request import GPURequest
from tests.scheduler.builders import make_pod
from tests.scheduler.plugins.device_share_fixtures import GIB, device, eight_gpus, gpu
from tests.scheduler.plugins.test_device_share import plugin, req, schedule, snapshot
from tests.scheduler.plugins.test_device_share_fragmentation_host import scores_of, two_card_nodes
from tests.scheduler.plugins.test_device_share_stranding import nodes

FRAGMENTATION = DeviceShareArgs.model_validate({"scoringStrategy": {"type": "Fragmentation"}})
ONE, HALF, EIGHT = GPURequest(1, 100, 100, None), GPURequest(1, 50, 50, None), GPURequest(8, 100, 100, None)


def test_each_pod_counts_once_while_it_is_there_with_its_mean_cpu() -> None:
    mix = ClusterMix(max_shapes=8)
    mix.add("a", ONE, (10_000, 2 * GIB))
    mix.add("b", ONE, (14_000, 4 * GIB))
    mix.add("b", ONE, (14_000, 4 * GIB))  # told again: still once
    mix.add("c", HALF, (4_000, GIB))
    assert mix.weights_seen() == {ONE: 2.0, HALF: 1.0}
    assert mix.hosts_seen() == {ONE: (12_000, 3 * GIB), HALF: (4_000, GIB)}
    mix.add("c", ONE, (6_000, GIB))  # its request changed: counted under the new shape only
    assert mix.weights_seen() == {ONE: 3.0}
    mix.remove("a")
    mix.remove("a")
    assert mix.weights_seen() == {ONE: 2.0}
    assert mix.hosts_seen() == {ONE: (10_000, 2_560 * 2**20)}
    assert mix.weights(EIGHT) == {ONE: 2.0, EIGHT: 1.0}  # the arriving pod's shape, at least 1
    assert mix.hosts(EIGHT, (96_000, 0)) == {ONE: (10_000, 2_560 * 2**20), EIGHT: (96_000, 0)}


def test_the_most_common_shapes_are_kept() -> None:
    mix = ClusterMix(max_shapes=2)
    for i in range(3):
        mix.add(f"one-{i}", ONE)
    for i in range(2):
        mix.add(f"half-{i}", HALF)
    mix.add("eight", EIGHT)
    assert mix.weights_seen() == {ONE: 3.0, HALF: 2.0}
    with pytest.raises(ValueError, match="positive"):
        ClusterMix(max_shapes=0)


def test_a_pod_deleted_while_pending_stays_in_the_mix_among_the_last_unserved() -> None:
    """Its shape is demand the cluster could not meet: were the pods that found no cards dropped,
    the shapes that fail most (whole nodes) would fade from the mix."""
    mix = ClusterMix(max_shapes=8)
    mix.add("ran", ONE)
    mix.add("waited", EIGHT)
    mix.leave("ran", served=True)
    mix.leave("waited", served=False)
    assert mix.weights_seen() == {EIGHT: 1.0}
    assert mix.uids() == []
    mix.add("waited", EIGHT)  # back (the same uid): counted once, in the cluster again
    assert mix.uids() == ["waited"]
    assert mix.weights_seen() == {EIGHT: 1.0}
    for i in range(UNSERVED_KEPT + 1):
        mix.add(f"gone-{i}", HALF)
        mix.leave(f"gone-{i}", served=False)
    assert mix.weights_seen() == {HALF: float(UNSERVED_KEPT), EIGHT: 1.0}  # the oldest unserved went


def pod_event(kind: EventType, pod: Pod) -> WatchEvent[Pod]:
    return WatchEvent(kind, obj=pod)


def tell(p: DeviceShare, event: WatchEvent[Pod]) -> None:
    """Hand the event to every pod listener the plugin subscribed, as the informer does."""
    for listener in p.handle.informers.listeners(PODS):
        listener(event)


def test_the_pod_informer_feeds_the_mix_bound_or_pending_until_the_pod_goes() -> None:
    p, _ = plugin(device("n1", gpu(0)), args=FRAGMENTATION)
    assert p.fragmentation is not None
    assert p.fragmentation.cluster is not None
    mix = p.fragmentation.cluster
    pending = make_pod("pending").uid("pending").req({"cpu": "4", **req(core=50, ratio=50)}).obj()
    bound = make_pod("bound").uid("bound").on("n1").req({"cpu": "8", **req(nvidia=1)}).obj()
    batch = make_pod("batch").uid("batch").req({"cpu": "16"}).obj()
    for pod in (pending, bound, batch):
        tell(p, pod_event(EventType.ADDED, pod))
    assert mix.weights_seen() == {HALF: 1.0, ONE: 1.0}
    assert mix.hosts_seen() == {HALF: (4_000, 0), ONE: (8_000, 0)}
    done = bound.model_copy(deep=True)
    done.status.phase = "Succeeded"
    tell(p, pod_event(EventType.MODIFIED, done))
    assert mix.weights_seen() == {HALF: 1.0}
    tell(p, pod_event(EventType.DELETED, pending))  # never placed: still counted (``leave``)
    assert mix.weights_seen() == {HALF: 1.0}
    tell(p, WatchEvent(EventType.REPLACED, objects=[bound, batch]))
    assert mix.weights_seen() == {HALF: 1.0, ONE: 1.0}
    tell(p, WatchEvent(EventType.REPLACED, objects=[]))
    assert mix.uids() == []
    assert mix.weights_seen() == {HALF: 1.0}


def test_a_burst_of_shared_pods_does_not_make_the_strategy_forget_the_cluster_runs_whole_nodes() -> None:
    """Forty eight-card pods run in the cluster; then a thousand half-card pods pass. The recent mix
    (half life 50 pods) has forgotten the eight-card shape and puts the next half card on the idle
    eight-card node (the first of the equals); the cluster's mix still keeps that node whole."""
    recent = DeviceShareArgs.model_validate(
        {"scoringStrategy": {"type": "Fragmentation", "fragmentation": {"mix": "Recent", "halfLifePods": 50}}}
    )
    chosen = {}
    for name, args in (("cluster", FRAGMENTATION), ("recent", recent)):
        p, _ = plugin(eight_gpus("idle"), device("shared", gpu(0), gpu(1)), args=args)
        assert p.fragmentation is not None
        for i in range(40):
            uid = f"eight-{i}"
            p.fragmentation.observe(uid, EIGHT, (0, 0))
            tell(
                p, pod_event(EventType.ADDED, make_pod(uid).uid(uid).on("elsewhere").req(req(nvidia=8)).obj())
            )
        for i in range(1000):
            p.fragmentation.observe(f"half-{i}", HALF, (0, 0))  # placed, then gone (not in the cluster)
        node, _ = schedule(
            p,
            make_pod("next").uid("next").req({"cpu": "1", **req(core=50, ratio=50)}).info(),
            snapshot("idle", "shared"),
        )
        chosen[name] = node
    assert chosen == {"cluster": "shared", "recent": "idle"}


def test_fragmentation_also_counts_the_cards_a_pod_without_gpus_strands_by_their_share() -> None:
    """Two nodes of two idle cards, 24 and 100 cpu; the mix's one-card pods ask 4 cpu, which an
    8-cpu batch pod leaves on both: the mix alone sees no difference. By each card's share (12 and
    50 cpu) the batch pod strands two thirds of a card on the small node, a sixth on the big one."""
    p, snap = two_card_nodes({"small": "24", "big": "100"})
    assert p.fragmentation is not None
    p.fragmentation.observe("seen", ONE, (4_000, GIB))
    pod = make_pod("batch").uid("batch").req({"cpu": "8", "memory": "1Gi"}).info()
    assert scores_of(p, snap, pod, skipped=True) == {"small": 0, "big": 100}


def test_fragmentation_keeps_a_cpu_heavy_gpu_pod_off_the_node_whose_other_cards_need_the_cpu() -> None:
    p, snap = nodes(FRAGMENTATION, {"dense": (4, "48"), "rich": (2, "104")}, {})
    assert p.fragmentation is not None
    p.fragmentation.observe("seen", ONE, (4_000, GIB))
    heavy = (
        make_pod("heavy").uid("heavy").req({"cpu": "30", "memory": "1Gi", **req(core=100, ratio=100)}).info()
    )
    scores = scores_of(p, snap, heavy, skipped=False)
    assert scores == {"dense": 0, "rich": 100}


def test_the_strategy_rates_against_the_mix_as_it_is_at_each_ask() -> None:
    """The strategy keeps the mix's shapes between asks (a pod asks two or three times): a pod that
    joins or leaves the mix is counted at the next ask, as a strategy made afresh counts it."""
    cluster: list[tuple[list[GPU], dict[int, GPUUsage]]] = [
        ([GPU(0, 80 * GIB), GPU(1, 80 * GIB)], {0: GPUUsage(50, 50, 40 * GIB)}),
        ([GPU(m, 80 * GIB) for m in range(8)], {}),
        ([GPU(0, 80 * GIB)], {0: GPUUsage(25, 25, 20 * GIB)}),
    ]
    free = np.array([[12_000, 64 * GIB], [40_000, 256 * GIB], [6_000, 32 * GIB]])

    def ratings(strategy: FragmentationStrategy) -> list[list[int]]:
        asked = [
            strategy.scores(request, cluster, [None] * 3, [True] * 3, free, (2_000, GIB)).tolist()
            for request in (HALF, ONE)
        ]
        return [*asked, strategy.host_scores(cluster, free, (6_000, GIB)).tolist()]

    kept = FragmentationStrategy(FragmentationArgs())
    pods: dict[str, tuple[GPURequest, tuple[int, int]]] = {}
    seen = set()
    for uid, shape, cpu in [("a", HALF, 4_000), ("b", ONE, 8_000), ("c", EIGHT, 32_000), ("a", None, 0)]:
        if shape is None:
            del pods[uid]
            assert kept.cluster is not None
            kept.cluster.remove(uid)
        else:
            pods[uid] = (shape, (cpu, GIB))
            kept.observe(uid, shape, pods[uid][1])
        fresh = FragmentationStrategy(FragmentationArgs())
        for other, (request, host) in pods.items():
            fresh.observe(other, request, host)
        assert ratings(kept) == ratings(fresh)
        assert kept.choose(*cluster[0], HALF) == fresh.choose(*cluster[0], HALF)
        seen.add(str(ratings(kept)))
    assert len(seen) > 2  # the mix changes the ratings
