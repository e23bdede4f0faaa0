"""The one-card terms kept per card state (``card_terms.KeptTerms``) are those computed afresh for
the cards asked, to the bit, however the states asked before were kept (and dropped beyond the
most kept); and parts put together from them are ``single_card_parts`` of the cards."""

from __future__ import annotations

import random
import unittest.mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.device_share import card_terms
from scheduler.plugins.device_share.card_table import CardTable
from scheduler.plugins.device_share.card_terms import KeptTerms
from scheduler.plugins.device_share.fragmentation import (
    CardTerms,
    SingleCardParts,
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
    shapes = shapes_of(dict.fromkeys(rng.sample(REQUESTS, rng.randint(1, len(REQUESTS))), 1.0))
    with unittest.mock.patch.object(card_terms, "MAX_CARD_STATES", most):
        kept = KeptTerms(request, shapes)
        for _ in range(6):
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
