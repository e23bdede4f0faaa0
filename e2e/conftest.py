"""The e2e session: one real control plane (kube-apiserver, etcd, kube-controller-manager, KWOK).

The session starts the cluster ``e2e`` (``.cluster/e2e/``) from ``e2e/clusters/e2e.yaml``, installs
the CRDs and the fake nodes, and stops it at the end (set ``KOORD_E2E_KEEP=1`` to keep it for
debugging). The e2e tests never skip: missing tools are a failure that says to run `make tools`.
The API server's version is printed in the summary so a log shows the server was real.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.cluster.__main__ import apply_description, install_crds, wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.components import koord_manager, wait_for_admission
from e2e.scheduler_process import Scheduler, install_scheduler_rbac, start_scheduler
from scheduler.simulator import description as desc

E2E_DESCRIPTION = repo_root() / "e2e" / "clusters" / "e2e.yaml"
# `make up`'s koord-manager listens on 9443. Both can be moved so that two e2e sessions (two
# clones, or a developer beside CI) do not collide.
E2E_CLUSTER = os.environ.get("KOORD_E2E_CLUSTER", "e2e")
E2E_WEBHOOK_PORT = int(os.environ.get("KOORD_E2E_WEBHOOK_PORT", "19443"))
_SERVER_VERSION = pytest.StashKey[str]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    e2e_root = Path(__file__).parent
    for item in items:
        if e2e_root in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def cluster_description() -> desc.ClusterDescription:
    return desc.load(E2E_DESCRIPTION)


@pytest.fixture(scope="session")
def control_plane(
    request: pytest.FixtureRequest, cluster_description: desc.ClusterDescription
) -> Iterator[ControlPlane]:
    cp = ControlPlane(name=E2E_CLUSTER)
    manager = koord_manager(cp, webhook_port=E2E_WEBHOOK_PORT)
    cp.start()
    try:
        install_crds(cp)
        apply_description(cp, cluster_description)
        wait_nodes_ready(cp)
        cp.wait_service_account("default")
        manager.start()
        wait_for_admission(cp, manager)
        request.config.stash[_SERVER_VERSION] = cp.kubectl("version")
        yield cp
    finally:
        if os.environ.get("KOORD_E2E_KEEP") != "1":
            manager.stop()
            cp.stop()


@pytest.fixture(scope="session")
def scheduler_kubeconfig(control_plane: ControlPlane) -> Path:
    return install_scheduler_rbac(control_plane)


@pytest.fixture(scope="session")
def _scheduler_process(control_plane: ControlPlane, scheduler_kubeconfig: Path) -> Iterator[Scheduler]:
    running = start_scheduler(control_plane, scheduler_kubeconfig, "koord-scheduler")
    yield running
    running.component.stop()


@pytest.fixture
def scheduler(
    control_plane: ControlPlane, scheduler_kubeconfig: Path, _scheduler_process: Scheduler
) -> Scheduler:
    """koord-scheduler running (restarted if an earlier test killed it) and ready."""
    _scheduler_process.ensure_running(control_plane, scheduler_kubeconfig)
    return _scheduler_process


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    version = config.stash.get(_SERVER_VERSION, None)
    if version:
        terminalreporter.section("e2e control plane")
        terminalreporter.write_line(version.strip())
