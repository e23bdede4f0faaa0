"""Quantity parsing, canonical printing and exact arithmetic, checked against apimachinery's own cases."""

from __future__ import annotations

import copy
import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from apis.errors import InvalidValue
from apis.quantity import QUANTITY_PATTERN, Format, Quantity

DSI, BSI, DEXP = Format.DECIMAL_SI, Format.BINARY_SI, Format.DECIMAL_EXPONENT
GI = 2**30
MAX_INT64 = 2**63 - 1


@pytest.mark.parametrize(
    ("text", "value", "fmt"),
    [
        pytest.param("0", 0, DSI, id="zero"),
        pytest.param("0Ki", 0, BSI, id="zero-binary"),
        pytest.param("1", 1, DSI, id="plain"),
        pytest.param("+1", 1, DSI, id="plus-sign"),
        pytest.param("-3", -3, DSI, id="minus-sign"),
        pytest.param("1.5", Fraction(3, 2), DSI, id="decimal-fraction"),
        pytest.param(".5", Fraction(1, 2), DSI, id="leading-dot"),
        pytest.param("1.", 1, DSI, id="trailing-dot"),
        pytest.param("1.G", 10**9, DSI, id="trailing-dot-suffix"),
        pytest.param("100m", Fraction(1, 10), DSI, id="milli"),
        pytest.param("500u", Fraction(1, 2000), DSI, id="micro"),
        pytest.param("10n", Fraction(1, 10**8), DSI, id="nano"),
        pytest.param("2k", 2000, DSI, id="kilo"),
        pytest.param("1E", 10**18, DSI, id="exa-not-exponent"),
        pytest.param("12E", 12 * 10**18, DSI, id="decimal-not-capped"),
        pytest.param("18446744073709551616", 2**64, DSI, id="beyond-int64"),
        pytest.param("64Gi", 64 * GI, BSI, id="gibi"),
        pytest.param("97871Mi", 97871 * 2**20, BSI, id="mebi"),
        pytest.param("0.5Ki", 512, BSI, id="fractional-binary"),
        pytest.param("100.035Ki", Fraction(10243584, 100), BSI, id="fractional-binary-remainder"),
        pytest.param(".001Ki", Fraction(1024, 1000), BSI, id="binary-just-above-one"),
        pytest.param("0.000000000001Ki", Fraction(2, 10**9), DSI, id="sub-unit-binary-becomes-decimal"),
        pytest.param("9Ei", MAX_INT64, BSI, id="binary-capped-at-int64"),
        pytest.param("-9Ei", -MAX_INT64, BSI, id="negative-binary-capped"),
        pytest.param("1e3", 1000, DEXP, id="exponent"),
        pytest.param("1E3", 1000, DEXP, id="upper-exponent"),
        pytest.param("1.3E+6", 1_300_000, DEXP, id="signed-exponent"),
        pytest.param("1E-3", Fraction(1, 1000), DEXP, id="negative-exponent"),
        pytest.param("1e03", 1000, DEXP, id="exponent-leading-zero"),
        pytest.param("3.001n", Fraction(4, 10**9), DSI, id="rounds-up-to-nano"),
        pytest.param("0.9n", Fraction(1, 10**9), DSI, id="rounds-sub-nano-up"),
        pytest.param("-0.5n", Fraction(-1, 10**9), DSI, id="rounds-away-from-zero"),
        pytest.param("0.00000012345", Fraction(124, 10**9), DSI, id="rounds-long-fraction"),
        pytest.param("1e-2000000000", Fraction(1, 10**9), DEXP, id="tiny-exponent-rounds-to-nano"),
        pytest.param("0e999999", 0, DEXP, id="zero-with-huge-exponent"),
        pytest.param(7, 7, DSI, id="int"),
        pytest.param(-7, -7, DSI, id="negative-int"),
    ],
)
def test_parse(text: str | int, value: Fraction | int, fmt: Format) -> None:
    q = Quantity.parse(text)
    assert q.as_fraction() == value
    assert q.format is fmt


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("1.2.3", id="two-dots"),
        pytest.param("5Qi", id="unknown-suffix"),
        pytest.param("--1", id="double-sign"),
        pytest.param(" 1", id="leading-space"),
        pytest.param("1 ", id="trailing-space"),
        pytest.param("1\n", id="trailing-newline"),
        pytest.param("1ki", id="lower-kibi"),
        pytest.param("1K", id="upper-kilo"),
        pytest.param("1i", id="bare-i"),
        pytest.param("0.1mi", id="milli-i"),
        pytest.param("1e", id="exponent-without-digits"),
        pytest.param("-3.01e-", id="exponent-sign-only"),
        pytest.param("1e1.5", id="fractional-exponent"),
        pytest.param("1+1.0M", id="sign-inside"),
        pytest.param("aoeu", id="letters"),
        pytest.param("m", id="suffix-without-number"),
        pytest.param(".", id="dot-only"),
        pytest.param("+", id="sign-only"),
        pytest.param("\uff11", id="non-ascii-digit"),
        pytest.param("1_000", id="underscore"),
        pytest.param("1e3000000000", id="exponent-beyond-int32"),
        pytest.param("1e1000", id="too-large"),
        pytest.param("1" * 1001, id="too-many-digits"),
    ],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(InvalidValue, match="invalid quantity") as info:
        Quantity.parse(text)
    assert repr(text)[:20] in str(info.value)


