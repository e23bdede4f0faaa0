"""koordinator-py's own components as real local processes against a local cluster.

`make up` starts them in the background (pid and log under ``.cluster/<cluster>/``) and
`make down` stops them; the e2e session starts them the same way. Each component is started with
the cluster's kubeconfig, exactly as a user would run it outside the cluster.

``python -m e2e.components start|stop [--cluster NAME] COMPONENT``; ``koordlet`` is koordlet's
simulation mode reporting the dev cluster's usage from ``e2e/clusters/dev-load.yaml``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e.cluster import processes
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.cluster.rest import ApiError

__all__ = ["LocalComponent", "koord_descheduler", "koord_manager", "koordlet_simulation"]

# Children started by this process, so that stop() can reap them (no zombie, no ResourceWarning).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}

STOP_TIMEOUT_SECONDS = 10.0
"""How long a component has to exit on SIGTERM before it is killed (koord-manager bounds its own
shutdown to ``ManagerConfig.shutdown_timeout_seconds``, 5 s, even with the API server gone)."""

WEBHOOK_CONFIGURATION = "koordinator-py.koordinator.sh"
# A PodGroup only the admission webhook rejects: the schema accepts it.
_WEBHOOK_PROBE = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: koordinator-py-webhook-probe
  namespace: default
  annotations:
    gang.scheduling.koordinator.sh/network-topology-spec: >-
      {"gatherStrategy":[{"layer":"x","strategy":"Probe"}]}
spec: {minMember: 1}
"""


