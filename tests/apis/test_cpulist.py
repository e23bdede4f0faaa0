"""The one CPU-list parser koordlet, koord-manager and koord-scheduler share."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis import cpulist
from apis.cpulist import MAX_CPUS, format_cpus, parse_cpus
from apis.errors import MESSAGE_LIMIT, InvalidValue


@pytest.mark.parametrize(
    ("text", "cpus", "canonical"),
    [
        ("", set(), ""),
        ("  \n", set(), ""),
        ("0-3,8\n", {0, 1, 2, 3, 8}, "0-3,8"),
        ("5, 0-1 ,2", {0, 1, 2, 5}, "0-2,5"),
        ("7,7,6", {6, 7}, "6-7"),
        ("2-3 ,\n", {2, 3}, "2-3"),
    ],
)
def test_parses_sysfs_and_cgroup_lists_and_formats_them_canonically(
    text: str, cpus: set[int], canonical: str
) -> None:
    parsed = parse_cpus(text)
    assert parsed == cpus
    assert format_cpus(parsed) == canonical


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("0-3,,4", "empty element"),
        (",", "empty element"),
        ("a", "'a'"),
        ("3-1", "'3-1'"),
        ("-1", "'-1'"),
        ("0-99999999", "'0-99999999'"),
        ("banana", "'banana'"),
        ("\u0663", "'\u0663'"),  # ARABIC-INDIC DIGIT THREE: not CPU 3
        ("1-\uff13", "'1-\uff13'"),  # FULLWIDTH DIGIT THREE
        ("\ud800", "is not a CPU id"),
        (f"0-{MAX_CPUS}", "CPU ids stop at 8191"),
        (str(MAX_CPUS), "CPU ids stop at 8191"),
        (",".join(["0-1048575"] * 100), "CPU ids stop at 8191"),
        (",".join([f"0-{MAX_CPUS - 1}"] * 2), "more than 8192 CPU ids in all"),
        ("0," * (MAX_CPUS + 1), "more than 8192 CPU ids in all"),
    ],
)
def test_a_bad_list_names_the_bad_part(text: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        parse_cpus(text)


@given(st.sets(st.integers(min_value=0, max_value=4096), max_size=64))
def test_format_then_parse_is_the_identity(cpus: set[int]) -> None:
    assert parse_cpus(format_cpus(cpus)) == cpus


def test_the_largest_list_is_every_id_below_the_cap() -> None:
    assert parse_cpus(f"0-{MAX_CPUS - 1}") == frozenset(range(MAX_CPUS))
    assert len(parse_cpus(",".join(map(str, range(0, MAX_CPUS, 2))))) == MAX_CPUS // 2


# --- adversarial lists: the error type and a deterministic bound on the work ---------------------


@dataclass
class Work:
    elements: int = 0
    """Elements matched against the element pattern."""
    ids: int = 0
    """Ids enumerated into the set (repeats counted)."""


@contextmanager
def counted() -> Iterator[Work]:
    """Count the parser's steps: elements examined and ids enumerated."""
    work = Work()
    element = getattr(cpulist, "_ELEMENT", re.compile(r"(\d+)(?:-(\d+))?"))

    class Pattern:
        def fullmatch(self, text: str) -> re.Match[str] | None:
            work.elements += 1
            return element.fullmatch(text)

    def counting_range(start: int, stop: int) -> range:
        work.ids += max(stop - start, 0)
        return range(start, stop)

    with (
        mock.patch.object(cpulist, "_ELEMENT", Pattern(), create=True),
        mock.patch.object(cpulist, "range", counting_range, create=True),
    ):
        yield work


ids = st.one_of(
    st.integers(min_value=0, max_value=MAX_CPUS + 10),
    st.integers(min_value=0, max_value=2**70),
)
elements = st.one_of(
    ids.map(str),
    st.builds(lambda a, b: f"{a}-{b}", ids, ids),
    st.text(alphabet=st.characters(exclude_categories=()), max_size=6),  # every category, surrogates
    st.text(alphabet=st.characters(categories=["Nd"]), min_size=1, max_size=4),  # non-ASCII digits
    st.sampled_from(["", " ", "-", "--", "1--2", "+1", "0x10", "1e3", "\u00a0 1", "\u2028"]),
)
cpu_lists = st.one_of(
    st.lists(elements, max_size=12).map(",".join),
    # one element repeated, up to far past the cap on the number of ids
    st.builds(lambda e, n: ",".join([e] * n), elements, st.integers(min_value=1, max_value=40_000)),
    st.text(alphabet=st.characters(exclude_categories=()), max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(text=cpu_lists)
def test_any_list_parses_within_the_caps_or_is_refused_with_invalid_value(text: str) -> None:
    refused: InvalidValue | None = None
    cpus: frozenset[int] = frozenset()
    with counted() as work:
        try:
            cpus = parse_cpus(text)
        except InvalidValue as exc:
            refused = exc
    if refused is not None:
        assert len(str(refused)) <= MESSAGE_LIMIT
    else:
        assert all(0 <= cpu < MAX_CPUS for cpu in cpus)
        assert text.isascii()
    # What it builds is bounded by the cap, what it reads by the cap too, whatever the text's length.
    assert work.ids <= MAX_CPUS
    assert work.elements <= MAX_CPUS + 2