@pytest.mark.parametrize("value", [1.5, True, None, b"1"], ids=["float", "bool", "none", "bytes"])
def test_parse_rejects_other_types(value: object) -> None:
    with pytest.raises(InvalidValue, match="string or an integer"):
        Quantity.parse(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        pytest.param("1.5", "1500m", id="fraction-to-milli"),
        pytest.param("1.500", "1500m", id="trailing-zeros"),
        pytest.param("1e3", "1e3", id="exponent-kept"),
        pytest.param("1.2e3", "1200", id="exponent-zero"),
        pytest.param("0.5e-2", "5e-3", id="negative-exponent"),
        pytest.param("1e-12", "1e-9", id="exponent-rounded"),
        pytest.param("2k", "2k", id="kilo"),
        pytest.param("1000M", "1G", id="bigger-suffix"),
        pytest.param("1000m", "1", id="milli-to-unit"),
        pytest.param("+1", "1", id="plus-dropped"),
        pytest.param("-1.5", "-1500m", id="negative"),
        pytest.param("0.0", "0", id="zero"),
        pytest.param("-0", "0", id="negative-zero"),
        pytest.param("0Gi", "0", id="zero-binary"),
        pytest.param("1000E", "1e21", id="beyond-exa"),
        pytest.param("1024Mi", "1Gi", id="binary-up"),
        pytest.param("97871Mi", "97871Mi", id="binary-kept"),
        pytest.param("0.5Ki", "512", id="small-binary-decimal"),
        pytest.param("1536", "1536", id="decimal-stays-decimal"),
        pytest.param("1.5Ki", "1536", id="binary-not-multiple"),
        pytest.param("-1.5Mi", "-1536Ki", id="negative-binary"),
        pytest.param(".001Ki", "1024m", id="fractional-binary"),
        pytest.param(".000000000001Ki", "2n", id="binary-rounded"),
        pytest.param("100.035Ki", "102435840m", id="binary-with-fraction"),
        pytest.param("9Ei", "9223372036854775807", id="binary-cap"),
        pytest.param("0.001e12", "1e9", id="exponent-normalised"),
    ],
)
def test_canonical_string(text: str, canonical: str) -> None:
    assert str(Quantity.parse(text)) == canonical


@pytest.mark.parametrize(
    ("q", "canonical"),
    [
        pytest.param(Quantity.from_int(1024, BSI), "1Ki", id="int-binary"),
        pytest.param(Quantity.from_int(1_000_000), "1M", id="int-decimal"),
        pytest.param(Quantity.from_int(1_000_000, DEXP), "1e6", id="int-exponent"),
        pytest.param(Quantity.from_milli(1), "1m", id="milli"),
        pytest.param(Quantity.from_milli(1_234_000), "1234", id="milli-whole"),
        pytest.param(Quantity.from_milli(1024, BSI), "1024m", id="milli-binary-small"),
        pytest.param(Quantity.from_milli(1024 * 1024, BSI), "1048576m", id="milli-binary-fraction"),
        pytest.param(Quantity.from_int(2**70, BSI), "1024Ei", id="binary-beyond-exbi"),
        pytest.param(Quantity(Fraction(1, 3)), "333333334n", id="fraction-rounded-up"),
        pytest.param(Quantity(Fraction(-1, 3)), "-333333334n", id="negative-fraction-rounded-away"),
    ],
)
def test_constructors_print_like_go(q: Quantity, canonical: str) -> None:
    assert str(q) == canonical


