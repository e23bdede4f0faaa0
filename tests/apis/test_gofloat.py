"""apis.gofloat: Go's strconv.ParseFloat grammar, exact, with its size bounded before arithmetic."""

from __future__ import annotations

import contextlib
from fractions import Fraction

import pytest

from apis.errors import InvalidValue
from apis.gofloat import parse_go_float


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("0.9", Fraction(9, 10), id="decimal"),
        pytest.param("1", Fraction(1), id="integer"),
        pytest.param(".5", Fraction(1, 2), id="no-whole-part"),
        pytest.param("5.", Fraction(5), id="no-fraction-part"),
        pytest.param("+1.5E3", Fraction(1500), id="sign-and-exponent"),
        pytest.param("-0", Fraction(0), id="negative-zero"),
        pytest.param("1e-3", Fraction(1, 1000), id="negative-exponent"),
        # Go's own atof_test.go: "1_23.50_0_0e+1_2" is 1.235e+14.
        pytest.param("1_23.50_0_0e+1_2", Fraction(123_500_000_000_000), id="go-underscores"),
        pytest.param("1_0", Fraction(10), id="underscore-between-digits"),
        pytest.param("0x1p-1", Fraction(1, 2), id="hex"),
        pytest.param("0x1.8p1", Fraction(3), id="hex-fraction"),
        pytest.param("0x_1_2.3_4_5p+1_2", Fraction(0x12345), id="hex-underscores"),
    ],
)
def test_go_accepts(text: str, value: Fraction) -> None:
    assert parse_go_float(text) == value


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("Infinity", "not a finite number", id="infinity"),
        pytest.param("-inf", "not a finite number", id="minus-inf"),
        pytest.param("NaN", "not a finite number", id="nan"),
        pytest.param("1e999999999", "exponent out of range", id="huge-exponent"),
        pytest.param("1e-999999999", "exponent out of range", id="tiny-exponent"),
        pytest.param("0x1p99999", "exponent out of range", id="huge-binary-exponent"),
        pytest.param("1" * 65, "longer than 64 characters", id="too-long"),
        pytest.param("", "not a number", id="empty"),
        pytest.param(" 0.9", "not a number", id="leading-space"),
        pytest.param("_1", "not a number", id="leading-underscore"),
        pytest.param("-_1", "not a number", id="underscore-after-sign"),
        pytest.param("1__0", "not a number", id="double-underscore"),
        pytest.param("1_.5", "not a number", id="underscore-before-point"),
        pytest.param("1.5e+1_", "not a number", id="trailing-underscore"),
        pytest.param("0x1e2", "not a number", id="hex-needs-p-exponent"),
        pytest.param("0x__1p0", "not a number", id="hex-double-underscore"),
        pytest.param(".", "not a number", id="point-only"),
        pytest.param("1e", "not a number", id="exponent-without-digits"),
        pytest.param("0.9x", "not a number", id="trailing-garbage"),
        pytest.param("\u0661", "not a number", id="arabic-digit"),
    ],
)
def test_refused(text: str, fragment: str) -> None:
    with pytest.raises(InvalidValue, match=fragment):
        parse_go_float(text)


@pytest.mark.timeout(60)  # bounded work: a blow-up on hostile input hangs; no wall-clock bound
def test_a_hostile_exponent_costs_no_more_than_a_plain_number() -> None:
    for text in ("1e999999999", "9" * 60 + "e330", "0x" + "f" * 50 + "p1100"):
        with contextlib.suppress(InvalidValue):
            parse_go_float(text)
