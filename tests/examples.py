"""``examples(N)``: a property test's example count in the Hypothesis profile of this run.

``make test`` runs the ``ci`` profile, ``make test-full`` the ``full`` one (``HYPOTHESIS_PROFILE``,
read here and in tests/conftest.py).
"""

from __future__ import annotations

import os

FULL_SCALE = 5


def examples(n: int, *, full: int | None = None) -> int:
    """``n`` in the ``ci`` profile, ``full`` (default ``FULL_SCALE * n``) in ``full``.

    An explicit ``full`` is for the tests whose examples cost the fast tier most (a parser per
    parametrised case, a plugin run in a loop): fewer there, at least as many as before in full."""
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") != "full":
        return n
    return n * FULL_SCALE if full is None else full
