"""MostAllocated and LeastAllocated count the cards a pod's cpu and memory strand (host_share.py):
each card of a GPU node owns its share of the node's cpu and memory, a pod without GPUs goes where
it takes none of the free cards' shares, and a GPU pod that asks for more than its cards' share
goes where the rest does not strand the node's other cards. On the OpenB trace, bin-packing left
GPUs idle on nodes whose CPU the other pods had taken while the CPU-rich nodes kept theirs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.plugins.device_share import DeviceShareArgs
from scheduler.plugins.device_share.allocator import GPU, Allocation, GPUUsage
from scheduler.plugins.device_share.cycle import host_free
from scheduler.plugins.device_share.host_share import UNBOUNDED, card_shares, stranded, stranded_delta
from scheduler.plugins.device_share.plugin import DeviceShare
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.device_share_fixtures import GIB, device, gpu
from tests.scheduler.plugins.test_device_share import plugin, req

CPU, MEMORY = 0, 1


def test_each_card_owns_its_share_of_the_nodes_cpu() -> None:
    """Eight idle cards and 96 cpu: 12 cpu each. A 16-cpu pod without GPUs strands 16/12 cards;
    on a node of two cards and 104 cpu (52 each) 16/52; where the cards are all in use, none."""
    shares = card_shares(
        [
            ([GPU(m, 32 * GIB) for m in range(8)], {}),
            ([GPU(m, 16 * GIB) for m in range(2)], {}),
            ([GPU(m, 16 * GIB) for m in range(2)], {m: GPUUsage(100, 16 * GIB, 100) for m in range(2)}),
        ]
    )
    assert shares[0].tolist() == [8.0, 2.0, 2.0]
    assert shares[1].tolist() == [8.0, 2.0, 0.0]
    capacity = np.array([[96_000, 384 * GIB], [104_000, 512 * GIB], [104_000, 512 * GIB]])
    delta = stranded_delta(shares, capacity, capacity.copy(), np.array([16_000, GIB]))
    assert delta.tolist() == pytest.approx([16 / 12, 16 / 52, 0.0])


def test_a_card_half_in_use_needs_half_its_share_and_memory_counts_too() -> None:
    cards, free_cards = card_shares([([GPU(0, 16 * GIB), GPU(1, 16 * GIB)], {0: GPUUsage(50, 8 * GIB, 50)})])
    assert free_cards.tolist() == [1.5]
    capacity = np.array([[20_000, 100 * GIB]])
    # 1.5 cards need 15 cpu and 75 GiB: 15 cpu and 50 GiB free leave half a card without memory.
    assert stranded(cards, free_cards, capacity, np.array([[15_000, 50 * GIB]])).tolist() == [0.5]


def test_a_gpu_pod_within_its_share_strands_nothing_and_takes_up_stranded_cards() -> None:
    shares = card_shares([([GPU(m, 32 * GIB) for m in range(4)], {})])
    capacity = np.array([[48_000, 192 * GIB]])
    fair = stranded_delta(shares, capacity, capacity.copy(), np.array([12_000, 48 * GIB]), cards_taken=1.0)
    greedy = stranded_delta(shares, capacity, capacity.copy(), np.array([30_000, 48 * GIB]), cards_taken=1.0)
    assert fair.tolist() == [0.0]
    assert greedy.tolist() == pytest.approx([1.5])  # 18 cpu left for 3 cards of 12
    starved = np.array([[6_000, 192 * GIB]])  # 4 free cards, cpu for half of one
    frugal = stranded_delta(shares, capacity, starved, np.array([2_000, GIB]), cards_taken=1.0)
    assert frugal.tolist() == pytest.approx([-(1 - 2 / 12)])


def test_a_node_without_cards_or_without_cpu_figures_strands_nothing() -> None:
    shares = card_shares([([], {}), ([GPU(0, 16 * GIB)], {})])
    huge = np.iinfo(np.int64).max // 4
    capacity = np.array([[8_000, 32 * GIB], [huge, huge]])
    delta = stranded_delta(shares, capacity, capacity.copy(), np.array([8_000, 32 * GIB]))
    assert delta.tolist() == [0.0, 0.0]


def nodes(
    args: DeviceShareArgs, cards: dict[str, tuple[int, str]], used: dict[str, str]
) -> tuple[DeviceShare, Snapshot]:
    """Nodes of ``cards[n] = (count, cpu)`` idle cards; ``used[n]``: cpu already taken there by a
    pod without GPUs."""
    p, _ = plugin(*(device(n, *(gpu(m) for m in range(count))) for n, (count, _) in cards.items()), args=args)
    bound = [make_pod(f"on-{n}").on(n).req({"cpu": c}).obj() for n, c in used.items()]
    snap = make_snapshot(
        [make_node(n).alloc(cpu=cpu, memory="1024Gi").obj() for n, (_, cpu) in cards.items()], bound
    )
    return p, snap


def scores_of(p: DeviceShare, snap: Snapshot, pod: PodInfo) -> dict[str, int]:
    state = CycleState()
    p.pre_filter(state, pod, snap)
    rows = snap.candidate_rows()
    names = [snap.table.names[r] for r in rows.tolist()]
    scores = p.normalize_scores(state, pod, p.score(state, pod, snap, rows))
    return dict(zip(names, scores.tolist(), strict=True))


@pytest.mark.parametrize("strategy", ["MostAllocated", "LeastAllocated"])
def test_a_pod_without_gpus_goes_where_it_takes_no_cards_cpu(strategy: str) -> None:
    """A G2-like node (8 cards, 96 cpu: 12 per card) and a T4-like one (2 cards, 104 cpu: 52 per
    card), both idle: a 16-cpu batch pod strands 1.33 cards on the first, 0.31 on the second. Before,
    DeviceShare gave every node 0 for it and NodeResourcesFit's spreading picked either."""
    args = DeviceShareArgs.model_validate({"scoringStrategy": {"type": strategy}})
    p, snap = nodes(args, {"dense": (8, "96"), "rich": (2, "104")}, {})
    batch = make_pod("batch").uid("batch").req({"cpu": "16", "memory": "1Gi"}).info()
    assert scores_of(p, snap, batch) == {"dense": 0, "rich": 100}


