"""Koordinator's command lines, through each binary's real parser (apis.goflags, docs/flags.md)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.goflags import level_for_verbosity, log_flag_notes, normalize_argv
from koordlet.__main__ import parse_args as koordlet_args
from operators.__main__ import parse_args as manager_args
from operators.descheduler.__main__ import parse_args as descheduler_args
from operators.descheduler.config import load as load_descheduler_config
from scheduler.__main__ import parse_args as scheduler_args

DATA = Path(__file__).parent.parent / "data"
MANIFEST_ARGS: dict[str, list[str]] = yaml.safe_load((DATA / "koordinator_manifest_args.yaml").read_text())


def _koordlet(argv: list[str]) -> Any:
    return koordlet_args(["--node-name=n1", *argv])


PARSERS: dict[str, Callable[[list[str]], Any]] = {
    "manager": manager_args,
    "scheduler": scheduler_args,
    "descheduler": descheduler_args,
    "koordlet": _koordlet,
}


def _notes(parsed: Any) -> tuple[str, ...]:
    return tuple(parsed.flag_notes)


@pytest.mark.parametrize("binary", sorted(PARSERS))
def test_koordinators_manifest_args_parse_verbatim(binary: str) -> None:
    parsed = PARSERS[binary](MANIFEST_ARGS[binary])
    assert parsed.verbosity == 4


def test_the_manifest_args_are_honoured_where_we_have_the_behaviour() -> None:
    manager = manager_args(MANIFEST_ARGS["manager"])
    assert manager.liveness_port == 8000
    assert not manager.standalone
    assert [note.split()[0] for note in manager.flag_notes] == [
        "--metrics-addr",
        "--leader-election-namespace",
        "--sync-period",
    ]  # --logtostderr=true and --config-namespace=koordinator-system are what we do anyway
    scheduler = scheduler_args(MANIFEST_ARGS["scheduler"])
    assert scheduler.port == 10251
    assert scheduler.config == Path("/config/koord-scheduler.config")
    assert [note.split()[0] for note in scheduler.flag_notes] == ["--authentication-skip-lookup"]
    koordlet = _koordlet(MANIFEST_ARGS["koordlet"])
    assert koordlet.cgroup_root_dir == Path("/host-cgroup")
    assert koordlet.host_fs().path("/sys/fs/cgroup/cpu/kubepods") == Path("/host-cgroup/cpu/kubepods")
    assert koordlet.host_fs().path("/proc/stat") == Path("/proc/stat")
    gates = koordlet.gates
    assert gates.be_cpu_evict
    assert gates.be_memory_evict
    assert gates.cpu_normalization
    assert gates.be_cpu_suppress
    assert gates.group_identity
    assert [note.split()[0] for note in koordlet.flag_notes] == [
        "--runtime-hooks-network",
        "--runtime-hooks-addr",
        "--runtime-hooks-host-endpoint",
    ]


@pytest.mark.parametrize("binary", sorted(PARSERS))
@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["-v=4"], logging.DEBUG),
        (["--v=4"], logging.DEBUG),
        (["-v", "4"], logging.DEBUG),
        (["--v", "2"], 15),
        ([], logging.INFO),
    ],
)
def test_klog_verbosity_sets_the_level(binary: str, argv: list[str], level: int) -> None:
    assert level_for_verbosity(PARSERS[binary](argv).verbosity) == level


@pytest.mark.parametrize("binary", sorted(PARSERS))
def test_an_accepted_flag_logs_one_warning_naming_it(binary: str, caplog: pytest.LogCaptureFixture) -> None:
    parsed = PARSERS[binary](
        ["-log_dir=/var/log", "--log-dir", "/tmp", "--alsologtostderr", "--logtostderr=true"]
    )
    with caplog.at_level(logging.WARNING):
        log_flag_notes(_notes(parsed), logging.getLogger("test"))
    assert [record.getMessage().split()[0] for record in caplog.records] == ["--log-dir", "--alsologtostderr"]
    assert all("no effect" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("binary", sorted(PARSERS))
@pytest.mark.parametrize("flag", ["--no-such-flag=1", "-no-such-flag", "--vv=3", "--kubeconf=x"])
def test_an_unknown_flag_exits_2_naming_it(
    binary: str, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        PARSERS[binary]([flag])
    assert exit_.value.code == 2
    assert flag.lstrip("-").split("=")[0] in capsys.readouterr().err


@pytest.mark.parametrize("binary", sorted(PARSERS))
def test_an_unknown_feature_gate_exits_2_naming_it(binary: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        PARSERS[binary](["-feature-gates=AllAlpha=true,NoSuchGate=true"])
    assert exit_.value.code == 2
    assert "NoSuchGate" in capsys.readouterr().err


def test_go_bool_syntax() -> None:
    assert manager_args(["-enable-leader-election=false"]).standalone
    assert not manager_args(["--enable-leader-election"]).standalone
    assert manager_args(["-standalone"]).standalone
    assert scheduler_args(["-leader-elect"]).leader_elect is True
    assert scheduler_args(["--leader-elect=false"]).leader_elect is False
    assert descheduler_args(["--no-leader-elect"]).leader_elect is False
    assert descheduler_args(["--leader-elect=f"]).leader_elect is False
    assert not _koordlet(["-apply-cpusets=false"]).apply_cpusets
    assert not _koordlet(["--no-apply-cpusets"]).apply_cpusets
    # a Go bool takes its value only after "=": "false" is then a stray argument
    with pytest.raises(SystemExit):
        scheduler_args(["--profiling", "false"])
    # a pflag shorthand bool
    assert "--debug-filters" in scheduler_args(["-f"]).flag_notes[0]


def test_go_value_flags_take_a_space_or_equals() -> None:
    assert _koordlet(["-cgroup-root-dir", "/x"]).cgroup_root_dir == Path("/x")
    assert _koordlet(["-addr=127.0.0.1:9999"]).metrics_port == 9999
    assert _koordlet(["-collect-res-used-interval", "500ms"]).collect_interval_seconds == 0.5
    assert scheduler_args(["-port", "10259"]).port == 10259


def test_normalize_argv_leaves_what_follows_a_double_dash() -> None:
    assert normalize_argv(["-a_b=1", "-v", "--", "-x_y"], ["q"]) == ["--a-b=1", "-v", "--", "-x_y"]
    assert normalize_argv(["-qq", "--qq=false"], ["qq"]) == ["--qq=true", "--qq=false"]


def test_feature_gates_accumulate_over_occurrences() -> None:
    parsed = scheduler_args(
        ["--feature-gates=DisableDefaultQuota=true", "--feature-gates=MultiQuotaTree=true"]
    )
    assert parsed.feature_gates.disable_default_quota
    assert any("MultiQuotaTree" in note for note in parsed.flag_notes)


def test_koordinators_descheduler_configuration_loads_with_profiling_noted() -> None:
    config = load_descheduler_config(DATA / "koordinator_descheduler_config.yaml")
    assert config.enable_profiling
    assert config.enable_contention_profiling
    assert [note.split(":")[0] for note in config.notes()] == ["enableProfiling", "enableContentionProfiling"]
    assert load_descheduler_config("apiVersion: descheduler/v1alpha2\nenableProfiling: false\n").notes() == []


def test_the_namespace_keeps_no_parser_internals() -> None:
    parsed = scheduler_args(["--log_dir=/x", "--feature-gates="])
    assert isinstance(parsed, argparse.Namespace)
    assert not [key for key in vars(parsed) if key.startswith(("accepted_", "_"))]
