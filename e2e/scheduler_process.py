"""koord-scheduler for the e2e suite: a real process authenticated as the chart's ServiceAccount."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.cluster.credentials import service_account_kubeconfig
from e2e.components import LocalComponent, koord_scheduler, wait_until_ready

__all__ = ["CONFIG", "Scheduler", "install_scheduler_rbac", "start_scheduler"]

CHART = repo_root() / "charts" / "koordinator-py"
NAMESPACE = "koordinator-system"
# Lease timings shorter than the defaults (15s/10s/2s) so that a takeover happens within seconds,
# yet long enough to ride out most API server restarts (it answers 403 for a moment while its RBAC
# cache fills); a leader that cannot renew in time steps down and campaigns again in the same process.
CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 8s
  renewDeadline: 6s
  retryPeriod: 1s
  resourceName: koord-scheduler
  resourceNamespace: koordinator-system
clientConnection:
  qps: 500
  burst: 1000
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: Coscheduling
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: CoschedulingArgs
      awareNetworkTopology: true
      enablePreemption: true
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Scheduler:
    component: LocalComponent
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ensure_running(self, control_plane: ControlPlane, kubeconfig: Path) -> None:
        """Start it again if a test killed it."""
        if self.component.pid() is None:
            restarted = start_scheduler(control_plane, kubeconfig, self.component.name)
            self.component, self.port = restarted.component, restarted.port
        wait_until_ready(self.component, self.port)

    def explanation(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The scheduler's latest word on a pod (what ``koordctl explain pod`` prints); None before
        it has one."""
        url = f"{self.url}/debug/pods/{namespace}/{name}/explanation"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                result: dict[str, Any] = json.load(response)
                return result
        except urllib.error.HTTPError:
            return None

    def wait_explained(
        self,
        namespace: str,
        names: Collection[str],
        *,
        results: Collection[str] = ("waiting", "unschedulable"),
        timeout: float = 60.0,
    ) -> dict[str, dict[str, Any]]:
        """Wait until the scheduler has explained every pod of ``names`` with one of ``results``,
        and return those explanations.

        This is how a test knows that the scheduler has seen pods and decided not to place them
        (gated at PreEnqueue: ``waiting``; a cycle found no place: ``unschedulable``), instead of
        sleeping and hoping it has: a pod explained so is not bound until an event changes that.
        """
        deadline = time.monotonic() + timeout
        while True:
            found = {name: self.explanation(namespace, name) for name in names}
            if all(e is not None and e.get("result") in results for e in found.values()):
                return {name: e for name, e in found.items() if e is not None}
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"koord-scheduler did not explain {namespace}/{sorted(names)} as {results}: {found}"
                )
            time.sleep(0.2)

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as response:
            text = response.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def install_scheduler_rbac(control_plane: ControlPlane) -> Path:
    """Apply the chart's ServiceAccount and RBAC for koord-scheduler; a kubeconfig with its token."""
    control_plane.kubectl("create", "namespace", NAMESPACE, "--dry-run=client", "-o", "yaml")
    control_plane.kubectl(
        "apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n"
    )
    rendered = control_plane.helm(
        "template",
        "koordinator-py",
        str(CHART),
        "--show-only",
        "templates/scheduler-serviceaccount.yaml",
        "--show-only",
        "templates/scheduler-rbac.yaml",
    )
    control_plane.kubectl("apply", "-f", "-", input=rendered)
    return service_account_kubeconfig(
        control_plane, NAMESPACE, "koord-scheduler", control_plane.state_dir / "koord-scheduler.kubeconfig"
    )


def start_scheduler(
    control_plane: ControlPlane,
    kubeconfig: Path,
    name: str,
    *,
    config_text: str = CONFIG,
    leader_elect: bool = True,
    extra_args: Sequence[str] = (),
) -> Scheduler:
    """A koord-scheduler process named ``name`` (its log and pid files) with ``config_text`` and
    ``extra_args`` (``--feature-gates``)."""
    config = control_plane.state_dir / f"{name}-config.yaml"
    config.write_text(config_text)
    port = free_port()
    component = koord_scheduler(
        control_plane,
        kubeconfig=kubeconfig,
        port=port,
        name=name,
        config=config,
        leader_elect=leader_elect,
        extra_args=extra_args,
    )
    component.start()
    return Scheduler(component, port)
