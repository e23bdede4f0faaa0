"""The Fragmentation strategy's kept one-card parts (``single_card_memo``) answer any subset of
the shapes kept, in any order, for any of the card table's rows in use, exactly as computing them
afresh does, however often the order changes between asks (the kept columns are taken in the
order asked); the best card of each node among the cards picked is the best of every card."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import unittest.mock
from collections.abc import Iterator

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.scheduling.device import Device
from scheduler.plugins.device_share import DeviceShare, single_card_memo
from scheduler.plugins.device_share.allocator import Allocation, GPUUsage
from scheduler.plugins.device_share.fragmentation import (
    Cards,
    CardTerms,
    FloatArray,
    Shapes,
    SingleCardParts,
    gemv_rows_alike,
    rows_alike,
    shapes_of,
    single_card_best,
    single_card_deltas,
    single_card_parts,
    single_card_sums,
)
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.single_card_memo import SingleCardMemo
from tests.examples import examples
from tests.scheduler.plugins.device_share_fixtures import gpu
from tests.scheduler.plugins.test_device_share import plugin
from tests.scheduler.plugins.test_device_share_vectorised import NODES, fill, node_device

SHAPES = [
    GPURequest(1, core, ratio, None)
    for core, ratio in ((10, 10), (25, 25), (30, 20), (50, 50), (60, 40), (100, 100))
] + [GPURequest(count, 100, 100, None) for count in (2, 4, 8)]


@settings(max_examples=examples(20, full=200), deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_any_subset_of_the_kept_shapes_in_any_order_equals_the_parts_afresh(seed: int) -> None:
    rng = random.Random(seed)
    p, _ = plugin(*(d for d in (node_device(rng, n) for n in NODES) if d is not None))
    fill(p, rng, rng.randint(0, 40))
    memo = SingleCardMemo(p.store)
    request = rng.choice(SHAPES[:6])
    for _ in range(6):
        shapes = rng.sample(SHAPES, rng.randint(1, len(SHAPES)))
        table = p.store.cards()
        every = np.arange(table.rows_in_use, dtype=np.int64)
        rows = every[np.asarray([rng.random() < 0.7 for _ in every], dtype=np.bool_)]
        width = table.capacity.shape[1]
        got = memo.parts(request, shapes, rows, width)
        expected = single_card_parts(
            table.cards_at_width(rows), request, shapes_of(dict.fromkeys(shapes, 1.0))
        )
        for name in SingleCardParts.__slots__:
            assert np.array_equal(getattr(got, name), getattr(expected, name)), name
            assert getattr(got, name).flags.c_contiguous, name
        fill(p, rng, rng.randint(0, 3))


@settings(max_examples=examples(20, full=200), deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_best_card_of_the_cards_picked_equals_the_best_of_every_card(seed: int) -> None:
    """``picks`` rates each node's first card of each kind only: the least increase per node is
    the one every card gives, to the bit where the BLAS sums a row alike wherever it sits (and
    Score takes the picks), with and without the nodes' cpu and memory."""
    rng = random.Random(seed)
    p, _ = plugin(*(d for d in (node_device(rng, n) for n in NODES) if d is not None))
    fill(p, rng, rng.randint(0, 40))
    memo = SingleCardMemo(p.store)
    for _ in range(6):
        request = rng.choice(SHAPES[:6])
        kinds = rng.sample(SHAPES, rng.randint(1, len(SHAPES)))
        shapes = shapes_of({s: float(rng.randint(1, 50)) for s in kinds})
        table = p.store.cards()
        every = np.arange(table.rows_in_use, dtype=np.int64)
        rows = every[np.asarray([rng.random() < 0.7 for _ in every], dtype=np.bool_)]
        width = table.capacity.shape[1]
        host = None
        take = None
        if rng.random() < 0.7:
            host = np.asarray([[rng.randint(0, 64_000), rng.randint(0, 2**38)] for _ in rows], dtype=np.int64)
            host = host.reshape(rows.size, 2)
            take = np.asarray([rng.randint(0, 16_000), rng.randint(0, 2**36)], dtype=np.int64)
            shapes = dataclasses.replace(
                shapes,
                host=np.asarray(
                    [[rng.randint(0, 32_000), rng.randint(0, 2**37)] for _ in kinds], dtype=np.int64
                ),
            )
        got = single_card_best(memo.picks(request, kinds, rows, width), shapes, host, take)
        deltas = single_card_deltas(table.cards_at_width(rows), request, shapes, host, take)
        expected = deltas.min(axis=1) if rows.size else np.zeros(0)
        if gemv_rows_alike(width, shapes.weight.size):  # where Score takes the picks
            assert got.tobytes() == expected.tobytes()
        else:
            assert np.allclose(got, expected, rtol=1e-12, atol=0.0)
        fill(p, rng, rng.randint(0, 3))


def _summed_in_order(values: FloatArray, weight: FloatArray) -> FloatArray:
    total = np.zeros(values.shape[:-1])
    for k in range(weight.size):
        total = total + values[..., k] * weight[k]
    return total


