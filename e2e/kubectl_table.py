"""Read ``kubectl get``'s table output the way a person does: by column, with empty cells kept."""

from __future__ import annotations

import re

__all__ = ["header", "rows"]


def header(output: str) -> list[str]:
    """The column names of a ``kubectl get`` table."""
    return output.splitlines()[0].split()


def rows(output: str) -> dict[str, dict[str, str]]:
    """Each row as column -> cell, keyed by its NAME; cells are cut at the header's offsets, so an
    empty cell reads ``""`` (kubectl pads columns to the header, and cells never hold spaces)."""
    lines = output.splitlines()
    spans = [m.start() for m in re.finditer(r"\S+", lines[0])]
    names = lines[0].split()
    ends = [*spans[1:], None]
    table = {}
    for line in lines[1:]:
        row = {n: line[s:e].strip() for n, s, e in zip(names, spans, ends, strict=True)}
        table[row["NAME"]] = row
    return table
