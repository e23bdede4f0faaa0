"""The terms kept per card state (``card_terms``: a one-card request's, the shapes') are those
computed afresh for the cards asked, to the bit, however the states asked before were kept (and
dropped beyond the most kept, or the kept shapes grew); and what is summed from them is what is
computed afresh (``single_card_parts``, ``shape_sums``)."""

from __future__ import annotations

import random
import unittest.mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.device_share import card_terms
from scheduler.plugins.device_share.card_table import CardTable
from scheduler.plugins.device_share.card_terms import KeptShapeTerms, KeptTerms
from scheduler.plugins.device_share.fragmentation import (
    CardTerms,
    ShapeTerms,
    SingleCardParts,
    shape_sums,
    shape_terms,
    shape_terms_sums,
    shapes_of,
    single_card_parts,
    single_card_sums,
    single_card_terms,
)
from tests.examples import examples
from tests.scheduler.plugins.test_device_share_row_answers import REQUESTS, random_node


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([4, 1 << 16]))
def test_kept_terms_are_the_terms_afresh(seed: int, most: int) -> None:
    rng = random.Random(seed)
    table = CardTable(row_capacity=2, card_capacity=1)
    for i in range(8):
        gpus, usage = random_node(rng)
        table.write(f"node-{i}", gpus, usage, device=True, partitions=False)
    request = rng.choice([r for r in REQUESTS if r.count == 1])
    kinds = rng.sample(REQUESTS, rng.randint(1, len(REQUESTS)))
    first = rng.randint(1, len(kinds))
    shapes = shapes_of(dict.fromkeys(kinds[:first], 1.0))
    with unittest.mock.patch.object(card_terms, "MAX_CARD_STATES", most):
        kept = KeptTerms(request, shapes)
        kept_shapes = KeptShapeTerms(shapes)
        for step in range(6):
            if step == 3 and first < len(kinds):
                # The request's kept shapes grow: the states kept get the new shapes' terms.
                shapes = shapes_of(dict.fromkeys(kinds, 1.0))
                kept.add_shapes(shapes, shapes_of(dict.fromkeys(kinds[first:], 1.0)))
                kept_shapes = KeptShapeTerms(shapes)
            rows = np.asarray(rng.choices(range(table.rows_in_use), k=rng.randint(1, 6)), dtype=np.int64)
            cards = table.cards_at_width(rows)
            got, expected = kept.of(cards), single_card_terms(cards, request, shapes)
            for name in CardTerms.__slots__:
                a, b = getattr(got, name), getattr(expected, name)
                assert (a.shape, a.dtype) == (b.shape, b.dtype), name
                assert a.tobytes() == b.tobytes(), name
            parts = single_card_sums(got, shapes)
            afresh = single_card_parts(cards, request, shapes)
            for name in SingleCardParts.__slots__:
                assert getattr(parts, name).tobytes() == getattr(afresh, name).tobytes(), name
            got_shapes = kept_shapes.of(cards)
            expected_shapes = shape_terms(cards.capacity, cards.used, cards.valid, shapes)
            for name in ShapeTerms.__slots__:
                a, b = getattr(got_shapes, name), getattr(expected_shapes, name)
                assert (a.shape, a.dtype) == (b.shape, b.dtype), name
                assert a.tobytes() == b.tobytes(), name
            sums = shape_terms_sums(got_shapes)
            for summed, computed in zip(
                sums, shape_sums(cards.capacity, cards.used, cards.valid, shapes), strict=True
            ):
                assert summed.tobytes() == computed.tobytes()
