"""``client_connection_ahead``: the configuration's clientConnection, read alone, equals the one the
whole load resolves, and is read only where the scheduler runs without leader election."""

from __future__ import annotations

from pathlib import Path

from scheduler.__main__ import load, parse_args
from scheduler.first_lists import client_connection_ahead

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {elect}
clientConnection:
  kubeconfig: /k/config
  qps: 1000
  burst: 2000
profiles:
- schedulerName: bench
"""


def written(tmp_path: Path, elect: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.format(elect=elect))
    return path


def test_without_leader_election_it_is_the_whole_configurations_connection(tmp_path: Path) -> None:
    path = written(tmp_path, "false")
    ahead = client_connection_ahead(path, None)
    assert ahead is not None
    assert ahead == load(parse_args(["--config", str(path)])).client_connection
    assert (ahead.kubeconfig, ahead.qps, ahead.burst) == ("/k/config", 1000.0, 2000)


def test_the_flag_decides_over_the_file(tmp_path: Path) -> None:
    assert client_connection_ahead(written(tmp_path, "true"), False) is not None
    assert client_connection_ahead(written(tmp_path, "false"), True) is None


def test_with_leader_election_or_an_unreadable_file_nothing_is_read_ahead(tmp_path: Path) -> None:
    assert client_connection_ahead(written(tmp_path, "true"), None) is None
    assert client_connection_ahead(None, None) is None  # the shipped default elects
    assert client_connection_ahead(tmp_path / "missing.yaml", False) is None
    bad = tmp_path / "bad.yaml"
    bad.write_text("clientConnection: {qps: fast}\n")
    assert client_connection_ahead(bad, False) is None
