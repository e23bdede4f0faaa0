"""Koordinator's NRI flags, as koordlet's command line takes them."""

from __future__ import annotations

from pathlib import Path

from koordlet.__main__ import parse_args


def test_the_defaults_are_koordinators() -> None:
    config = parse_args(["--node-name=n1"])
    assert config.enable_nri_runtime_hook
    assert config.nri.socket_path == Path("/var/run/nri/nri.sock")
    assert (config.nri.plugin_name, config.nri.plugin_index) == ("koordlet_nri", "00")
    assert (config.nri.connect_timeout_seconds, config.nri.backoff_seconds) == (6.0, 1.0)
    assert not config.disable_unset_cpu_quota


def test_the_socket_path_is_under_the_var_run_root_as_go_joins_paths() -> None:
    config = parse_args(
        [
            "--node-name=n1",
            "-var-run-root-dir=/host-nri/",
            "-runtime-hooks-nri-socket-path=/nri.sock",
            "-runtime-hooks-nri-backoff-cap=30s",
            "-runtime-hooks-nri-plugin-index=05",
            "-enable-nri-runtime-hook=false",
            "-disable-unset-cpu-quota",
        ]
    )
    assert config.nri.socket_path == Path("/host-nri/nri.sock")
    assert config.nri.backoff_cap_seconds == 30.0
    assert config.nri.plugin_index == "05"
    assert not config.enable_nri_runtime_hook
    assert config.disable_unset_cpu_quota
    assert not [note for note in config.flag_notes if "nri" in note or "var-run" in note]


def test_the_reconciles_cpu_qos_and_batch_resources_can_be_switched_off_for_nri_alone() -> None:
    default = parse_args(["--node-name=n1"])
    assert (default.apply_cpu_qos, default.apply_batch_resources) == (True, True)
    config = parse_args(["--node-name=n1", "--apply-cpu-qos=false", "--no-apply-batch-resources"])
    assert (config.apply_cpu_qos, config.apply_batch_resources) == (False, False)
