"""The one CPU-list parser koordlet, koord-manager and koord-scheduler share."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.cpulist import format_cpus, parse_cpus


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
    ],
)
def test_a_bad_list_names_the_bad_part(text: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        parse_cpus(text)


@given(st.sets(st.integers(min_value=0, max_value=4096), max_size=64))
def test_format_then_parse_is_the_identity(cpus: set[int]) -> None:
    assert parse_cpus(format_cpus(cpus)) == cpus
