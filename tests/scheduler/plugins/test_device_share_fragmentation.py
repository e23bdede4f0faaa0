"""DeviceShare's Fragmentation scoring strategy (ours, after FGD): placements that strand less GPU
for the recent request mix, where bin-packing strands it; the mix it learns from; its args."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.config import ConfigError, load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.device_share import DeviceShareArgs
from scheduler.plugins.device_share.allocator import GPU, Allocation, GPUUsage, fits, take
from scheduler.plugins.device_share.args import FragmentationArgs
from scheduler.plugins.device_share.fragmentation import (
    cards_of,
    fragmentation,
    placement_deltas,
    shapes_of,
    single_card_deltas,
)
from scheduler.plugins.device_share.fragmentation_strategy import FragmentationStrategy
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.request_mix import RequestMix
from tests.examples import examples
from tests.scheduler.plugins.device_share_fixtures import GIB, device, eight_gpus, gpu
from tests.scheduler.plugins.test_device_share import gpu_pod, minors, plugin, req, schedule, snapshot

FRAGMENTATION = DeviceShareArgs.model_validate({"scoringStrategy": {"type": "Fragmentation"}})
RECENT_MIX = DeviceShareArgs.model_validate(
    {"scoringStrategy": {"type": "Fragmentation", "fragmentation": {"mix": "Recent"}}}
)
MOST_ALLOCATED = DeviceShareArgs.model_validate({"scoringStrategy": {"type": "MostAllocated"}})
LEAST_ALLOCATED = DeviceShareArgs.model_validate({"scoringStrategy": {"type": "LeastAllocated"}})


HALF = GPURequest(1, 50, 50, None)


def placements(args: DeviceShareArgs) -> list[str | None]:
    """Two one-card nodes: n1 holds half a card, n2 a quarter (the mix has seen both shapes).
    Then a quarter card arrives, and two halves."""
    p, _ = plugin(device("n1", gpu(0)), device("n2", gpu(0)), args=args)
    snap = snapshot("n1", "n2")
    schedule(p, gpu_pod("held-half", **req(core=50, ratio=50)), snap, node="n1")
    schedule(p, gpu_pod("held-quarter", **req(core=25, ratio=25)), snap, node="n2")
    placed = []
    for name, percent in (("quarter", 25), ("half-a", 50), ("half-b", 50)):
        node, _ = schedule(p, gpu_pod(name, **req(core=percent, ratio=percent)), snap)
        placed.append(node)
    return placed


def test_binpack_strands_a_quarter_card_that_fragmentation_keeps_usable() -> None:
    # MostAllocated fills n1 to 75%: its last quarter is useless to the half-card pods seen
    # recently, and the second half-card pod fits nowhere.
    assert placements(MOST_ALLOCATED) == ["n1", "n2", None]
    # Fragmentation puts the quarter on n2 (both nodes keep half a card free): every pod fits.
    assert placements(FRAGMENTATION) == ["n2", "n1", "n2"]


def test_the_card_within_a_node_is_the_one_that_fragments_least() -> None:
    def cards(args: DeviceShareArgs) -> list[list[int]]:
        p, _ = plugin(device("n1", gpu(0), gpu(1)), args=args)
        p.store.hold("held-half", "n1", [Allocation(0, GPUUsage(50, 40 * GIB, 50))], assumed=False)
        p.store.hold("held-quarter", "n1", [Allocation(1, GPUUsage(25, 20 * GIB, 25))], assumed=False)
        if p.fragmentation is not None:
            p.fragmentation.observe("half-seen", HALF)
        snap = snapshot("n1")
        taken = []
        for name, percent in (("quarter", 25), ("half-a", 50), ("half-b", 50)):
            _, entries = schedule(p, gpu_pod(name, **req(core=percent, ratio=percent)), snap)
            taken.append(minors(entries))
        return taken

    # Bin-packing puts the quarter on the fuller card 0, whose last quarter no half-card pod can
    # use: the second half-card pod finds no card.
    assert cards(MOST_ALLOCATED) == [[0], [1], []]
    # Fragmentation puts it on card 1: both cards keep half a card free, every pod fits.
    assert cards(FRAGMENTATION) == [[1], [0], [1]]


def test_a_whole_node_is_kept_for_the_eight_card_jobs_seen_recently() -> None:
    def first_node(args: DeviceShareArgs) -> str | None:
        p, _ = plugin(eight_gpus("busy"), eight_gpus("whole"), args=args)
        snap = snapshot("busy", "whole")
        schedule(p, gpu_pod("eight", **req(nvidia=8)), snap, node="whole")
        p.store.release("eight")  # the 8-card job left; the mix remembers its shape
        schedule(p, gpu_pod("four", **req(nvidia=4)), snap, node="busy")
        node, _ = schedule(p, gpu_pod("one", **req(nvidia=1)), snap)
        return node

    assert first_node(LEAST_ALLOCATED) == "whole"
    assert first_node(FRAGMENTATION) == "busy"


def test_multi_card_requests_are_rated_on_the_cards_the_allocator_picks() -> None:
    p, _ = plugin(eight_gpus("busy"), eight_gpus("whole"), args=FRAGMENTATION)
    snap = snapshot("busy", "whole")
    schedule(p, gpu_pod("eight", **req(nvidia=8)), snap, node="whole")
    p.store.release("eight")
    schedule(p, gpu_pod("two", **req(nvidia=2)), snap, node="busy")
    node, entries = schedule(p, gpu_pod("pair", **req(nvidia=2)), snap)
    # The pair stays on the busy node, on one PCIe switch as the allocator keeps it.
    assert node == "busy"
    assert minors(entries) == [2, 3]


def test_the_mix_decays_by_half_life_and_keeps_at_most_max_shapes() -> None:
    half, quarter, whole = (
        GPURequest(1, 50, 50, None),
        GPURequest(1, 25, 25, None),
        GPURequest(1, 100, 100, None),
    )
    mix = RequestMix(half_life=2, max_shapes=2)
    assert mix.weights(half) == {half: 1.0}
    mix.observe(half)
    mix.observe(quarter)
    mix.observe(quarter)
    weights = mix.weights(whole)
    assert weights[half] == pytest.approx(0.5)
    assert weights[quarter] == pytest.approx(1 + 2**-0.5)
    mix.observe(whole)  # three shapes: the lightest (half) goes
    assert set(mix.weights(whole)) == {quarter, whole}
    for _ in range(40):
        mix.observe(whole)
    assert set(mix.weights(whole)) == {whole}  # quarter decayed below the threshold


def test_each_pod_asking_for_gpus_counts_once_in_the_mix_placed_or_not() -> None:
    p, _ = plugin(device("n1", gpu(0)), args=RECENT_MIX)
    snap = snapshot("n1")
    assert p.fragmentation is not None
    schedule(p, gpu_pod("whole", **req(nvidia=1)), snap)
    for _ in range(3):  # finds no card, and is retried
        assert schedule(p, gpu_pod("pending", **req(nvidia=1)), snap) == (None, [])
    assert p.pre_filter(CycleState(), gpu_pod("none"), snap).status.code is Code.SKIP  # no GPU: not counted
    assert p.fragmentation.mix.weights(HALF) == pytest.approx(
        {GPURequest(1, 100, 100, None): 1 + 2**-0.002, HALF: 1.0}
    )


def test_fragmentation_args_are_checked_at_start_up() -> None:
    args = DeviceShareArgs.model_validate(
        {
            "scoringStrategy": {
                "type": "Fragmentation",
                "fragmentation": {"mix": "Recent", "halfLifePods": 100, "maxShapes": 8},
            }
        }
    )
    assert args.scoring_strategy.fragmentation == FragmentationArgs(
        mix="Recent", half_life_pods=100, max_shapes=8
    )
    assert "halfLifePods" in args.model_dump(by_alias=True)["scoringStrategy"]["fragmentation"]
    with pytest.raises(ValueError, match="type is MostAllocated, not Fragmentation"):
        DeviceShareArgs.model_validate({"scoringStrategy": {"fragmentation": {"maxShapes": 8}}})
    with pytest.raises(ValueError, match="greater than 0"):
        DeviceShareArgs.model_validate(
            {"scoringStrategy": {"type": "Fragmentation", "fragmentation": {"maxShapes": 0}}}
        )
    config = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: DeviceShare
    args:
      scoringStrategy: {type: LeastAllocated, fragmentation: {mix: Recent, halfLifePods: 10}}
"""
    with pytest.raises(ConfigError, match="not Fragmentation"):
        load_config(config, DEFAULT_PLUGINS, DEFAULT_REGISTRY)


