"""docs/architecture.md walks the code by path and name: every path it cites exists, every
``path.py`` (``Name``) pair names something the file defines, and every contract it names is in
``.importlinter``, so the page cannot drift from the tree it describes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "architecture.md").read_text()
PATHS = sorted(set(re.findall(r"`?((?:apis|scheduler|operators|koordlet)/[\w/.-]*)`?", PAGE)))
DEFINED = sorted(
    set(re.findall(r"`((?:apis|scheduler|operators|koordlet)/[\w/.-]+\.py)`(?: \(|, )`(\w+)`", PAGE))
)
CONTRACTS = sorted(
    {
        name
        for group in re.findall(r"\(([^()]*)\)", PAGE)
        for name in re.findall(r"`([a-z]+(?:-[a-z]+)+)`", group)
    }
)


def test_the_page_cites_paths_names_and_contracts() -> None:
    assert len(PATHS) > 40
    assert len(DEFINED) > 8
    assert len(CONTRACTS) > 8


@pytest.mark.parametrize("path", PATHS)
def test_a_cited_path_exists(path: str) -> None:
    assert (ROOT / path.rstrip(".")).exists(), f"docs/architecture.md cites {path}, which does not exist"


@pytest.mark.parametrize(("path", "name"), DEFINED, ids=[f"{p}::{n}" for p, n in DEFINED])
def test_a_cited_name_is_defined_in_its_file(path: str, name: str) -> None:
    tree = ast.parse((ROOT / path).read_text())
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    assert name in {node.name for node in ast.walk(tree) if isinstance(node, kinds)}, (
        f"docs/architecture.md says {path} defines {name}"
    )


def test_every_cited_contract_is_in_the_import_linter_configuration() -> None:
    declared = set(
        re.findall(r"^\[importlinter:contract:([\w-]+)\]", (ROOT / ".importlinter").read_text(), re.M)
    )
    assert [c for c in CONTRACTS if c not in declared] == []
