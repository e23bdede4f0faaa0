"""Quantity parsing takes bounded time and memory on hostile text, and fails only with the
project's own error; what it accepts, the range check measures without building huge numbers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.errors import InvalidValue
from apis.quantity import Quantity
from scheduler.cache.quantity_range import MAX_UNITS, check_amount
from tests.examples import examples

digits = st.text(alphabet="0123456789", min_size=1, max_size=6000)
hostile = st.one_of(
    st.text(max_size=200),
    st.builds(
        lambda s, d, suffix: f"{s}{d}{suffix}",
        st.sampled_from(["", "+", "-"]),
        digits,
        st.sampled_from(["", "m", "E", "Ei", "e999", "e-999", "e2147483647", "e-2147483648"]),
    ),
    st.builds(
        lambda m, e: f"{m}e{e}", st.sampled_from(["1", "9.99", ".5", "0"]), st.integers(-(10**30), 10**30)
    ),
    st.builds(lambda m, f, e: f"{m}.{f}e{e}", digits, digits, st.integers(-3000, 3000)),
)


def parse_or_error(text: str) -> Quantity | None:
    try:
        return Quantity.parse(text)
    except InvalidValue:
        return None


@pytest.mark.timeout(60)  # bounded work: a blow-up on hostile input hangs; no wall-clock bound
@settings(max_examples=examples(300), deadline=None)
@given(hostile)
def test_parsing_is_bounded_and_fails_only_with_invalid_value(text: str) -> None:
    q = parse_or_error(text)
    if q is not None:
        amount, problem = check_amount("memory", q, "spec.x")
        assert 0 <= amount <= MAX_UNITS
        assert (problem is None) == (Quantity() <= q <= Quantity.from_int(MAX_UNITS))
        assert parse_or_error(str(q)) == q  # what we print, we read back


@pytest.mark.timeout(60)  # bounded work: a blow-up on hostile input hangs; no wall-clock bound
@settings(max_examples=examples(50), deadline=None)
@given(st.integers(min_value=1, max_value=10**6))
def test_huge_exponents_are_refused_without_arithmetic(exponent: int) -> None:
    assert parse_or_error(f"1e{exponent + 999}") is None
    assert parse_or_error(f"{'9' * 1001}") is None
    tiny = parse_or_error(f"1e-{exponent + 999}")
    assert tiny is not None
    assert tiny.sign() == 1  # rounded up to 1n, as apimachinery does


@pytest.mark.timeout(60)  # bounded work: a blow-up on hostile input hangs; no wall-clock bound
def test_a_megabyte_of_digits_is_refused_quickly() -> None:
    assert parse_or_error("1" * 1_000_000) is None
    assert parse_or_error("0" * 1_000_000 + "1") == Quantity.from_int(1)
