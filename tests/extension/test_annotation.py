"""The shared helpers every extension parser goes through."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import TypeAdapter

from apis.base import KoordModel
from apis.errors import MESSAGE_LIMIT, InvalidAnnotation
from apis.extension._annotation import (
    format_loc,
    lookup,
    parse_bool,
    parse_duration,
    parse_go_int,
    parse_json,
    parse_resource_list,
)
from apis.quantity import Quantity

KEY = "example.koordinator.sh/key"


class Inner(KoordModel):
    some_value: int


class Outer(KoordModel):
    items: list[Inner] | None = None


@pytest.mark.parametrize(
    ("loc", "expected"),
    [
        pytest.param((), "", id="empty"),
        pytest.param(("a",), "a", id="field"),
        pytest.param(("gatherStrategy", 0, "strategy"), "gatherStrategy[0].strategy", id="nested"),
        pytest.param((0, "minors", 1), "[0].minors[1]", id="leading-index"),
        pytest.param(("x", "[key]"), "x (key)", id="dict-key"),
    ],
)
def test_format_loc(loc: tuple[int | str, ...], expected: str) -> None:
    assert format_loc(loc) == expected


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        pytest.param("{", ["malformed JSON"], id="truncated"),
        pytest.param("", ["malformed JSON"], id="empty"),
        pytest.param(
            '{"items": [{"someValue": "1"}]}', ["items[0].someValue", "valid integer", "'1'"], id="str-int"
        ),
        pytest.param('{"items": [{"someValue": 1.5}]}', ["items[0].someValue"], id="float-int"),
        pytest.param(
            '{"items": {"someValue": 1}}', ["items: Input should be a valid array"], id="object-for-list"
        ),
        pytest.param("[]", ["Input should be an object"], id="wrong-top-level"),
        pytest.param('{"items": [{}]}', ["items[0].someValue: Field required"], id="missing-required"),
    ],
)
def test_parse_json_rejects(raw: str, fragments: list[str]) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        parse_json(KEY, raw, Outer)
    assert caught.value.key == KEY
    assert KEY in str(caught.value)
    for fragment in fragments:
        assert fragment in caught.value.problem


def test_parse_json_ignores_unknown_fields_like_go() -> None:
    parsed = parse_json(KEY, '{"items": [{"someValue": 1, "extra": true}], "other": 1}', Outer)
    assert parsed.items == [Inner(some_value=1)]


def test_parse_json_accepts_a_type_adapter() -> None:
    assert parse_json(KEY, '["a", "b"]', TypeAdapter(list[str])) == ["a", "b"]


def test_parse_json_refuses_a_non_string_value() -> None:
    with pytest.raises(InvalidAnnotation, match="must be a string"):
        parse_json(KEY, 5, Outer)  # type: ignore[call-overload]


def test_parse_resource_list() -> None:
    parsed = parse_resource_list(KEY, '{"cpu": "500m", "memory": "1Gi", "koordinator.sh/gpu-core": 100}')
    assert parsed == {
        "cpu": Quantity.parse("500m"),
        "memory": Quantity.parse("1Gi"),
        "koordinator.sh/gpu-core": Quantity.parse("100"),
    }


@pytest.mark.parametrize("raw", ['{"cpu": true}', '{"cpu": "lots"}', '{"cpu": [1]}'])
def test_parse_resource_list_rejects(raw: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        parse_resource_list(KEY, raw)
    assert caught.value.problem.startswith("cpu: ")


@pytest.mark.parametrize(
    ("raw", "base", "bits", "expected"),
    [
        pytest.param("42", 10, 32, 42, id="decimal"),
        pytest.param("-7", 10, 32, -7, id="negative"),
        pytest.param("+7", 10, 32, 7, id="plus"),
        pytest.param("007", 10, 32, 7, id="leading-zeros-base10"),
        pytest.param("2147483647", 10, 32, 2**31 - 1, id="int32-max"),
        pytest.param("-2147483648", 10, 32, -(2**31), id="int32-min"),
        pytest.param("0x10", 0, 32, 16, id="hex"),
        pytest.param("0X1f", 0, 32, 31, id="hex-upper"),
        pytest.param("010", 0, 32, 8, id="octal-leading-zero"),
        pytest.param("0o17", 0, 32, 15, id="octal-prefix"),
        pytest.param("0b101", 0, 32, 5, id="binary"),
        pytest.param("-0x10", 0, 32, -16, id="negative-hex"),
        pytest.param("1_000", 0, 32, 1000, id="underscore-base0"),
        pytest.param("0", 0, 32, 0, id="zero-base0"),
        pytest.param("9223372036854775807", 10, 64, 2**63 - 1, id="int64-max"),
        pytest.param("0" * 5000 + "5", 10, 32, 5, id="5000-leading-zeros"),
        pytest.param("0x" + "0" * 5000 + "f", 0, 32, 15, id="5000-leading-zeros-hex"),
    ],
)
def test_parse_go_int(raw: str, base: int, bits: int, expected: int) -> None:
    assert parse_go_int(KEY, raw, base=base, bits=bits) == expected


@pytest.mark.parametrize(
    ("raw", "base", "bits", "fragment"),
    [
        pytest.param("", 10, 32, "not a valid", id="empty"),
        pytest.param("1.5", 10, 32, "not a valid", id="float"),
        pytest.param(" 1", 10, 32, "not a valid", id="space"),
        pytest.param("0x10", 10, 32, "not a valid", id="hex-in-base10"),
        pytest.param("1_000", 10, 32, "not a valid", id="underscore-base10"),
        pytest.param("٣", 10, 32, "not a valid", id="non-ascii-digit"),
        pytest.param("2147483648", 10, 32, "out of range for int32", id="int32-overflow"),
        pytest.param("0x", 0, 32, "not a valid", id="bare-prefix"),
        pytest.param("09", 0, 32, "not a valid", id="bad-octal"),
        pytest.param("1__0", 0, 32, "not a valid", id="double-underscore"),
        pytest.param("_1", 0, 32, "not a valid", id="leading-underscore"),
        pytest.param("0x80000000", 0, 32, "out of range", id="hex-overflow"),
        pytest.param("9" * 5000, 10, 32, "out of range for int32", id="5000-digits"),
        pytest.param("-" + "9" * 5000, 10, 64, "out of range for int64", id="5000-digits-negative"),
        pytest.param("0b" + "1" * 5000, 0, 64, "out of range for int64", id="5000-binary-digits"),
    ],
)
def test_parse_go_int_rejects(raw: str, base: int, bits: int, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        parse_go_int(KEY, raw, base=base, bits=bits)
    assert caught.value.key == KEY
    assert fragment in caught.value.problem
    assert len(caught.value.problem) < 200  # a 5000-character value is not echoed whole


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("t", True),
        ("1", True),
        ("false", False),
        ("False", False),
        ("f", False),
        ("0", False),
    ],
)
def test_parse_bool(raw: str, expected: bool) -> None:
    assert parse_bool(KEY, raw) is expected


@pytest.mark.parametrize("raw", ["yes", "", "tRUE", "on"])
def test_parse_bool_rejects(raw: str) -> None:
    with pytest.raises(InvalidAnnotation, match="not a boolean"):
        parse_bool(KEY, raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("300s", timedelta(seconds=300)), ("1h30m", timedelta(minutes=90)), ("1.5s", timedelta(seconds=1.5))],
)
def test_parse_duration(raw: str, expected: timedelta) -> None:
    assert parse_duration(KEY, raw) == expected


@pytest.mark.parametrize("raw", ["300", "1d", "", "s"])
def test_parse_duration_rejects(raw: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        parse_duration(KEY, raw)
    assert caught.value.key == KEY


def test_lookup() -> None:
    assert lookup(None, KEY) is None
    assert lookup({}, KEY) is None
    assert lookup({KEY: ""}, KEY) == ""


# Hostile input: bounded before any arithmetic, one error type, bounded messages.

HUGE = "9" * 5000  # past CPython's 4,300-digit int() limit


@pytest.mark.parametrize(
    ("raw", "base"),
    [
        pytest.param(HUGE, 10, id="5000-digits"),
        pytest.param("-" + HUGE, 10, id="5000-digits-negative"),
        pytest.param("0x" + "f" * 5000, 0, id="5000-hex-digits"),
        pytest.param("0" * 5000 + "1" * 5000, 0, id="leading-zeros-then-5000-digits"),
    ],
)
def test_parse_go_int_refuses_huge_numbers_as_out_of_range(raw: str, base: int) -> None:
    with pytest.raises(InvalidAnnotation, match="out of range for int64") as error:
        parse_go_int(KEY, raw, base=base)
    assert error.value.key == KEY
    assert len(str(error.value)) < 400


def test_parse_go_int_accepts_leading_zeros_beyond_the_digit_bound() -> None:
    assert parse_go_int(KEY, "0" * 5000 + "42") == 42


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(HUGE + "s", id="5000-digit-seconds"),
        pytest.param("1000000h" * 100_000, id="many-terms-overflow"),
        pytest.param("9223372036854775808ns", id="just-past-int64"),
    ],
)
def test_parse_duration_refuses_overflow_with_the_annotation_error(raw: str) -> None:
    with pytest.raises(InvalidAnnotation, match="overflows int64") as error:
        parse_duration(KEY, raw)
    assert len(str(error.value)) < 400


def test_parse_duration_ignores_fraction_digits_far_below_a_nanosecond() -> None:
    assert parse_duration(KEY, "1." + "5" * 5000 + "s") == timedelta(seconds=1, microseconds=555555)
    assert parse_duration(KEY, "0" * 5000 + "2m") == timedelta(minutes=2)


@pytest.mark.parametrize(
    ("parse", "raw"),
    [
        pytest.param(lambda raw: parse_go_int(KEY, raw), "x" * 1_000_000, id="int"),
        pytest.param(lambda raw: parse_bool(KEY, raw), "x" * 1_000_000, id="bool"),
        pytest.param(lambda raw: parse_duration(KEY, raw), "x" * 1_000_000, id="duration"),
        pytest.param(lambda raw: parse_json(KEY, raw, Outer), "x" * 1_000_000, id="json-malformed"),
        pytest.param(
            lambda raw: parse_json(KEY, raw, Outer),
            '{"items": [' + ",".join(['{"someValue": "' + "x" * 1000 + '"}'] * 1000) + "]}",
            id="json-1000-bad-items",
        ),
    ],
)
def test_a_megabyte_of_bad_input_gives_a_short_message(parse: Any, raw: str) -> None:
    with pytest.raises(InvalidAnnotation) as error:
        parse(raw)
    assert len(str(error.value)) <= MESSAGE_LIMIT


def test_many_problems_are_counted_not_listed() -> None:
    raw = '{"items": [' + ",".join(['{"someValue": "x"}'] * 20) + "]}"
    with pytest.raises(InvalidAnnotation, match="and 15 more"):
        parse_json(KEY, raw, Outer)


# Go's encoding/json matches object keys to fields case-insensitively.


class Spec(KoordModel):
    gather_strategy: list[Inner] | None = None
    limits: dict[str, Inner] | None = None


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param('{"GatherStrategy": [{"someValue": 1}]}', id="capitalised"),
        pytest.param('{"GATHERSTRATEGY": [{"SOMEVALUE": 1}]}', id="upper-case-nested"),
        pytest.param('{"gatherstrategy": [{"somevalue": 1}]}', id="lower-case"),
        pytest.param('{"gatherStrategy": [{"someValue": 1}]}', id="exact"),
        pytest.param('{"gather_strategy": [{"some_value": 1}]}', id="python-names-still-accepted"),
    ],
)
def test_json_keys_match_fields_case_insensitively_as_go(raw: str) -> None:
    assert parse_json(KEY, raw, Spec).gather_strategy == [Inner(some_value=1)]


def test_the_kelvin_sign_and_long_s_fold_as_in_go() -> None:
    assert parse_json(KEY, '{"gatherStrategy": [{"\u017fomeValue": 1}]}', Spec).gather_strategy == [
        Inner(some_value=1)
    ]

    class Knob(KoordModel):
        kind: int | None = None

    assert parse_json(KEY, '{"\u212aind": 3}', Knob).kind == 3


def test_a_later_key_for_the_same_field_wins_as_in_go() -> None:
    raw = '{"gatherStrategy": [{"someValue": 1}], "GatherStrategy": [{"someValue": 2}]}'
    assert parse_json(KEY, raw, Spec).gather_strategy == [Inner(some_value=2)]


def test_map_keys_are_data_and_keep_their_case() -> None:
    spec = parse_json(KEY, '{"Limits": {"CPU": {"SomeValue": 1}}}', Spec)
    assert spec.limits == {"CPU": Inner(some_value=1)}


def test_case_folded_keys_are_still_validated_strictly() -> None:
    with pytest.raises(InvalidAnnotation, match=r"gatherStrategy\[0\]\.someValue"):
        parse_json(KEY, '{"GatherStrategy": [{"SomeValue": "1"}]}', Spec)


def test_api_objects_decode_with_exact_keys_only() -> None:
    # CRD objects come from the API server with their exact field names; only annotation
    # payloads get Go's case-insensitive matching.
    assert Spec.model_validate({"GatherStrategy": [{"someValue": 1}]}).gather_strategy is None
