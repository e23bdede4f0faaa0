"""``examples(N)``: a property test's example count in the Hypothesis profile of this run.

``make test`` runs the ``ci`` profile, ``make test-full`` the ``full`` one (``HYPOTHESIS_PROFILE``,
read here and in tests/conftest.py).
"""

from __future__ import annotations

import os

FULL_SCALE = 5


def examples(n: int) -> int:
    """``n`` in the ``ci`` profile, ``FULL_SCALE * n`` in ``full``."""
    return n * FULL_SCALE if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "full" else n
