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

from e2e.bench.openb_paper import ARTIFACT_FILE
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
from e2e.bench.openb_trace import NODE_FILE, pod_file
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
        assert figures.ceiling is not None
        assert figures.allocated_percent <= figures.ceiling.max_allocated_percent + 0.001
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
    for name in (*STRATEGIES, "FGD", "GpuPacking", "ceiling", "audit: nothing over-allocated"):
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


def test_another_workload_is_replayed_from_its_own_pod_list_beside_its_paper_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shared = OpenBOptions().data
    (data / NODE_FILE).write_bytes((shared / NODE_FILE).read_bytes())
    pods = (shared / pod_file("default")).read_text(encoding="utf-8").splitlines()
    # The variant: the default trace's header and its first GPU-sharing tasks only.
    header = pods[0].split(",")
    num_gpu, gpu_milli = header.index("num_gpu"), header.index("gpu_milli")
    rows = [r.split(",") for r in pods[1:]]
    sharing = [",".join(r) for r in rows if r[num_gpu] == "1" and int(r[gpu_milli]) < 1000][:200]
    (data / pod_file("gpushare99")).write_text("\n".join([pods[0], *sharing]) + "\n", encoding="utf-8")
    artifact = ["workload,sc_policy,tune,seed,total_gpus," + ",".join(str(i) for i in range(131))]
    for workload, value in (("default", "10.0"), ("gpushare99", "77.5")):
        artifact.append(f"openb_pod_list_{workload},06-FGD,1.3,42,6212," + ",".join([value] * 131))
    (data / ARTIFACT_FILE).write_text("\n".join(artifact) + "\n", encoding="utf-8")
    argv = ["--workload", "gpushare99", "--nodes", str(NODES), "--strategies", "MostAllocated"]

    assert main([*argv, "--data", str(data), "--out", str(tmp_path / "out")]) == 0

    out = capsys.readouterr().out
    assert "200 tasks" in out
    assert "workload gpushare99" in out
    assert "77.50%" in out
    assert "10.00%" not in out
    decoded = json.loads((tmp_path / "out" / "openb.json").read_text())
    assert decoded["figures"][0]["failed_cpu_pods"] == decoded["figures"][0]["cpu_pods"] == 0
    assert main(["--workload", "multigpu99", "--data", str(data), "--out", str(tmp_path / "x")]) == 2
    assert "openb_pod_list_multigpu99.csv" in capsys.readouterr().err