def test_bin_packing_does_not_put_a_cpu_heavy_gpu_pod_where_it_strands_the_other_cards() -> None:
    """``dense``: 4 cards and 48 cpu, two cards in use by pods that took 24 cpu; ``rich``: 2 idle
    cards and 104 cpu. A one-card pod asking 20 cpu would make ``dense`` the fuller node (3 of 4
    cards: plain bin-packing's choice), but leave 4 cpu for its last card, which no pod of a
    card's share could then use; on ``rich`` it leaves 84 cpu for the other card."""
    p, snap = nodes(DeviceShareArgs(), {"dense": (4, "48"), "rich": (2, "104")}, {"dense": "24"})
    taken = GPUUsage(100, 80 * GIB, 100)
    p.store.hold("earlier", "dense", [Allocation(0, taken), Allocation(1, taken)], assumed=False)
    pod = (
        make_pod("heavy").uid("heavy").req({"cpu": "20", "memory": "1Gi", **req(core=100, ratio=100)}).info()
    )
    scores = scores_of(p, snap, pod)
    assert scores["rich"] > scores["dense"]
    light = (
        make_pod("light").uid("light").req({"cpu": "4", "memory": "1Gi", **req(core=100, ratio=100)}).info()
    )
    light_scores = scores_of(p, snap, light)
    assert light_scores["dense"] > light_scores["rich"]  # within its share: bin-packing as before


def test_a_pod_without_gpus_gets_no_score_where_no_node_would_strand_a_card() -> None:
    """Nodes with every card in use, or none: nothing to tell them apart, so no score (as
    Koordinator gives pods without devices), not 100 everywhere."""
    p, snap = nodes(DeviceShareArgs(), {"full": (2, "96"), "also-full": (2, "48")}, {})
    taken = GPUUsage(100, 80 * GIB, 100)
    for node in ("full", "also-full"):
        p.store.hold(f"on-{node}", node, [Allocation(0, taken), Allocation(1, taken)], assumed=False)
    batch = make_pod("batch").uid("batch").req({"cpu": "16", "memory": "1Gi"}).info()
    assert scores_of(p, snap, batch) == {"full": 0, "also-full": 0}


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=50, deadline=None)
def test_host_free_is_the_node_tables_free_cpu_and_memory(seed: int) -> None:
    """``host_free`` gathers the cpu and memory columns one at a time: the node table's own
    ``free`` of the same rows, for nodes with pods on them, in any order, with repeats."""
    rng = np.random.default_rng(seed)
    names = [f"n{i}" for i in range(int(rng.integers(1, 12)))]
    nodes = [
        make_node(n).alloc(cpu=str(int(rng.integers(1, 200))), memory=f"{int(rng.integers(1, 900))}Gi").obj()
        for n in names
    ]
    bound = [
        make_pod(f"p{i}")
        .on(str(rng.choice(names)))
        .req({"cpu": f"{int(rng.integers(0, 9000))}m", "memory": f"{int(rng.integers(0, 90))}Gi"})
        .obj()
        for i in range(int(rng.integers(0, 30)))
    ]
    snapshot = make_snapshot(nodes, bound)
    table = snapshot.table
    rows = rng.choice(snapshot.candidate_rows(), size=int(rng.integers(0, 20))).astype(np.int64)
    cols = np.array([table.column["cpu"], table.column["memory"]], dtype=np.int64)
    assert host_free(snapshot, rows).tolist() == table.free(rows, cols).tolist()


@given(seed=st.integers(0, 2**32 - 1), cards_taken=st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0]))
@settings(max_examples=80, deadline=None)
def test_stranded_delta_rates_before_and_after_as_apart(seed: int, cards_taken: float) -> None:
    """``stranded_delta`` rates each node before and after the pod side by side: to the bit the
    stranded cards after less those before, each rated alone, whatever the nodes report."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    cards = rng.integers(0, 9, n).astype(np.float64)
    free_cards = np.minimum(cards, rng.random(n) * 8)
    capacity = np.stack([rng.integers(0, 128_000, n), rng.integers(0, 2**40, n)], axis=1)
    capacity[rng.random((n, 2)) < 0.1] = UNBOUNDED
    capacity[rng.random((n, 2)) < 0.1] = 0
    free = (capacity * rng.uniform(-0.1, 1.0, (n, 2))).astype(np.int64)
    take = np.array([int(rng.integers(0, 16_000)), int(rng.integers(0, 2**35))], dtype=np.int64)
    after = stranded(cards, np.maximum(free_cards - cards_taken, 0.0), capacity, free - take)
    expected = after - stranded(cards, free_cards, capacity, free)
    got = stranded_delta((cards, free_cards), capacity, free, take, cards_taken)
    assert got.tobytes() == expected.tobytes()
