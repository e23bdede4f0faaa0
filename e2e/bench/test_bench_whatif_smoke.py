"""``whatif`` at a tiny size: both cases answer what they are built to (the plain gang fits now
and is then bound; the spine gang fits only after preemption). Figures are never checked."""

from __future__ import annotations

import asyncio

from e2e.bench.whatif import measure


def test_the_fitting_gang_fits_and_binds_and_the_spine_gang_needs_preemption() -> None:
    figures = asyncio.run(measure(16, 512, fill=0.95, repeat=1))  # two spines, ~13 free nodes each

    assert [f.case for f in figures] == ["fits now", "after preemption"]
    fits, spine = figures
    assert fits.answer == "fits now"
    assert fits.bound_ms is not None
    assert spine.answer.startswith("fits after evicting")
