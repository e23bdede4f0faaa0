"""Which test tier this run is: ``fast`` (`make test`, what CI runs) or ``full`` (`make test-full`).

Tests that keep a smoke in the fast tier and a full-size run in the full one read their sizes
through ``sized(fast, full)``; tests that belong to the full tier alone are marked
``@pytest.mark.full`` and deselected by `make test` (``-m "not full"``). A plain ``pytest`` run
outside make is the fast tier.
"""

from __future__ import annotations

import os
from typing import Literal, TypeVar

T = TypeVar("T")

Tier = Literal["fast", "full"]


def tier() -> Tier:
    return "full" if os.environ.get("KOORD_TEST_TIER") == "full" else "fast"


def sized(fast: T, full: T) -> T:
    """``fast`` in the fast tier, ``full`` in the full one."""
    return full if tier() == "full" else fast
