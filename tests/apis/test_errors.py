"""apis.errors: messages about hostile input stay small however large the input is."""

from __future__ import annotations

import pytest

from apis.errors import ECHO_LIMIT, MESSAGE_LIMIT, InvalidAnnotation, InvalidSpec, InvalidValue, echo, summary


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("x" * 1_000_000, id="megabyte-string"),
        pytest.param(10**5000, id="5000-digit-int"),
        pytest.param(list(range(100_000)), id="long-list"),
        pytest.param({"a": ["b" * 10_000] * 100}, id="nested"),
    ],
)
def test_echo_quotes_at_most_the_limit(value: object) -> None:
    assert len(echo(value)) <= ECHO_LIMIT


def test_echo_is_repr_for_short_values() -> None:
    assert echo("300s") == "'300s'"
    assert echo(42) == "42"


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(InvalidValue("v" * 1_000_000), id="value"),
        pytest.param(InvalidAnnotation("k" * 1_000_000, "p" * 1_000_000), id="annotation"),
        pytest.param(InvalidSpec("spec." + "f" * 1_000_000, "p" * 1_000_000), id="spec"),
    ],
)
def test_messages_are_bounded(error: InvalidValue) -> None:
    assert len(str(error)) <= MESSAGE_LIMIT
    assert "more characters" in str(error)


def test_annotation_error_keeps_key_and_problem() -> None:
    key = "gang.scheduling.koordinator.sh/min-available"
    error = InvalidAnnotation(key, "'x' is not a valid integer")
    assert error.key == key
    assert str(error) == f"invalid value for {key}: 'x' is not a valid integer"


def test_summary_joins_problems_up_to_the_message_limit_and_counts_the_rest() -> None:
    assert summary([]) == ""
    assert summary(["a: bad", "b: worse"]) == "a: bad; b: worse"
    many = summary([f"spec.items[{i}]: not a quantity" for i in range(100_000)])
    assert len(many) <= MESSAGE_LIMIT + 40
    assert many.startswith("spec.items[0]: not a quantity; spec.items[1]: ")
    assert many.endswith(" more problems")
    assert len(summary(["x" * 10**6])) <= MESSAGE_LIMIT
