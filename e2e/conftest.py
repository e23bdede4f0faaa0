"""The e2e session: one real control plane (kube-apiserver, etcd, kube-controller-manager, KWOK).

The session starts the cluster ``e2e`` (``.cluster/e2e/``; ``e2e-gwN`` for xdist worker N) from
``e2e/clusters/e2e.yaml``, installs the CRDs and the fake nodes, and stops it at the end (set
``KOORD_E2E_KEEP=1`` to keep it for debugging). The e2e tests never skip: missing tools are a
failure that says to run `make tools`. The API server's version is printed in the summary so a log
shows the server was real.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

from e2e.cluster.__main__ import apply_description, install_crds, wait_nodes_ready
from e2e.cluster.controlplane import KUBECTL_CALLS, ControlPlane, repo_root
from e2e.components import koord_manager, wait_for_admission
from e2e.scheduler_process import Scheduler, install_scheduler_rbac, start_scheduler
from scheduler.simulator import description as desc

E2E_DESCRIPTION = repo_root() / "e2e" / "clusters" / "e2e.yaml"
# Under `pytest -n N` (`make e2e`) each worker is a session of its own with its own control plane:
# ``e2e-gw0``, ``e2e-gw1``, ... and webhook ports 100 apart. This runs before any test module is
# imported, so the modules that name a cluster or port of their own (``<cluster>-helm``, the
# session's port + 1, ...) derive it from the worker's.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    os.environ["KOORD_E2E_CLUSTER"] = f"{os.environ.get('KOORD_E2E_CLUSTER', 'e2e')}-{_WORKER}"
    _BASE_PORT = int(os.environ.get("KOORD_E2E_WEBHOOK_PORT", "19443"))
    os.environ["KOORD_E2E_WEBHOOK_PORT"] = str(_BASE_PORT + 100 * int(_WORKER.removeprefix("gw")))
# `make up`'s koord-manager listens on 9443. Both can be moved so that two e2e sessions (two
# clones, or a developer beside CI) do not collide.
E2E_CLUSTER = os.environ.get("KOORD_E2E_CLUSTER", "e2e")
E2E_WEBHOOK_PORT = int(os.environ.get("KOORD_E2E_WEBHOOK_PORT", "19443"))
_SERVER_VERSION = pytest.StashKey[str]()
_WORKER_VERSIONS = pytest.StashKey[list[str]]()


# Seconds per file in `make test` (2-core machine, 2 workers; the fresh-clone run of 2026-12-05, the
# real node with its image cached): the slowest files are handed out first, so that no worker is
# left with a long file at the end while the other idles.
SLOW_FILES = {
    "test_real_node.py": 170,
    "test_scheduler.py": 95,
    "test_examples.py": 63,
    "test_elasticquota_scheduling.py": 59,
    "test_upstream_parity.py": 53,
    "test_descheduler_migration.py": 51,
    "test_chaos.py": 50,
    "test_crds.py": 45,
    "test_bench_preemption_smoke.py": 43,
    "test_reservation.py": 33,
    "test_helm_install.py": 32,
    "test_koordlet.py": 31,
    "test_descheduler_lownodeload.py": 27,
    "test_descheduler_defrag.py": 26,
    "test_bench_affinity_shapes_smoke.py": 26,
    "test_job_preemption.py": 24,
}


def real_node_file(nodeid: str) -> bool:
    return Path(nodeid.split("::", 1)[0]).name.startswith("test_real_node")


class _RealNodeFilesTogether(LoadFileScheduling):  # type: ignore[misc]
    """``--dist loadfile``, except that every ``test_real_node*.py`` file is one work unit: the host
    has one real node (its bridge, ports and cgroup root), so those files run one after the other
    on one worker, each starting and stopping the node of its module."""

    def _split_scope(self, nodeid: str) -> str:
        return "test_real_node*.py" if real_node_file(nodeid) else super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadFileScheduling | None:
    if config.getoption("dist") != "loadfile":
        return None
    return _RealNodeFilesTogether(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    e2e_root = Path(__file__).parent
    for item in items:
        if e2e_root in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
    # A stable sort: the tests of a file keep their order, and files stay together.
    items.sort(key=lambda item: -SLOW_FILES.get(Path(str(item.fspath)).name, 0))


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
        # Tests delete their namespaces without waiting for the namespace controller
        # (ControlPlane.delete_namespace); every one of them must be gone by now.
        left = cp.wait_namespaces_gone()
        assert not left, f"namespaces deleted by the tests are still there: {left} (a finalizer left?)"
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


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its API server's version to the controller, which prints them all."""
    version = session.config.stash.get(_SERVER_VERSION, None)
    workeroutput: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        if version:
            workeroutput["e2e_server_version"] = f"{E2E_CLUSTER}: {version.strip()}"
        workeroutput["e2e_kubectl_calls"] = {verb: list(v) for verb, v in KUBECTL_CALLS.by_verb.items()}
        workeroutput["e2e_kubectl_sites"] = {site: list(v) for site, v in KUBECTL_CALLS.by_site.items()}


def pytest_testnodedown(node: Any, error: object) -> None:
    output = getattr(node, "workeroutput", {})
    version = output.get("e2e_server_version")
    if version:
        versions = node.config.stash.setdefault(_WORKER_VERSIONS, [])
        versions.append(version)
    for verb, (count, seconds) in output.get("e2e_kubectl_calls", {}).items():
        KUBECTL_CALLS.record_many(verb, count, seconds)
    for site, (count, seconds) in output.get("e2e_kubectl_sites", {}).items():
        KUBECTL_CALLS.record_site(site, count, seconds)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    version = config.stash.get(_SERVER_VERSION, None)
    workers: list[str] = config.stash.get(_WORKER_VERSIONS, [])
    lines = [version.strip()] if version else sorted(workers)
    if lines:
        terminalreporter.section("e2e control plane")
        for line in lines:
            terminalreporter.write_line(line)
    if KUBECTL_CALLS.by_verb:
        calls = sorted(KUBECTL_CALLS.by_verb.items(), key=lambda kv: -kv[1][1])
        count = sum(c for c, _ in KUBECTL_CALLS.by_verb.values())
        seconds = sum(t for _, t in KUBECTL_CALLS.by_verb.values())
        terminalreporter.write_line(
            f"kubectl: {count} calls, {seconds:.0f} s in all ("
            + ", ".join(f"{verb} {c} / {t:.0f} s" for verb, (c, t) in calls[:8])
            + ")"
        )
        sites = sorted(KUBECTL_CALLS.by_site.items(), key=lambda kv: -kv[1][1])[:12]
        terminalreporter.write_line(
            "kubectl's busiest callers: " + ", ".join(f"{s} {c} / {t:.0f} s" for s, (c, t) in sites)
        )
