"""The preemption benchmark's report over repeated runs (``--repeat``): each scheduler's figures
are those of its run of median time to run, with the spread of the runs beside them."""

from __future__ import annotations

import json

import pytest

from e2e.bench.preemption import KOORD, KUBE, Report, Row, parse_args, render


def _run(scheduler: str, attempt: int, seconds: float | None, victims: int = 6, error: str = "") -> Row:
    return Row(
        "v1.7",
        scheduler,
        nodes=8,
        members=2,
        bound=2 if seconds is not None else 0,
        victims=victims,
        seconds_to_run=seconds,
        attempt=attempt,
        error=error,
    )


def test_each_scheduler_is_reported_by_its_run_of_median_time_to_run() -> None:
    report = Report(nodes=8, timeout=60.0)
    report.rows = [
        _run(KOORD, 0, 0.77),
        _run(KUBE, 0, 0.89),
        _run(KOORD, 1, 0.41, victims=5),
        _run(KUBE, 1, 0.18),
        _run(KOORD, 2, 0.43),
        _run(KUBE, 2, 0.22),
    ]

    koord, kube = report.row("v1.7", KOORD), report.row("v1.7", KUBE)

    assert koord is not None
    assert (koord.attempt, koord.seconds_to_run) == (2, 0.43)
    assert kube is not None
    assert (kube.attempt, kube.seconds_to_run) == (2, 0.22)
    table = render(report)
    koord_line = next(line for line in table.splitlines() if line.startswith(f"v1.7       {KOORD}"))
    assert "0.43s (0.41s-0.77s of 3)" in koord_line
    assert " 5-6 " in koord_line  # the runs disagree on the victims
    assert "3 runs per scheduler and scenario" in table
    decoded = json.loads(render(report, "json"))
    assert [r["attempt"] for r in decoded["rows"]] == [0, 0, 1, 1, 2, 2]


def test_a_job_that_never_ran_or_a_run_that_failed_counts_as_the_slowest() -> None:
    report = Report(nodes=8, timeout=60.0)
    report.rows = [
        _run(KOORD, 0, None),
        _run(KOORD, 1, 5.0),
        _run(KOORD, 2, None, error="the cluster went away"),
        _run(KOORD, 3, 0.5),
    ]

    median = report.row("v1.7", KOORD)

    assert median is not None
    assert median.seconds_to_run == 5.0
    assert "5.00s (0.50s-error of 4)" in render(report)


def test_one_run_reads_as_before() -> None:
    report = Report(nodes=8, timeout=60.0)
    report.rows = [_run(KOORD, 0, 0.41), _run(KUBE, 0, 0.2)]

    table = render(report)

    assert "0.41s" in table
    assert "(0.41s" not in table
    assert "runs per scheduler" not in table


def test_repeat_is_a_flag_and_must_be_positive() -> None:
    opts, _ = parse_args(["--repeat", "3"])
    assert opts.repeat == 3
    assert parse_args([])[0].repeat == 1
    with pytest.raises(SystemExit):
        parse_args(["--repeat", "0"])
