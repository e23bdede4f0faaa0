"""The GPU fragmentation benchmark at a tiny size, so that CI keeps it working.

Only completeness is asserted (every strategy replayed every arrival, a sample after each one past
the warm-up, figures in range, every row rendered); which strategy fragments less is never checked.
"""

from __future__ import annotations

import asyncio
import json

from e2e.bench.gpu_fragmentation import STRATEGIES, Options, render, run_benchmark

NODES = 4
PODS = 60
WARMUP = 0.25


def test_gpu_fragmentation_harness_replays_the_trace_with_every_strategy() -> None:
    report = asyncio.run(run_benchmark(Options(nodes=NODES, pods=PODS, load=1.2, warmup=WARMUP)))

    assert [r.strategy for r in report.runs] == list(STRATEGIES)
    for run in report.runs:
        assert run.arrivals == PODS
        assert 0 <= run.failed <= PODS
        assert len(run.unallocatable) == len(run.free) == len(run.whole_nodes) == PODS - int(PODS * WARMUP)
        assert all(0.0 <= u <= f <= 1.0 for u, f in zip(run.unallocatable, run.free, strict=True))
        assert all(0 <= w <= NODES for w in run.whole_nodes)
    table = render(report)
    for strategy in STRATEGIES:
        assert strategy in table
    assert "whole 8-GPU nodes" in table
    decoded = json.loads(render(report, "json"))
    assert [r["strategy"] for r in decoded["runs"]] == list(STRATEGIES)
