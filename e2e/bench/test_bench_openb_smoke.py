"""The OpenB replay bench at a tiny size, so that CI keeps it working (a few seconds).

Every strategy replays the trace on 12 of its nodes (inflated to 130% of their 56 GPUs: 88 pods),
so that both marks are reached; only completeness is asserted (figures there and finite, every
bound pod audited, the files written, the CLI's exit code), never which strategy allocates more.
The trace is read from ``$KOORD_OPENB_DATA`` or the shared copy; without it the test is skipped.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

from e2e.bench.openb_replay import (
    MARKS,
    OpenBOptions,
    OpenBReport,
    main,
    render,
    run_benchmark,
    write_outputs,
)
from e2e.bench.openb_run import STRATEGIES
from e2e.bench.openb_trace import NODE_FILE
from e2e.bench.suite import parse_args, run_suite, write_results
from e2e.bench.suite_model import SuiteResults

NODES = 12

pytestmark = pytest.mark.skipif(
    not (OpenBOptions().data / NODE_FILE).is_file(),
    reason=f"the openb trace is not in {OpenBOptions().data} (set KOORD_OPENB_DATA)",
)


def test_openb_replay_reaches_both_marks_with_every_strategy_and_audits_every_bound_pod(
    tmp_path: Path,
) -> None:
    report = asyncio.run(run_benchmark(OpenBOptions(nodes=NODES, out=tmp_path), progress=None))
    paths = write_outputs(report, tmp_path)

    assert (report.nodes, report.gpus) == (NODES, 56)
    assert [f.strategy for f in report.figures] == list(STRATEGIES)
    for figures, run in zip(report.figures, report.runs, strict=True):
        assert run.complete
        assert figures.gpu_pods + figures.cpu_pods == report.submissions
        for mark in MARKS:
            value = figures.allocation_at[mark]
            assert value is not None, (figures.strategy, mark)
            assert math.isfinite(value)
            assert 0 < value <= 100
        assert math.isfinite(figures.pods_per_second)
        assert figures.pods_per_second > 0
        assert run.audit is not None
        assert run.audit.violations == []
        bound = report.submissions - figures.failed_gpu_pods - figures.failed_cpu_pods
        assert figures.audited_pods == run.audit.pods == bound > 0
        assert len(run.failures) == figures.failed_gpu_pods + figures.failed_cpu_pods
        assert [p.mark for p in run.curve] == list(range(len(run.curve)))
    assert {p.name for p in report.paper} >= {"FGD", "BestFit", "GpuPacking", "Random"}
    assert [p.name for p in paths] == ["openb.png", "openb.json"]
    assert (tmp_path / "openb.png").read_bytes().startswith(b"\x89PNG")
    decoded = OpenBReport.model_validate(json.loads((tmp_path / "openb.json").read_text()))
    assert decoded.figures == report.figures
    table = render(report)
    for name in (*STRATEGIES, "FGD", "GpuPacking", "audit: nothing over-allocated"):
        assert name in table


def test_openb_replay_command_line_writes_its_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--nodes", str(NODES), "--limit", "30", "--strategies", "MostAllocated", "--out", str(tmp_path)]
    argv += ["--profile", "deviceshare-only"]

    assert main(argv) == 0

    out = capsys.readouterr().out
    assert "first 30 pods replayed, DeviceShare the only score plugin" in out
    assert "MostAllocated" in out
    decoded = json.loads((tmp_path / "openb.json").read_text())
    assert decoded["figures"][0]["gpu_pods"] + decoded["figures"][0]["cpu_pods"] == 30
    assert decoded["runs"][0]["profile"] == "deviceshare-only"


def test_the_suite_runs_openb_with_only_and_sets_each_strategy_beside_its_paper_policy(
    tmp_path: Path,
) -> None:
    opts = parse_args(["--only", "openb", "--openb-nodes", str(NODES), "--out", str(tmp_path)])

    results = asyncio.run(run_suite(opts, "smoke"))
    write_results(results, tmp_path)

    assert results.errors == []
    allocation = [f for f in results.figures if f.metric.startswith("GPU allocation")]
    assert [f.size.split(",")[0] for f in allocation] == [
        f"{s} vs {p}"
        for s, p in (("Fragmentation", "FGD"), ("MostAllocated", "GpuPacking"), ("LeastAllocated", "Random"))
        for _ in MARKS
    ]
    for figure in allocation:
        assert figure.ours is not None
        assert figure.baseline is not None
        assert math.isfinite(figure.ours)
    decoded = SuiteResults.model_validate(json.loads((tmp_path / "results.json").read_text()))
    assert sorted(decoded.plots) == ["openb.png", "openb/openb.png"]
    assert (tmp_path / "openb" / "openb.png").read_bytes().startswith(b"\x89PNG")
    assert decoded.details["openb"]["nodes"] == NODES
