"""koord-manager's life cycle on a cluster of its own: deleting what it manages does not wait for it,
it exits promptly on SIGTERM, with or without an API server, and ``python -m e2e.cluster down``
(`make down`) leaves no process behind and says how each one stopped.

The cluster is not the session's: the test ends by taking it down, API server included.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster import processes
from e2e.cluster.__main__ import install_crds
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.components import _CHILDREN, koord_manager, wait_for_admission
from e2e.workloads import get_object, wait_for
from operators.config import ManagerConfig

# The session's names (e2e/conftest.py), suffixed: this cluster runs beside the session's.
E2E_CLUSTER = os.environ.get("KOORD_E2E_CLUSTER", "e2e")
E2E_WEBHOOK_PORT = int(os.environ.get("KOORD_E2E_WEBHOOK_PORT", "19443"))
SHUTDOWN_BOUND = ManagerConfig().shutdown_timeout_seconds
# Python's start-up and the last log lines: what an exit takes beyond the bound it sets itself.
MARGIN = 3.0
PODGROUP = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: lifecycle, namespace: default}
spec: {minMember: 2}
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[ControlPlane]:
    cp = ControlPlane(name=f"{E2E_CLUSTER}-lifecycle")
    cp.start()
    try:
        install_crds(cp)
        cp.wait_service_account("default")
        yield cp
    finally:
        cp.stop(quiet=True)


def _pids(cp: ControlPlane) -> dict[str, int]:
    """Every process of the cluster, by name: kwokctl's daemons and the components."""
    found = {}
    for pid_dir in (cp.kwok_workdir / "clusters" / cp.name / "pids", cp.state_dir):
        for pid_file in pid_dir.glob("*.pid") if pid_dir.exists() else []:
            found[pid_file.stem] = int(pid_file.read_text().strip())
    return found


def _podgroup(cp: ControlPlane) -> dict[str, Any]:
    return get_object(cp, "podgroup", "lifecycle")


def _reap(pid: int) -> None:
    """Reap a component this process started and another one stopped (no zombie left)."""
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        child.wait(timeout=10)


def test_a_podgroup_is_deleted_at_once_with_koord_manager_stopped(cluster: ControlPlane) -> None:
    manager = koord_manager(cluster, webhook_port=E2E_WEBHOOK_PORT + 1)
    manager.start()
    try:
        wait_for_admission(cluster, manager)
        cluster.kubectl("apply", "-f", "-", input=PODGROUP)
        wait_for(lambda: _podgroup(cluster).get("status", {}).get("phase"), 30, "the PodGroup's phase")
        assert not _podgroup(cluster)["metadata"].get("finalizers")  # its status timer runs without one
    finally:
        stopped = manager.stop()
    print(stopped)
    # With the API server up, SIGTERM is enough, well within the bound.
    assert stopped.outcome == "stopped", stopped
    assert stopped.seconds < SHUTDOWN_BOUND + MARGIN, stopped

    began = time.monotonic()
    cluster.kubectl("delete", "podgroup", "lifecycle", "-n", "default", "--wait=true", "--timeout=20s")
    assert time.monotonic() - began < 5.0
    assert cluster.read("podgroup", "lifecycle") is None


def test_down_stops_every_process_in_bounded_time_with_the_api_server_gone(cluster: ControlPlane) -> None:
    manager = koord_manager(cluster, webhook_port=E2E_WEBHOOK_PORT + 1)
    manager.start()
    wait_for_admission(cluster, manager)
    manager_pid = manager.pid()
    assert manager_pid is not None
    before = _pids(cluster)
    assert {"kube-apiserver", "etcd", "koord-manager"} <= set(before), before

    # The API server dies first, as when a developer's cluster crashed or was torn down by hand:
    # koord-manager's last peering and webhook writes can no longer succeed.
    os.kill(before["kube-apiserver"], signal.SIGKILL)
    time.sleep(1.0)

    began = time.monotonic()
    down = subprocess.run(
        [sys.executable, "-m", "e2e.cluster", "down", "--name", cluster.name],
        cwd=repo_root(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - began
    _reap(manager_pid)
    print(down.stderr)
    assert down.returncode == 0, down.stderr
    said = [line for line in down.stderr.splitlines() if "koord-manager" in line]
    assert said, down.stderr
    assert said[0].startswith(f"[cluster] stopped koord-manager (pid {manager_pid}) after "), down.stderr
    seconds = float(said[0].rsplit("after ", 1)[1].split(" s")[0])
    assert seconds < SHUTDOWN_BOUND + MARGIN, said[0]
    assert f"cluster {cluster.name} stopped" in down.stderr
    left = {name: pid for name, pid in before.items() if processes.alive(pid)}
    assert not left, f"still running after down: {left}"
    assert took < SHUTDOWN_BOUND + MARGIN + 15.0, f"down took {took:.1f}s"
    assert not Path(cluster.state_dir / "koord-manager.pid").exists()


IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"
)


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        pytest.param("import time; print(1, flush=True); time.sleep(60)", "stopped", id="exits-on-sigterm"),
        pytest.param(IGNORES_SIGTERM, "killed", id="ignores-sigterm"),
    ],
)
def test_stop_says_whether_sigterm_was_enough(code: str, outcome: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert child.stdout is not None
    child.stdout.readline()  # its signal handler is in place
    stopped = processes.stop_group("sleeper", child.pid, timeout=1.0, child=child)
    child.stdout.close()
    assert stopped.outcome == outcome
    assert child.returncode is not None  # reaped
    assert str(stopped).startswith(f"{outcome} sleeper (pid {child.pid}) after ")
    assert stopped.seconds < 1.0 if outcome == "stopped" else 1.0 <= stopped.seconds < 3.0