def _last_row_summed_backwards(values: FloatArray, weight: FloatArray) -> FloatArray:
    total = _summed_in_order(values, weight)
    backwards = np.zeros(values.shape[0])
    for k in reversed(range(weight.size)):
        backwards = backwards + values[:, -1, k] * weight[k]
    total[:, -1] = backwards
    return total


def test_a_product_that_sums_a_row_by_its_place_in_the_block_is_found_out() -> None:
    """Score takes the picks only where each row's bits do not depend on where it sits in the
    block: a product that sums the last row of each block in another order is found out, one
    that sums every row alike is not."""
    assert rows_alike(8, 18, _summed_in_order)
    assert not rows_alike(8, 18, _last_row_summed_backwards)
    assert not rows_alike(3, 18, _last_row_summed_backwards)


class _Counted:
    """``single_card_parts`` and ``single_card_sums`` (parts put together from the cards' kept
    terms), counting the rows computed."""

    def __init__(self) -> None:
        self.rows = 0

    def __call__(self, cards: Cards, request: GPURequest, shapes: Shapes) -> SingleCardParts:
        self.rows += cards.capacity.shape[0]
        return single_card_parts(cards, request, shapes)

    def sums(self, terms: CardTerms, shapes: Shapes) -> SingleCardParts:
        self.rows += terms.ok.shape[0]
        return single_card_sums(terms, shapes)

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        with (
            unittest.mock.patch.object(single_card_memo, "single_card_parts", self),
            unittest.mock.patch.object(single_card_memo, "single_card_sums", self.sums),
        ):
            yield


def _equal_to_afresh(
    memo: SingleCardMemo, p: DeviceShare, request: GPURequest, shapes: list[GPURequest]
) -> None:
    table = p.store.cards()
    rows = np.arange(table.rows_in_use, dtype=np.int64)
    got = memo.parts(request, shapes, rows, table.capacity.shape[1])
    expected = single_card_parts(table.cards_at_width(rows), request, shapes_of(dict.fromkeys(shapes, 1.0)))
    for name in SingleCardParts.__slots__:
        assert np.array_equal(getattr(got, name), getattr(expected, name)), name


def _hold(p: DeviceShare, uid: str, node: str, share: int) -> None:
    card = p.store.gpus(node)[0]
    usage = GPUUsage(share, card.memory * share // 100, share)
    p.store.hold(uid, node, [Allocation(card.minor, usage)], assumed=False)


@settings(max_examples=examples(20, full=200), deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_rows_brought_to_a_state_kept_before_are_copied_as_computing_them_would(seed: int) -> None:
    """Nodes of two kinds take and give back shares of their first card: a row brought up to date
    in a state some row is kept in is copied from it, and every row's parts equal those computed
    afresh (one node changed per ask: one row computed at most)."""
    rng = random.Random(seed)
    kinds = (rng.random(), rng.random())
    devices = (node_device(random.Random(kinds[i % 2]), n) for i, n in enumerate(NODES))
    p, _ = plugin(*(d for d in devices if d is not None))
    memo = SingleCardMemo(p.store)
    request = rng.choice(SHAPES[:6])
    shapes = rng.sample(SHAPES, rng.randint(1, len(SHAPES)))
    counted = _Counted()
    held: list[str] = []
    with counted.counting():
        _equal_to_afresh(memo, p, request, shapes)
        for step in range(30):
            if held and rng.random() < 0.4:
                p.store.release(held.pop(rng.randrange(len(held))))
            else:
                node = rng.choice(NODES)
                if p.store.gpus(node):
                    held.append(f"held-{step}")
                    _hold(p, held[-1], node, rng.choice((25, 50, 100)))
            before = counted.rows
            _equal_to_afresh(memo, p, request, shapes)
            assert counted.rows - before <= 1


def test_a_node_in_a_state_kept_before_is_not_computed_again() -> None:
    """Three nodes alike: the second taking what the first took, and the first giving it back
    (as the third is), are copied from the rows kept in those states."""
    devices = [
        Device.model_validate(
            {"metadata": {"name": n}, "spec": {"devices": [gpu(m, memory_gib=32) for m in range(4)]}}
        )
        for n in ("a", "b", "c")
    ]
    p, _ = plugin(*devices)
    memo = SingleCardMemo(p.store)
    request, shapes = SHAPES[1], SHAPES[:6]
    counted = _Counted()
    with counted.counting():
        _equal_to_afresh(memo, p, request, shapes)
        every_row = counted.rows
        _hold(p, "first", "a", 50)
        _equal_to_afresh(memo, p, request, shapes)
        assert counted.rows == every_row + 1  # a state new to the request
        _hold(p, "second", "b", 50)
        _equal_to_afresh(memo, p, request, shapes)
        p.store.release("first")
        _equal_to_afresh(memo, p, request, shapes)
        assert counted.rows == every_row + 1
