"""The gang-interference benchmark at a tiny size, in process, so that CI keeps it working.

Only completeness is asserted (both runs finished, every plain pod and every gang member bound,
every row and figure present); the figures themselves are never checked: they depend on the machine.
"""

from __future__ import annotations

import asyncio
import json

from e2e.bench.gang_interference import Options, render, run_benchmark

NODES = 64
PODS = 100
RATE = 200.0
"""Plain pods a second: the stream lasts half a second and the gangs come 0.17 and 0.33 s into
it. At 1,000 a second they came in its first tenth, and the ratio was None once: the gangs bound
in 40-56 ms, and the plain-only run, in a worker that had run the e2e files before, bound nothing
in those windows (a stall of 127 ms from 0.033 s)."""
GANGS = 2
GANG_SIZE = 16


def test_gang_interference_harness_binds_every_plain_pod_and_gang_member() -> None:
    opts = Options(nodes=NODES, pods=PODS, rate=RATE, gangs=GANGS, gang_size=GANG_SIZE, stall_timeout=30.0)

    report = asyncio.run(run_benchmark(opts))

    assert report.errors == []
    alone, mixed = report.runs
    assert (alone.plain_bound, alone.gang_members) == (PODS, 0)
    assert (mixed.plain_bound, mixed.gang_members_bound) == (PODS, GANGS * GANG_SIZE)
    assert [(g.name, g.bound) for g in mixed.gangs] == [(f"gang-{k}", GANG_SIZE) for k in range(GANGS)]
    assert len(mixed.solver_calls) >= GANGS
    assert report.ratio is not None
    table = render(report)
    assert "plain + 2x16 gangs" in table
    assert "while gangs placed" in table
    decoded = json.loads(render(report, "json"))
    assert [r["run"] for r in decoded["runs"]] == ["plain only", "plain + 2x16 gangs"]
