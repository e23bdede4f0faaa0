"""The Fragmentation strategy counts the node's CPU and memory, as FGD does: a card whose node has
too little CPU or memory left for the pods of a shape is fragmented for that shape, a GPU pod is
rated with what it takes of its node, and a pod without GPUs goes where it strands the fewest
cards. On the OpenB trace, GPUs were left idle on nodes whose CPU the other pods had taken."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.plugins.device_share import DeviceShareArgs
from scheduler.plugins.device_share.allocator import GPU, GPUUsage
from scheduler.plugins.device_share.fragmentation import (
    cards_of,
    fragmentation,
    host_deltas,
    shapes_of,
    single_card_deltas,
)
from scheduler.plugins.device_share.plugin import DeviceShare
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.request_mix import RequestMix
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.device_share_fixtures import GIB, device, gpu
from tests.scheduler.plugins.test_device_share import plugin, req

FRAGMENTATION = DeviceShareArgs.model_validate({"scoringStrategy": {"type": "Fragmentation"}})
ONE = GPURequest(1, 100, 100, None)
CPU_12 = 12_000
"""What a one-card pod asks of its node (milli-cpu), as OpenB's typical 1-GPU task."""


def two_idle_cards() -> list[tuple[list[GPU], dict[int, GPUUsage]]]:
    return [([GPU(0, 80 * GIB), GPU(1, 80 * GIB)], {})]


def test_an_idle_card_on_a_node_without_cpu_for_its_pods_is_fragmented() -> None:
    cards = cards_of(two_idle_cards())
    shapes = shapes_of({ONE: 1.0}, {ONE: (CPU_12, GIB)})
    ample = np.array([[64_000, 64 * GIB]])
    starved = np.array([[4_000, 64 * GIB]])
    assert fragmentation(cards.capacity, cards.used, cards.valid, shapes, ample)[0] == 0.0
    assert fragmentation(cards.capacity, cards.used, cards.valid, shapes, starved)[0] == 2.0
    # Without the node's figures the cards count as usable, as before.
    assert fragmentation(cards.capacity, cards.used, cards.valid, shapes)[0] == 0.0


def test_a_gpu_pod_that_takes_the_cpu_the_other_card_needs_strands_it() -> None:
    cards = cards_of(two_idle_cards())
    shapes = shapes_of({ONE: 1.0}, {ONE: (CPU_12, GIB)})
    take = np.array([CPU_12, GIB])
    roomy = single_card_deltas(cards, ONE, shapes, np.array([[30_000, 64 * GIB]]), take)
    tight = single_card_deltas(cards, ONE, shapes, np.array([[20_000, 64 * GIB]]), take)
    assert roomy.min() == 0.0  # 18 cpu are left: the other card still takes a 12-cpu pod
    assert tight.min() == 1.0  # 8 cpu are left: the other card is stranded


def test_a_pod_without_gpus_strands_cards_only_where_it_takes_the_cpu_they_need() -> None:
    cards = cards_of(two_idle_cards() * 2)
    shapes = shapes_of({ONE: 1.0}, {ONE: (CPU_12, GIB)})
    free = np.array([[100_000, 64 * GIB], [24_000, 64 * GIB]])
    deltas = host_deltas(cards, shapes, free, np.array([16_000, GIB]))
    assert deltas.tolist() == [0.0, 2.0]


def test_the_mix_keeps_the_mean_cpu_and_memory_of_each_shapes_pods() -> None:
    mix = RequestMix(half_life=1_000_000, max_shapes=8)
    mix.observe(ONE, (10_000, 2 * GIB))
    mix.observe(ONE, (14_000, 4 * GIB))
    cpu, memory = mix.hosts(ONE, (0, 0))[ONE]  # weighted by recency: the second counts a little more
    assert cpu == 12_000
    assert memory == pytest.approx(3 * GIB, rel=1e-5)
    half = GPURequest(1, 50, 50, None)
    assert mix.hosts(half, (6_000, GIB))[half] == (6_000, GIB)  # not seen: the pod's own


def two_card_nodes(cpus: dict[str, str]) -> tuple[DeviceShare, Snapshot]:
    """Nodes of two idle cards with these cpus, the plugin under Fragmentation having seen the
    12-cpu one-card pods."""
    p, _ = plugin(*(device(n, gpu(0), gpu(1)) for n in cpus), args=FRAGMENTATION)
    assert p.fragmentation is not None
    p.fragmentation.observe("seen", ONE, (CPU_12, GIB))
    snap = make_snapshot([make_node(n).alloc(cpu=c, memory="64Gi").obj() for n, c in cpus.items()])
    return p, snap


def scores_of(p: DeviceShare, snap: Snapshot, pod: PodInfo, *, skipped: bool) -> dict[str, int]:
    """DeviceShare's scores of the nodes its Filter keeps (``skipped``: the pod asks for no GPU)."""
    state = CycleState()
    status = p.pre_filter(state, pod, snap).status
    assert status.code.name == "SKIP" if skipped else status.ok
    rows = snap.candidate_rows()
    if not skipped:
        rows = rows[p.filter(state, pod, snap, rows).feasible]
    names = [snap.table.names[r] for r in rows.tolist()]
    return dict(zip(names, p.score(state, pod, snap, rows).tolist(), strict=True))


def test_a_pod_without_gpus_goes_to_the_node_where_it_strands_no_card() -> None:
    """Both nodes have two idle cards; the CPU-only pod's 16 cpu leave the small node 8, too few
    for the 12-cpu one-card pods the mix has seen, and the big one 84."""
    p, snap = two_card_nodes({"small": "24", "big": "100"})
    pod = make_pod("batch").uid("batch").req({"cpu": "16", "memory": "1Gi"}).info()
    assert scores_of(p, snap, pod, skipped=True) == {"small": 0, "big": 100}


def test_a_gpu_pod_prefers_the_node_where_its_cpu_leaves_room_for_the_next_card() -> None:
    p, snap = two_card_nodes({"tight": "20", "roomy": "30"})
    one = make_pod("one").uid("one").req({"cpu": "12", "memory": "1Gi", **req(core=100, ratio=100)}).info()
    assert scores_of(p, snap, one, skipped=False) == {"tight": 0, "roomy": 100}
