"""The quota-tree benchmark at its smallest size, so that CI keeps it working: every pod bound in
both runs, with and without quotas. Timings are never checked."""

from __future__ import annotations

import asyncio

from e2e.bench.quota_tree import render, run


def test_quota_tree_harness_binds_every_pod_and_reports_both_runs() -> None:
    result = asyncio.run(run([2, 3, 2], pods_per_leaf=2, nodes=4, changes=5))
    assert (result.quotas, result.leaves, result.pods) == (2 + 6 + 12, 12, 24)
    assert result.unbound == 0
    table = render(result)
    assert "without quotas" in table
    assert "with quotas" in table
