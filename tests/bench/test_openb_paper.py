"""The FGD paper's published curves (``e2e.bench.openb_paper``): means over the seeds per policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.bench.openb_paper import ARTIFACT_FILE, closest_policy, load_paper, paper_file

HEADER = "workload,sc_policy,tune,seed,total_gpus,0,1,2"


def _write(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "paper.csv"
    path.write_text("\n".join((HEADER, *rows)) + "\n", encoding="utf-8")
    return path


def test_each_policy_is_the_mean_over_its_seeds_in_file_order(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "openb_pod_list_default,01-Random,1.3,42,6212,0.25,1.0,2.0",
        "openb_pod_list_default,01-Random,1.3,43,6212,0.75,1.5,2.5",
        "openb_pod_list_default,06-FGD,1.3,42,6212,0.5,1.25,2.0",
    )

    random, fgd = load_paper(path)

    assert (random.name, random.seeds, random.allocation) == ("Random", 2, (0.5, 1.25, 2.25))
    assert (fgd.name, fgd.seeds) == ("FGD", 1)
    assert fgd.at(2) == 2.0
    assert fgd.at(3) is None


def test_a_row_without_a_number_is_refused_naming_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "openb_pod_list_default,06-FGD,1.3,42,6212,0.5,x,2.0")

    with pytest.raises(ValueError, match=r"paper.csv:2"):
        load_paper(path)


def test_every_strategy_has_a_paper_policy_beside_it() -> None:
    assert closest_policy("Fragmentation") == "FGD"
    assert closest_policy("MostAllocated") == "GpuPacking"
    assert closest_policy("LeastAllocated") == "Random"
    assert closest_policy("Other") is None


def test_the_artifacts_whole_file_gives_the_rows_of_the_workload_asked_for(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "openb_pod_list_default,06-FGD,1.3,42,6212,0.5,1.0,2.0",
        "openb_pod_list_gpushare40,06-FGD,1.3,42,6212,0.25,0.5,1.0",
        "openb_pod_list_gpushare40,06-FGD,1.3,43,6212,0.75,1.5,3.0",
    )

    (fgd,) = load_paper(path, "gpushare40")

    assert (fgd.seeds, fgd.allocation) == (2, (0.5, 1.0, 2.0))
    assert load_paper(path, "multigpu50") == []


def test_a_workloads_own_file_comes_before_the_artifacts_whole_file(tmp_path: Path) -> None:
    assert paper_file(tmp_path, "cpu250") is None
    (tmp_path / ARTIFACT_FILE).write_text(HEADER + "\n", encoding="utf-8")
    assert paper_file(tmp_path, "cpu250") == tmp_path / ARTIFACT_FILE
    (tmp_path / "fgd_paper_allocation_cpu250.csv").write_text(HEADER + "\n", encoding="utf-8")
    assert paper_file(tmp_path, "cpu250") == tmp_path / "fgd_paper_allocation_cpu250.csv"
