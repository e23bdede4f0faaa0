"""Round two of hostile input over every parser of ``apis.extension`` (found by signature in
``test_parsers``): text from every Unicode category, lone surrogates included, non-ASCII digits, deep
nesting, huge CPU ranges, one element repeated thousands of times and out-of-range numbers.

Each parser returns or raises InvalidAnnotation, and what it returns is bounded by what it read:
the number of values it builds (containers' items, models' set fields, CPU ids) grows at most
linearly with the text, so no input makes a parser build a million of anything. The bound is
counted, never timed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from apis.cpulist import MAX_CPUS
from apis.errors import MESSAGE_LIMIT, InvalidAnnotation
from tests.examples import examples
from tests.fuzz.test_parsers import PARSER_IDS, PARSERS, Parser

any_text = st.text(alphabet=st.characters(exclude_categories=()), max_size=40)
"""Every Unicode category, surrogates (Cs) and unassigned code points (Cn) included."""

digits = st.text(alphabet=st.characters(categories=["Nd", "No", "Nl"]), min_size=1, max_size=6)
"""Decimal digits of every script (U+0663 ARABIC-INDIC THREE, U+FF13 FULLWIDTH THREE ...)."""

numbers = st.sampled_from(
    ["1e308", "-1e308", "1e309", "Infinity", "-Infinity", "NaN", "-1", "-0", "-50", "1000", "4294967296"]
)
cpu_ranges = st.builds(
    lambda first, last, times: ",".join([f"{first}-{last}"] * times),
    st.integers(min_value=0, max_value=16),
    st.sampled_from([3, MAX_CPUS - 1, MAX_CPUS, 1 << 20, 1 << 40]),
    st.integers(min_value=1, max_value=2000),
)
scalars = st.one_of(any_text, digits, cpu_ranges, st.integers(min_value=-(2**70), max_value=2**70))


def _json_value(depth: int) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars | st.none() | st.booleans() | st.floats(),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(any_text | scalars.map(str), inner, max_size=3)
        ),
        max_leaves=depth,
    )


def _raw_json(value: Any) -> str:
    # ensure_ascii=False keeps lone surrogates as they are, as `koordctl simulate` input can.
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


FIELDS = [
    "cpuset",
    "reservedCPUs",
    "node",
    "minor",
    "minors",
    "cpu",
    "memory",
    "resources",
    "id",
    "socket",
    "core",
    "detail",
    "numaNodeResources",
    "operator",
    "effect",
    "threshold",
    "usageThresholds",
]
"""Field names that Koordinator's JSON annotations use for ids, amounts, lists and enums."""


def _repeated(element: str, times: int) -> str:
    return "[" + ",".join([element] * times) + "]"


texts = st.one_of(
    any_text,
    digits,
    cpu_ranges,
    _json_value(12).map(_raw_json),
    st.dictionaries(st.sampled_from(FIELDS), scalars | numbers.map(float), max_size=4).map(_raw_json),
    st.builds(lambda key, num: "{" + json.dumps(key) + ":" + num + "}", st.sampled_from(FIELDS), numbers),
    st.builds(lambda v, t: _repeated(_raw_json(v), t), _json_value(4), st.integers(1, 3000)),
    st.builds(lambda n: "[" * n + "]" * n, st.integers(1, 5000)),
    st.builds(lambda n: '{"a":' * n + "1" + "}" * n, st.integers(1, 5000)),
)


def size(value: Any, limit: int) -> int:
    """How many values ``value`` holds (a container's items, a model's set fields, recursively);
    counting stops past ``limit``."""
    count = 0
    stack = [value]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, BaseModel):
            stack.extend(v for v in vars(item).values() if v is not None)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif hasattr(item, "__dataclass_fields__"):
            stack.extend(getattr(item, f) for f in item.__dataclass_fields__)
    return count


def check(parse: Parser, text: str) -> None:
    refused: InvalidAnnotation | None = None
    result: object = None
    try:
        result = parse(text)
    except InvalidAnnotation as exc:
        refused = exc
    if refused is not None:
        assert len(str(refused)) <= MESSAGE_LIMIT
        return
    bound = 8 * len(text) + 64
    assert size(result, bound) <= bound, f"{size(result, bound)} values from {len(text)} characters"


@pytest.mark.parametrize("parse", [p for _, p in PARSERS], ids=PARSER_IDS)
@settings(max_examples=examples(12, full=150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_hostile_text_is_refused_with_the_annotation_error_or_parsed_into_a_bounded_value(
    parse: Parser, text: str
) -> None:
    check(parse, text)


LONE_SURROGATES = [
    "\ud800",
    '"\udfff"',
    '{"a": "\ud800"}',
    '["\ud800"]',
    "0-3,\udc00",
    '{"cpuset": "\ud800"}',
]


@pytest.mark.parametrize("parse", [p for _, p in PARSERS], ids=PARSER_IDS)
def test_a_lone_surrogate_is_an_annotation_error_never_a_type_error(parse: Parser) -> None:
    for text in LONE_SURROGATES:
        check(parse, text)