def test_the_mix_source_is_checked_at_start_up() -> None:
    default = DeviceShareArgs.model_validate(
        {"scoringStrategy": {"type": "Fragmentation", "fragmentation": {}}}
    )
    assert default.scoring_strategy.fragmentation == FragmentationArgs(mix="Cluster")
    with pytest.raises(ValueError, match="'Cluster' or 'Recent'"):
        DeviceShareArgs.model_validate(
            {"scoringStrategy": {"type": "Fragmentation", "fragmentation": {"mix": "Trace"}}}
        )
    with pytest.raises(ValueError, match="halfLifePods is set but mix is Cluster, not Recent"):
        DeviceShareArgs.model_validate(
            {"scoringStrategy": {"type": "Fragmentation", "fragmentation": {"halfLifePods": 100}}}
        )


# ---- properties ----

shapes = st.one_of(
    st.builds(lambda n: GPURequest(n, 100, 100, None), st.integers(1, 8)),
    st.builds(lambda c, r: GPURequest(1, c, r, None), st.integers(0, 100), st.integers(1, 100)),
    st.builds(lambda c, m: GPURequest(1, c, None, m * GIB), st.integers(0, 100), st.integers(1, 80)),
    st.builds(lambda n, r: GPURequest(n, r, r, None), st.integers(2, 4), st.integers(1, 50)),
)