def test_repr_names_value_and_format() -> None:
    assert repr(Quantity.parse("0.5Ki")) == "Quantity('512', BinarySI)"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param("1Gi", "1073741824", id="binary-vs-decimal"),
        pytest.param("1000m", "1", id="milli-vs-unit"),
        pytest.param("1e3", "1k", id="exponent-vs-si"),
        pytest.param("0.5Ki", "512", id="fractional-binary"),
        pytest.param("0", "0Mi", id="zeros"),
    ],
)
def test_equal_across_formats(a: str, b: str) -> None:
    qa, qb = Quantity.parse(a), Quantity.parse(b)
    assert qa == qb
    assert hash(qa) == hash(qb)
    assert qa <= qb
    assert qa >= qb
    assert not qa < qb


@pytest.mark.parametrize(
    ("smaller", "larger"),
    [
        pytest.param("50m", "100m", id="milli"),
        pytest.param("100Gi", "10000T", id="binary-vs-decimal"),
        pytest.param("999m", "1", id="just-below"),
        pytest.param("-1", "0", id="negative"),
        pytest.param("1G", "1Gi", id="giga-vs-gibi"),
    ],
)
def test_ordering(smaller: str, larger: str) -> None:
    qs, ql = Quantity.parse(smaller), Quantity.parse(larger)
    assert qs < ql
    assert ql > qs
    assert qs != ql


def test_not_comparable_with_numbers() -> None:
    one = Quantity.parse("1")
    assert one != 1
    with pytest.raises(TypeError):
        _ = one < 2  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = one + 1  # type: ignore[operator]


@pytest.mark.parametrize(
    ("left", "right", "total", "canonical"),
    [
        pytest.param("1Gi", "512Mi", 3 * 2**29, "1536Mi", id="binary-left"),
        pytest.param("1", "1Ki", 1025, "1025", id="decimal-left"),
        pytest.param("0", "100m", Fraction(1, 10), "100m", id="zero-left-takes-right-format"),
        pytest.param("0", "1Gi", GI, "1Gi", id="zero-left-binary"),
        pytest.param("1Gi", "0", GI, "1Gi", id="zero-right"),
        pytest.param("1e3", "1", 1001, "1001", id="exponent-left"),
        pytest.param("2e3", "1k", 3000, "3e3", id="exponent-left-kept"),
    ],
)
def test_add_keeps_left_format(left: str, right: str, total: Fraction | int, canonical: str) -> None:
    result = Quantity.parse(left) + Quantity.parse(right)
    assert result.as_fraction() == total
    assert str(result) == canonical


def test_subtract_and_negate() -> None:
    assert str(Quantity.parse("1Gi") - Quantity.parse("512Mi")) == "512Mi"
    assert str(Quantity.parse("0") - Quantity.parse("100m")) == "-100m"
    assert str(-Quantity.parse("9.01")) == "-9010m"
    assert str(-Quantity.parse("1Gi")) == "-1Gi"


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        pytest.param("1.5", 2, 1500, id="fraction"),
        pytest.param("100m", 1, 100, id="milli"),
        pytest.param("1n", 1, 1, id="nano"),
        pytest.param("64Gi", 64 * GI, 64 * GI * 1000, id="binary"),
        pytest.param("-1.5", -1, -1500, id="negative-rounds-toward-plus-infinity"),
        pytest.param("-1n", 0, 0, id="negative-nano"),
        pytest.param("18446744073709551616", 2**64, 2**64 * 1000, id="no-int64-overflow"),
    ],
)
def test_value_and_milli_value_round_up(text: str, value: int, milli: int) -> None:
    q = Quantity.parse(text)
    assert q.value() == value
    assert q.milli_value() == milli


@pytest.mark.parametrize(
    ("text", "sign"), [("-1n", -1), ("0", 0), ("0Ki", 0), ("1n", 1)], ids=["neg", "zero", "zero-bin", "pos"]
)
def test_sign_zero_and_truth(text: str, sign: int) -> None:
    q = Quantity.parse(text)
    assert q.sign() == sign
    assert q.is_zero() is (sign == 0)
    assert bool(q) is (sign != 0)


def test_constructor_takes_exact_numbers() -> None:
    assert Quantity(Fraction(3, 2)) == Quantity.parse("1.5")
    assert Quantity(5, BSI).format is BSI
    assert Quantity() == Quantity.from_int(0)


def test_immutable_copies() -> None:
    q = Quantity.parse("1Gi")
    assert copy.copy(q) == q
    assert str(copy.deepcopy(q)) == "1Gi"
    with pytest.raises(AttributeError):
        q.extra = 1  # type: ignore[attr-defined]


class _Spec(BaseModel):
    limit: Quantity