@dataclass(frozen=True)
class LocalComponent:
    name: str
    argv: tuple[str, ...]
    cluster: ControlPlane

    @property
    def pid_file(self) -> Path:
        return self.cluster.state_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.cluster.state_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return pid if processes.alive(pid) else None

    def start(self) -> None:
        if self.pid() is not None:
            return
        self.cluster.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        _CHILDREN[proc.pid] = proc
        self.pid_file.write_text(str(proc.pid))

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> processes.Stopped:
        """SIGTERM, up to ``timeout`` s to exit, then SIGKILL; says which it took."""
        pid = self.pid()
        stopped = processes.stop_group(
            self.name, pid, timeout=timeout, child=_CHILDREN.pop(pid, None) if pid else None
        )
        self.pid_file.unlink(missing_ok=True)
        return stopped

    def stop_now(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send ``sig`` to the process group at once (no grace), then reap it."""
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)
            child = _CHILDREN.pop(pid, None)
            if child is not None:
                child.wait()
        self.pid_file.unlink(missing_ok=True)

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_file.exists():
            return ""
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])


def koord_manager(
    cluster: ControlPlane, webhook_port: int = 9443, extra_args: Sequence[str] = ()
) -> LocalComponent:
    return LocalComponent(
        name="koord-manager",
        argv=(
            sys.executable,
            "-m",
            "operators",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--webhook-port",
            str(webhook_port),
            "--webhook-cert-dir",
            str(cluster.state_dir / "koord-manager"),
            *extra_args,
        ),
        cluster=cluster,
    )


def koord_descheduler(
    cluster: ControlPlane,
    config: Path,
    *,
    kubeconfig: Path | None = None,
    initial_delay_seconds: float = 1.0,
    name: str = "koord-descheduler",
) -> LocalComponent:
    """``koord-descheduler --config CONFIG`` (a DeschedulerConfiguration), run as
    ``python -m operators.descheduler``."""
    argv = (
        sys.executable,
        "-m",
        "operators.descheduler",
        "--config",
        str(config),
        "--kubeconfig",
        str(kubeconfig or cluster.kubeconfig),
        "--initial-delay",
        str(initial_delay_seconds),
    )
    return LocalComponent(name=name, argv=argv, cluster=cluster)


def koordlet_simulation(
    cluster: ControlPlane,
    load_file: Path | None,
    *,
    devices_file: Path | None = None,
    kubeconfig: Path | None = None,
    report_interval_seconds: float | None = 1.0,
    metrics_port: int = 0,
    name: str = "koordlet-simulation",
    extra_args: Sequence[str] = (),
) -> LocalComponent:
    """``koordlet --simulate LOAD_FILE``: NodeMetric status for the cluster's KWOK nodes from a load
    file (docs/koordlet.md), reported every ``report_interval_seconds`` (None: the NodeMetrics');
    with ``devices_file``, ``--simulate-devices``: their Device objects (docs/devices.md)."""
    argv = [sys.executable, "-m", "koordlet"]
    if load_file is not None:
        argv += ["--simulate", str(load_file)]
    if devices_file is not None:
        argv += ["--simulate-devices", str(devices_file)]
    argv += [
        "--kubeconfig",
        str(kubeconfig or cluster.kubeconfig),
        "--metrics-bind",
        "127.0.0.1",
        "--metrics-port",
        str(metrics_port),
    ]
    if report_interval_seconds is not None:
        argv += ["--report-interval-seconds", str(report_interval_seconds)]
    argv += list(extra_args)
    return LocalComponent(name=name, argv=tuple(argv), cluster=cluster)


def koord_scheduler(
    cluster: ControlPlane,
    *,
    kubeconfig: Path,
    port: int,
    name: str = "koord-scheduler",
    config: Path | None = None,
    leader_elect: bool = True,
    lease_namespace: str = "koordinator-system",
    extra_args: Sequence[str] = (),
) -> LocalComponent:
    argv = [
        sys.executable,
        "-m",
        "scheduler",
        "--kubeconfig",
        str(kubeconfig),
        f"--leader-elect={str(leader_elect).lower()}",
        "--lease-namespace",
        lease_namespace,
        "--port",
        str(port),
    ]
    if config is not None:
        argv += ["--config", str(config)]
    argv += extra_args
    return LocalComponent(name=name, argv=tuple(argv), cluster=cluster)


def http_status(url: str) -> int:
    """The HTTP status of GET ``url`` (0 when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def wait_until_ready(component: LocalComponent, port: int, timeout: float = 60.0) -> None:
    """Return once ``http://127.0.0.1:<port>/readyz`` answers 200 (caches synced, lease held)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if component.pid() is None:
            raise RuntimeError(f"{component.name} exited:\n{component.log_tail()}")
        if http_status(f"http://127.0.0.1:{port}/readyz") == 200:
            return
        time.sleep(0.2)
    raise TimeoutError(f"{component.name} was not ready in {timeout}s:\n{component.log_tail()}")


def wait_for_admission(cluster: ControlPlane, component: LocalComponent, timeout: float = 60.0) -> None:
    """Return once the API server calls koord-manager's webhook (a server-side dry run is denied)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if component.pid() is None:
            raise RuntimeError(f"{component.name} exited:\n{component.log_tail()}")
        probe = cluster.run_kubectl("apply", "--dry-run=server", "-f", "-", input=_WEBHOOK_PROBE)
        if probe.returncode != 0 and "denied the request" in probe.stderr:
            return
        time.sleep(0.5)
    raise TimeoutError(
        f"{component.name}'s admission webhook did not answer in {timeout}s:\n{component.log_tail()}"
    )


LOCAL_SCHEDULER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: Coscheduling
    args:
      awareNetworkTopology: true
      enablePreemption: true
"""
"""What `make up` runs: the release notes' v1.7 features (network topology, job-level preemption) on."""


DEV_LOAD = repo_root() / "e2e" / "clusters" / "dev-load.yaml"
"""What `make up`'s koordlet reports (docs/colocation.md, "Quick start" step 6)."""


def wait_for_reports(cluster: ControlPlane, component: LocalComponent, timeout: float = 60.0) -> None:
    """Return once koordlet has written the status of a NodeMetric (koord-manager creates them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if component.pid() is None:
            raise RuntimeError(f"{component.name} exited:\n{component.log_tail()}")
        try:
            listed = cluster.read("nodemetrics")
        except ApiError:  # the CRD is not there yet
            listed = None
        if listed is not None and any(m.get("status") for m in listed["items"]):
            return
        time.sleep(0.5)
    raise TimeoutError(f"{component.name} reported no NodeMetric in {timeout}s:\n{component.log_tail()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.components", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("component", choices=["koord-manager", "koord-scheduler", "koordlet"])
    parser.add_argument("--cluster", default="koord-py")
    parser.add_argument("--port", type=int, default=10251, help="koord-scheduler's HTTP port")
    parser.add_argument(
        "--webhook-port", type=int, default=9443, help="koord-manager's admission webhook port"
    )
    args = parser.parse_args(argv)
    cluster = ControlPlane(name=args.cluster)
    if args.component == "koord-manager":
        component = koord_manager(cluster, webhook_port=args.webhook_port)
    elif args.component == "koordlet":
        component = koordlet_simulation(cluster, DEV_LOAD, report_interval_seconds=None, name="koordlet")
    else:
        config = cluster.state_dir / "koord-scheduler-config.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(LOCAL_SCHEDULER_CONFIG)
        component = koord_scheduler(
            cluster, kubeconfig=cluster.kubeconfig, port=args.port, leader_elect=False, config=config
        )
    if args.action == "start":
        component.start()
        if args.component == "koord-manager":
            wait_for_admission(cluster, component)
        elif args.component == "koordlet":
            wait_for_reports(cluster, component)
        else:
            wait_until_ready(component, args.port)
        print(f"[components] {component.name} running (pid {component.pid()}, log {component.log_file})")
    else:
        print(f"[components] {component.stop()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
