"""``row_answers`` gives, for many card-table rows at once, what the allocator's per-node functions
give node by node: the cards that fit a request (``allocator.fits`` counted) and the node score
(``allocator.node_score``), over random nodes (no card to eight, mixed and zero memory, core or
ratio other than 100, cards idle, shared or full) and every request kind (whole cards, a ratio,
bytes, core only), for both strategies and several weights."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.device_share.allocator import GPU, GPUUsage, ScoringType, fits, node_score
from scheduler.plugins.device_share.card_table import CardTable
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.row_answers import fitting_cards, node_scores
from tests.examples import examples

GIB = 2**30

REQUESTS = (
    GPURequest(count=1, core=100, ratio=100, memory=None),
    GPURequest(count=4, core=100, ratio=100, memory=None),
    GPURequest(count=1, core=50, ratio=50, memory=None),
    GPURequest(count=2, core=30, ratio=30, memory=None),
    GPURequest(count=1, core=20, ratio=None, memory=10 * GIB),
    GPURequest(count=1, core=0, ratio=None, memory=3 * GIB + 7),
    GPURequest(count=1, core=25, ratio=0, memory=None),
)


def random_node(rng: random.Random) -> tuple[list[GPU], dict[int, GPUUsage]]:
    count = rng.choice((0, 1, 2, 4, 8))
    gpus = [
        GPU(
            minor=m,
            memory=rng.choice((0, 16 * GIB, 24 * GIB, 80 * GIB)),
            core=rng.choice((0, 100, 100, 200)),
            ratio=rng.choice((100, 100, 50)),
        )
        for m in range(count)
    ]
    usage: dict[int, GPUUsage] = {}
    for g in gpus:
        kind = rng.choice(("idle", "shared", "full"))
        if kind == "shared":
            ratio = rng.randrange(1, 100)
            usage[g.minor] = GPUUsage(rng.randrange(0, 100), g.memory * ratio // 100, ratio)
        elif kind == "full":
            usage[g.minor] = GPUUsage(g.core, g.memory, g.ratio)
    return gpus, usage


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_rows_answer_as_the_allocator_does_node_by_node(seed: int) -> None:
    rng = random.Random(seed)
    table = CardTable(row_capacity=4, card_capacity=2)
    nodes = {f"n{i}": random_node(rng) for i in range(rng.randrange(1, 20))}
    for name, (gpus, usage) in nodes.items():
        table.write(name, gpus, usage, device=True, partitions=False)
    names = list(nodes)
    rng.shuffle(names)
    rows = np.array([table.row[n] for n in names], dtype=np.int64)
    for request in REQUESTS:
        fitting = [
            sum(1 for g in nodes[n][0] if fits(g, nodes[n][1].get(g.minor, GPUUsage()), request))
            for n in names
        ]
        assert fitting_cards(table, rows, request).tolist() == fitting
        strategies: tuple[ScoringType, ...] = ("MostAllocated", "LeastAllocated")
        for strategy in strategies:
            for weights in ((1, 1), (1, 0), (0, 1), (2, 3), (0, 0)):
                expected = [
                    node_score(nodes[n][0], nodes[n][1], request, strategy, weights) if nodes[n][0] else 0
                    for n in names
                ]
                assert node_scores(table, rows, request, strategy, weights).tolist() == expected


@pytest.mark.parametrize("whole", [True, False])
def test_a_row_without_cards_fits_none_and_scores_zero(whole: bool) -> None:
    table = CardTable()
    table.write("empty", [], {}, device=True, partitions=False)
    request = REQUESTS[0] if whole else REQUESTS[2]
    rows = np.array([table.row["empty"]], dtype=np.int64)
    assert fitting_cards(table, rows, request).tolist() == [0]
    assert node_scores(table, rows, request, "MostAllocated", (1, 1)).tolist() == [0]
