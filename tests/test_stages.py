"""`make test`'s stage runner (e2e/stages.py): each stage timed, side-by-side stages, and a failure
that stops the run with the table still printed."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from e2e import stages


@pytest.fixture
def fake_make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `make` that logs each target it runs and fails the target named ``broken``."""
    log = tmp_path / "ran.txt"
    script = tmp_path / "make"
    script.write_text(
        "#!/bin/sh\n"
        f'target="$2"; echo "$target" >> {log}; echo "output of $target"\n'
        '[ "$target" = broken ] && exit 3\nexit 0\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(stages, "REPORTS", tmp_path / "reports")
    return script


def test_every_stage_runs_in_order_and_is_timed(
    fake_make: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert stages.run(["lint+unit", "e2e"], make=str(fake_make)) == 0
    ran = (tmp_path / "ran.txt").read_text().split()
    assert sorted(ran[:2]) == ["lint", "unit"]
    assert ran[2] == "e2e"
    report = stages.StageReport.model_validate(json.loads((tmp_path / "reports" / "stages.json").read_text()))
    assert [(s.stage, s.status) for s in report.stages] == [("lint+unit", 0), ("e2e", 0)]
    out = capfd.readouterr().out  # the live target writes to the process's own stdout
    assert "output of lint" in out
    assert "output of unit" in out
    assert "===== stage times =====" in out
    assert "total" in out


def test_a_failed_stage_stops_the_run_with_its_status_and_the_table(
    fake_make: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert stages.run(["lint", "broken", "e2e"], make=str(fake_make)) == 3
    assert (tmp_path / "ran.txt").read_text().split() == ["lint", "broken"]
    assert "broken" in capsys.readouterr().out.split("===== stage times =====")[1]
    report = stages.StageReport.model_validate(json.loads((tmp_path / "reports" / "stages.json").read_text()))
    assert [(s.stage, s.status) for s in report.stages] == [("lint", 0), ("broken", 3)]


def test_a_failure_beside_another_stage_fails_the_stage(fake_make: Path) -> None:
    assert stages.run(["lint+broken"], make=str(fake_make)) == 3
