"""Hypothesis profiles for the two tiers.

``ci`` (the default, what ``make test`` runs) keeps each property test's own example count;
``full`` (``make test-full``, or ``HYPOTHESIS_PROFILE=full``) runs five times as many. Tests that
set ``max_examples`` write it as ``examples(N)`` so that both tiers scale from the same figure.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from tests.examples import FULL_SCALE

settings.register_profile(
    "ci",
    deadline=None,  # a loaded 2-core machine makes per-example deadlines flaky; wall time is not a guard
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "full",
    parent=settings.get_profile("ci"),
    max_examples=settings.get_profile("ci").max_examples * FULL_SCALE,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
