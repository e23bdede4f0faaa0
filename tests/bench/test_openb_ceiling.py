"""The GPU-sharing ceiling (``e2e.bench.openb_ceiling``): the fewest cards is the true optimum."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from e2e.bench.openb_ceiling import sharing_ceiling
from tests.examples import examples


def _fewest_cards(shares: list[int]) -> int:
    """Every assignment of the shares to cards, the fewest cards any of them needs."""
    best = len(shares)
    for assignment in itertools.product(range(len(shares)), repeat=len(shares)):
        load: dict[int, int] = {}
        for card, share in zip(assignment, shares, strict=True):
            load[card] = load.get(card, 0) + share
        if all(v <= 1000 for v in load.values()):
            best = min(best, len(load))
    return best


@settings(max_examples=examples(40))
@given(st.lists(st.sampled_from([50, 160, 230, 320, 470, 480, 650, 810]), min_size=1, max_size=6))
def test_the_fewest_cards_is_what_trying_every_assignment_finds(shares: list[int]) -> None:
    ceiling = sharing_ceiling(shares, capacity_milli=10_000)

    assert ceiling is not None
    assert ceiling.proven_optimal
    assert ceiling.cards == _fewest_cards(shares)
    assert ceiling.idle_milli == ceiling.cards * 1000 - sum(shares)
    allocatable = 100 * (10_000 - ceiling.idle_milli) / 10_000
    assert ceiling.max_allocated_percent == pytest.approx(allocatable, abs=0.001)


def test_an_810_share_keeps_190_free_unless_a_small_share_joins_it() -> None:
    alone = sharing_ceiling([810, 810, 470, 470], capacity_milli=6_000)
    joined = sharing_ceiling([810, 810, 160, 160], capacity_milli=6_000)

    assert alone is not None
    assert joined is not None
    assert (alone.cards, alone.idle_milli) == (3, 440)
    assert (joined.cards, joined.idle_milli) == (2, 60)
    assert alone.max_allocated_percent == pytest.approx(100 * 5_560 / 6_000, abs=0.001)


def test_no_sharing_pods_have_no_ceiling_and_a_whole_card_is_not_a_share() -> None:
    assert sharing_ceiling([], capacity_milli=1000) is None
    with pytest.raises(ValueError, match="share"):
        sharing_ceiling([1000], capacity_milli=1000)
