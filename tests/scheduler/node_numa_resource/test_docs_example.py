"""The Python example of docs/numa.md "CPU bind policies and cpusets" runs and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[3] / "docs" / "numa.md"


def section() -> str:
    text = PAGE.read_text()
    start = text.index("## CPU bind policies and cpusets")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_the_library_example_prints_its_comments() -> None:
    blocks = re.findall(r"```python\n(.*?)```", section(), re.S)
    assert len(blocks) == 1
    code = blocks[0]
    expected = [line.removeprefix("# ") for line in code.splitlines() if re.match(r"# \w+Allocated ", line)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(PAGE), "exec"), {})
    assert out.getvalue().splitlines() == expected
    assert expected == ["MostAllocated 6-7,14-15", "LeastAllocated 1-2,9-10"]
