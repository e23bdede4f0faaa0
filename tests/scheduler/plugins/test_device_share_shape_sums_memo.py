"""The Fragmentation strategy's kept per-shape card sums (``shape_sums_memo``), with which a pod
without GPUs is rated, answer any rows in any order and any two or more of the shapes kept or new,
in any order, exactly as computing them afresh on those rows' cards does, while cards are taken
and given back between the asks and a Device comes."""

from __future__ import annotations

import random
import unittest.mock
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.scheduling.device import Device
from scheduler.plugins.device_share import shape_sums_memo
from scheduler.plugins.device_share.allocator import Allocation, GPUUsage
from scheduler.plugins.device_share.fragmentation import (
    FloatArray,
    Int64Array,
    ShapeTerms,
    shape_sums,
    shape_terms_sums,
    shapes_of,
)
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.shape_sums_memo import ShapeSumsMemo
from tests.examples import examples
from tests.scheduler.plugins.device_share_fixtures import device, gpu
from tests.scheduler.plugins.test_device_share import plugin
from tests.scheduler.plugins.test_device_share_vectorised import NODES, fill, node_device

SHAPES = (
    [
        GPURequest(1, core, ratio, None)
        for core, ratio in ((10, 10), (25, 25), (30, 20), (50, 50), (60, 40), (100, 100))
    ]
    + [GPURequest(1, 20, None, 5 * 2**30)]
    + [GPURequest(count, 100, 100, None) for count in (2, 4, 8)]
)


@settings(max_examples=examples(20, full=200), deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_any_rows_and_shapes_equal_the_sums_afresh(seed: int) -> None:
    rng = random.Random(seed)
    p, _ = plugin(*(d for d in (node_device(rng, n) for n in NODES) if d is not None))
    fill(p, rng, rng.randint(0, 40))
    memo = ShapeSumsMemo(p.store)
    for step in range(8):
        shapes = rng.sample(SHAPES, rng.randint(2, len(SHAPES)))
        table = p.store.cards()
        every = np.arange(table.rows_in_use, dtype=np.int64)
        rows = every[np.asarray([rng.random() < 0.7 for _ in every], dtype=np.bool_)]
        rng.shuffle(rows)
        cards = table.cards(rows)
        got = memo.sums(shapes, rows, cards.capacity.shape[1])
        expected = shape_sums(cards.capacity, cards.used, cards.valid, shapes_of(dict.fromkeys(shapes, 1.0)))
        for name, kept, afresh in zip(("fitting", "stranded", "total"), got, expected, strict=True):
            assert np.array_equal(kept, afresh), (step, name)
        fill(p, rng, rng.randint(0, 3))
        for uid in rng.sample(p.store.holders(), min(2, len(p.store.holders()))):
            p.store.release(uid)
        if step == 4:
            new: Device = device(f"late-{seed}", *(gpu(m, memory_gib=24) for m in range(rng.choice((1, 8)))))
            p.store.set_device(new)


def test_a_node_in_a_state_kept_before_is_copied_not_computed() -> None:
    """Three nodes alike: the second taking what the first took, and the first giving it back (as
    the third is), are copied from the rows kept in those states, to the same sums (a state new to
    the kept rows is summed from its cards' kept terms)."""
    p, _ = plugin(*(device(n, *(gpu(m, memory_gib=32) for m in range(4))) for n in ("a", "b", "c")))
    memo = ShapeSumsMemo(p.store)
    shapes = SHAPES[:4]
    computed = [0]

    def counted(*args: Any) -> tuple[Int64Array, FloatArray, FloatArray]:
        computed[0] += args[0].shape[0]
        return shape_sums(*args)

    def counted_terms(terms: ShapeTerms) -> tuple[Int64Array, FloatArray, FloatArray]:
        computed[0] += terms.free.shape[0]
        return shape_terms_sums(terms)

    def equal_to_afresh() -> None:
        table = p.store.cards()
        rows = np.arange(table.rows_in_use, dtype=np.int64)
        cards = table.cards(rows)
        got = memo.sums(shapes, rows, cards.capacity.shape[1])
        expected = shape_sums(cards.capacity, cards.used, cards.valid, shapes_of(dict.fromkeys(shapes, 1.0)))
        for kept, afresh in zip(got, expected, strict=True):
            assert np.array_equal(kept, afresh)

    def hold(uid: str, node: str) -> None:
        card = p.store.gpus(node)[0]
        p.store.hold(uid, node, [Allocation(card.minor, GPUUsage(50, card.memory // 2, 50))], assumed=False)

    with (
        unittest.mock.patch.object(shape_sums_memo, "shape_sums", counted),
        unittest.mock.patch.object(shape_sums_memo, "shape_terms_sums", counted_terms),
    ):
        equal_to_afresh()
        states = computed[0]
        hold("first", "a")
        equal_to_afresh()
        assert computed[0] == states + 1
        hold("second", "b")
        equal_to_afresh()
        p.store.release("first")
        equal_to_afresh()
        assert computed[0] == states + 1
