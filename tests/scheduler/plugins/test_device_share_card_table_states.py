"""The card table's kept card states (``CardTable.states``, asked by every kept request's one-card
parts and by the kept shape sums) are ``states_of`` the rows' cards as they are now, however the
rows were rewritten, added or widened between asks."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.device_share.card_states import states_of
from scheduler.plugins.device_share.card_table import CardTable
from tests.examples import examples
from tests.scheduler.plugins.test_device_share_row_answers import random_node


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_kept_states_are_the_states_of_the_rows_now(seed: int) -> None:
    rng = random.Random(seed)
    table = CardTable(row_capacity=2, card_capacity=1)
    names = [f"node-{i}" for i in range(6)]
    for _ in range(30):
        name = rng.choice(names)
        gpus, usage = random_node(rng)
        table.write(name, gpus, usage, device=True, partitions=False)
        rows = rng.sample(range(table.rows_in_use), rng.randint(0, table.rows_in_use))
        expected = states_of(table.cards_at_width(np.asarray(rows, dtype=np.int64))) if rows else []
        assert table.states(rows) == expected