class TestPydantic:
    @pytest.mark.parametrize(("raw", "dumped"), [("1.5", "1500m"), (2048, "2048"), ("2Gi", "2Gi")])
    def test_round_trip(self, raw: str | int, dumped: str) -> None:
        spec = _Spec.model_validate({"limit": raw})
        assert spec.model_dump() == {"limit": dumped}
        assert spec.model_dump_json() == f'{{"limit":"{dumped}"}}'
        assert _Spec.model_validate_json(spec.model_dump_json()) == spec

    @pytest.mark.parametrize(
        ("raw", "message"),
        [
            pytest.param(True, "must be an integer or a string", id="bool"),
            pytest.param(1.5, "must be an integer or a string", id="float"),
            pytest.param([1], "must be an integer or a string", id="list"),
            pytest.param("1.2.3", "invalid quantity '1.2.3'", id="bad-string"),
        ],
    )
    def test_rejects(self, raw: object, message: str) -> None:
        with pytest.raises(ValidationError, match=message):
            _Spec.model_validate({"limit": raw})

    def test_json_float_rejected(self) -> None:
        with pytest.raises(ValidationError, match="must be an integer or a string"):
            _Spec.model_validate_json('{"limit": 1.5}')

    def test_json_schema(self) -> None:
        schema = _Spec.model_json_schema()["properties"]["limit"]
        assert schema["pattern"] == QUANTITY_PATTERN
        assert schema["x-kubernetes-int-or-string"] is True


# Property tests. Quantities are built the way a manifest writer would: digits, an optional fraction,
# an optional suffix of each of the three formats.

_sign = st.sampled_from(["", "+", "-"])
_number = st.tuples(
    st.integers(0, 10**12), st.one_of(st.just(""), st.integers(0, 10**6).map(lambda n: f".{n}"))
).map(lambda p: f"{p[0]}{p[1]}")
_suffix = st.one_of(
    st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E"]),
    st.sampled_from(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]),
    st.tuples(st.sampled_from("eE"), st.integers(-15, 20)).map(lambda p: f"{p[0]}{p[1]}"),
)
texts = st.tuples(_sign, _number, _suffix).map("".join)
quantities = texts.map(Quantity.parse)


def _exact(text: str) -> Fraction:
    """The written value, before any nano rounding or binary capping (test oracle)."""
    body = text.lstrip("+-")
    for i, suffix in enumerate(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"], start=1):
        if body.endswith(suffix):
            return Fraction(body.removesuffix(suffix)) * (1 << 10 * i) * (-1 if text.startswith("-") else 1)
    powers = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
    if body[-1:] in powers:
        body = f"{body[:-1]}e{powers[body[-1]]}"
    return Fraction(body) * (-1 if text.startswith("-") else 1)


@given(texts)
def test_parse_is_exact_up_to_nano_rounding(text: str) -> None:
    q = Quantity.parse(text)
    exact = _exact(text)
    if q.format is BSI and abs(exact) > MAX_INT64:
        assert abs(q.as_fraction()) == MAX_INT64
    else:
        assert abs(q.as_fraction()) >= abs(exact)
        assert abs(q.as_fraction() - exact) < Fraction(1, 10**9)


@given(quantities)
def test_string_round_trip(q: Quantity) -> None:
    again = Quantity.parse(str(q))
    assert again == q
    assert str(again) == str(q)


@given(quantities)
def test_canonical_string_matches_openapi_pattern(q: Quantity) -> None:
    assert re.fullmatch(QUANTITY_PATTERN, str(q))


@given(quantities, quantities)
def test_ordering_agrees_with_exact_value(a: Quantity, b: Quantity) -> None:
    fa, fb = a.as_fraction(), b.as_fraction()
    assert (a < b) == (fa < fb)
    assert (a == b) == (fa == fb)
    assert (a >= b) == (fa >= fb)
    if a == b:
        assert hash(a) == hash(b)


@given(quantities, quantities, quantities)
def test_addition_laws(a: Quantity, b: Quantity, c: Quantity) -> None:
    assert a + b == b + a
    assert (a + b) + c == a + (b + c)
    assert (a + b) - b == a
    assert (a + b).as_fraction() == a.as_fraction() + b.as_fraction()
    negated = -a
    assert -negated == a
    assert negated.format is a.format


@given(quantities)
def test_value_accessors_round_up(q: Quantity) -> None:
    exact = q.as_fraction()
    assert q.milli_value() >= exact * 1000 > q.milli_value() - 1
    assert q.value() >= exact > q.value() - 1


def test_the_canonical_text_is_printed_once_and_kept() -> None:
    shared = Quantity.parse("1536Mi")  # parses are shared, so every pod's 1536Mi prints this one
    assert str(shared) == "1536Mi"
    assert str(shared) is str(shared)
    assert str(shared + Quantity.parse("512Mi")) == "2Gi"  # a new quantity prints its own value
