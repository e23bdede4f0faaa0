"""docs/features.md cites tests as evidence: every file, test and directory it names exists, so a
row cannot claim a test that was renamed or never written."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FEATURES = (ROOT / "docs" / "features.md").read_text()
CITED_TESTS = sorted(
    set(re.findall(r"`((?:tests|e2e)/[\w/.-]+\.py)(?:::([\w-]+)(?:\[[^\]`]*\])?)?`", FEATURES))
)
CITED_NAMES = sorted(set(re.findall(r"`(test_\w+)`", FEATURES)))
CITED_DIRS = sorted(set(re.findall(r"`((?:tests|e2e)/[\w/-]+/)`", FEATURES)))


@cache
def defined_in(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, kinds))


def every_test_name() -> frozenset[str]:
    names: set[str] = set()
    for tree in ("tests", "e2e"):
        for path in (ROOT / tree).rglob("test_*.py"):
            names |= defined_in(path)
    return frozenset(names)


def test_the_page_cites_tests() -> None:
    assert len(CITED_TESTS) > 100


@pytest.mark.parametrize(("path", "name"), CITED_TESTS, ids=[f"{p}::{n}" if n else p for p, n in CITED_TESTS])
def test_a_cited_test_file_and_test_exist(path: str, name: str) -> None:
    file = ROOT / path
    assert file.is_file(), f"docs/features.md cites {path}, which does not exist"
    if name:
        assert name in defined_in(file), (
            f"docs/features.md cites {path}::{name}, which {path} does not define"
        )


def test_a_test_cited_by_name_alone_exists_somewhere() -> None:
    known = every_test_name()
    assert [name for name in CITED_NAMES if name not in known] == []


def test_a_cited_directory_exists() -> None:
    assert [d for d in CITED_DIRS if not (ROOT / d).is_dir()] == []