@st.composite
def nodes(draw: st.DrawFn) -> tuple[list[GPU], dict[int, GPUUsage]]:
    count = draw(st.integers(0, 8))
    memory = draw(st.sampled_from([16, 80])) * GIB
    gpus = [GPU(minor=m, memory=memory, numa=m // 4, pcie=f"p{m // 2}") for m in range(count)]
    usage: dict[int, GPUUsage] = {}
    for g in gpus:
        core = draw(st.integers(0, 100))
        ratio = draw(st.integers(0, 100))
        if core or ratio:
            usage[g.minor] = GPUUsage(core, ratio * g.memory // 100, ratio)
    return gpus, usage


@settings(max_examples=examples(200), deadline=None)
@given(
    cluster=st.lists(nodes(), min_size=1, max_size=6),
    mix=st.dictionaries(shapes, st.floats(0.01, 100.0), min_size=1, max_size=6),
    request=shapes,
)
def test_fragmentation_is_never_negative_nor_above_the_free_share_and_scores_are_finite(
    cluster: list[tuple[list[GPU], dict[int, GPUUsage]]], mix: dict[GPURequest, float], request: GPURequest
) -> None:
    cards = cards_of(cluster)
    frag = fragmentation(cards.capacity, cards.used, cards.valid, shapes_of(mix))
    free_cards = [
        sum(1 - max(u.core / 100, u.ratio / 100) for u in (usage.get(g.minor, GPUUsage()) for g in gpus))
        for gpus, usage in cluster
    ]
    for value, free in zip(frag.tolist(), free_cards, strict=True):
        assert math.isfinite(value)
        assert -1e-9 <= value <= free + 1e-9

    strategy = FragmentationStrategy(FragmentationArgs())
    for i, (shape, weight) in enumerate(mix.items()):
        for j in range(min(int(weight), 3) + 1):
            strategy.observe(f"{i}-{j}", shape)
    any_card = [request.count == 1] * len(cluster)
    scores = strategy.scores(request, cluster, [None] * len(cluster), any_card)
    assert scores.dtype == np.int64
    assert ((scores >= 0) & (scores <= 100)).all()
    chosen = [strategy.choose(gpus, usage, request) for gpus, usage in cluster] if request.count == 1 else []
    for allocation, score in zip(chosen, scores.tolist(), strict=False):
        # A node gets a positive score only if a card there can take the pod, and then one is chosen.
        assert (allocation is None) <= (score == 0)


@settings(max_examples=examples(150), deadline=None)
@given(
    cluster=st.lists(nodes(), min_size=1, max_size=4),
    mix=st.dictionaries(shapes, st.floats(0.01, 100.0), min_size=0, max_size=5),
    request=shapes.filter(lambda r: r.count == 1),
)
def test_one_card_deltas_agree_with_recomputing_the_whole_node(
    cluster: list[tuple[list[GPU], dict[int, GPUUsage]]], mix: dict[GPURequest, float], request: GPURequest
) -> None:
    cards = cards_of(cluster)
    mixed = shapes_of(mix)
    fast = single_card_deltas(cards, request, mixed)
    width = cards.valid.shape[1]
    moves = np.zeros((len(cluster), width, width, 3), dtype=np.int64)
    ok = np.zeros((len(cluster), width), dtype=np.bool_)
    for n, (gpus, usage) in enumerate(cluster):
        for c, g in enumerate(gpus):
            if fits(g, usage.get(g.minor, GPUUsage()), request):
                t = take(g, request)
                moves[n, c, c] = (t.core, t.ratio, t.memory)
                ok[n, c] = True
    slow = placement_deltas(cards, moves, ok, mixed)
    assert np.array_equal(np.isinf(fast), np.isinf(slow))
    assert np.allclose(fast[np.isfinite(fast)], slow[np.isfinite(slow)])
