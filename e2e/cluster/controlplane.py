"""Start and stop the local control plane with ``kwokctl --runtime binary`` and locally built tools.

Everything lives under ``.cluster/<name>/`` in the repository (git-ignored): kwokctl's work
directory, the generated ``kwokctl.yaml`` with absolute binary paths, and the kubeconfig. The
cluster named ``koord-py`` (``make cluster``) also writes ``.cluster/kubeconfig``. The daemons
outlive kwokctl, so ``stop`` (``make down``) must run ``kwokctl delete cluster``; it also kills any
process left in the cluster's pid files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from e2e.cluster import processes
from e2e.cluster.rest import ApiError, RestClient, client_for

__all__ = ["KUBECTL_CALLS", "ControlPlane", "KubectlError", "ToolsMissing", "repo_root"]


class ToolsMissing(RuntimeError):
    """The Go-built binaries are not in .bin/: run ``make tools``."""


class KubectlError(RuntimeError):
    """kubectl exited non-zero; the message carries the command and its stderr."""

    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.proc = proc
        args = " ".join(str(a) for a in proc.args[3:])
        super().__init__(f"kubectl {args} exited {proc.returncode}: {proc.stderr.strip()}")


class HelmError(RuntimeError):
    """helm exited non-zero; the message carries the command and both streams."""

    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.proc = proc
        args = " ".join(str(a) for a in proc.args[1:3])
        super().__init__(f"helm {args} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}")


@dataclass
class KubectlCalls:
    """How many kubectl processes this process ran, and their wall time, per verb (the e2e
    session prints it: each call is a Go process start, which polling loops multiply)."""

    by_verb: dict[str, tuple[int, float]] = field(default_factory=dict)
    by_site: dict[str, tuple[int, float]] = field(default_factory=dict)
    """Per ``verb file:line`` of the first caller outside ``e2e/cluster``: where to cut next."""

    def record(self, verb: str, seconds: float) -> None:
        self.record_many(verb, 1, seconds)
        self.record_site(f"{verb} {_caller()}", 1, seconds)

    def record_many(self, verb: str, count: int, seconds: float) -> None:
        known, total = self.by_verb.get(verb, (0, 0.0))
        self.by_verb[verb] = (known + count, total + seconds)

    def record_site(self, site: str, count: int, seconds: float) -> None:
        known, total = self.by_site.get(site, (0, 0.0))
        self.by_site[site] = (known + count, total + seconds)


def _caller() -> str:
    here = Path(__file__).parent
    frame = sys._getframe(1)
    while frame is not None and Path(frame.f_code.co_filename).parent == here:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "?"
    path = Path(frame.f_code.co_filename)
    with contextlib.suppress(ValueError):
        path = path.relative_to(here.parent.parent)
    return f"{path}:{frame.f_lineno}"


KUBECTL_CALLS = KubectlCalls()
_DELETED_NAMESPACES: dict[str, set[str]] = {}
"""Per cluster: the namespaces ``ControlPlane.delete_namespace`` left to the namespace controller."""


CREATE_LOCK = Path(tempfile.gettempdir()) / "koordinator-py-kwokctl-create.lock"
"""Held while ``kwokctl create cluster`` runs, by every cluster start on this machine (any clone)."""


@contextlib.contextmanager
def _create_lock() -> Iterator[None]:
    """One ``kwokctl create cluster`` at a time on this machine.

    kwokctl picks each component's port by counting down from 32765 to the first one free at that
    moment, so two clusters created at once (two e2e workers, a bench beside them) pick the same
    ports: one cluster's etcd and kube-apiserver die with "bind: address already in use" and its
    ``--wait`` runs out minutes later. Once ``create`` returns, the components hold their ports.
    """
    CREATE_LOCK.touch(exist_ok=True)
    with CREATE_LOCK.open("r") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


ROOT = repo_root()
MISSING_SERVICE_ACCOUNT = 'serviceaccount "default" not found'
TOOLS = ("kube-apiserver", "kube-controller-manager", "etcd", "kwok", "kwokctl", "kubectl")


@dataclass(frozen=True)
class ControlPlane:
    """One named local cluster and the paths that belong to it."""

    name: str = "koord-py"
    root: Path = ROOT
    real_node: bool = False
    """The flavour that a real node (``e2e.realnode``) can join: kube-apiserver listens on all
    addresses and advertises the host's primary one (pods reach it through the ``kubernetes``
    Service), routes to webhook Services through their endpoints, and authenticates to kubelets with
    the admin certificate; kwok manages only the nodes annotated ``kwok.x-k8s.io/node: fake``."""
    controller_manager_args: tuple[tuple[str, str], ...] = ()
    """More kube-controller-manager flags, ``(name, value)`` without the dashes."""

    @property
    def bin_dir(self) -> Path:
        return self.root / ".bin"

    @property
    def state_dir(self) -> Path:
        return self.root / ".cluster" / self.name

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def kwok_workdir(self) -> Path:
        return self.state_dir / "kwok"

    def tool(self, name: str) -> str:
        path = self.bin_dir / name
        if not path.exists():
            raise ToolsMissing(f"{path} is missing: run `make tools` (e2e/toolchain/build.sh) first")
        return str(path)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KWOK_WORKDIR"] = str(self.kwok_workdir)
        env["PATH"] = f"{self.bin_dir}:{env.get('PATH', '')}"
        return env

    def run_kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; the caller inspects the exit code and both streams."""
        started = time.monotonic()
        try:
            return subprocess.run(
                [self.tool("kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                capture_output=True,
                text=True,
                input=input,
                env=self._env(),
            )
        finally:
            KUBECTL_CALLS.record(args[0] if args else "", time.monotonic() - started)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        """Run kubectl against this cluster and return its stdout; a failure raises with stderr."""
        proc = self.run_kubectl(*args, input=input)
        if check and proc.returncode != 0:
            raise KubectlError(proc)
        return proc.stdout

    def run_helm(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run helm against this cluster; the caller inspects the exit code and both streams."""
        return subprocess.run(
            [self.tool("helm"), *args, "--kubeconfig", str(self.kubeconfig)],
            capture_output=True,
            text=True,
            env=self._env(),
        )

    def helm(self, *args: str) -> str:
        """Run helm against this cluster and return its stdout; a failure raises with both streams."""
        proc = self.run_helm(*args)
        if proc.returncode != 0:
            raise HelmError(proc)
        return proc.stdout

    @property
    def rest(self) -> RestClient:
        """The in-process client of this cluster (``e2e.cluster.rest``)."""
        return client_for(self.kubeconfig)

    def get_json(self, path: str) -> dict[str, Any]:
        """GET an API path in process (``e2e.cluster.rest``): for the helpers that poll, where a
        kubectl process per read would cost more than the test it waits for."""
        return self.rest.get(path)

    def read(
        self,
        resource: str,
        name: str = "",
        *,
        namespace: str | None = "default",
        selector: str = "",
        field_selector: str = "",
    ) -> dict[str, Any] | None:
        """What ``kubectl get RESOURCE [NAME] [-n NAMESPACE] [-l SELECTOR] [--field-selector
        FIELD_SELECTOR] -o json --ignore-not-found`` prints, read in process (``e2e.cluster.rest``):
        the object, None when there is none, or the list (``namespace=None``: every namespace, as
        ``-A``). For the helpers and waits that poll; kubectl stays where the test is about what a
        user sees."""
        path = self.rest.resource_path(resource, name, namespace)
        query = {"labelSelector": selector} if selector else {}
        if field_selector:
            query["fieldSelector"] = field_selector
        if query:
            path += "?" + urlencode(query)
        try:
            return self.rest.get(path)
        except ApiError as exc:
            if exc.status == 404 and name:
                return None
            raise

    def create_namespace(self, name: str, *, timeout: float = 60.0) -> None:
        """Create a namespace and wait until pods can be created in it (see ``wait_service_account``).
        A namespace of that name that an earlier test deleted (``delete_namespace``) and that is
        still terminating is waited for first."""
        deadline = time.monotonic() + timeout
        deleted = name in _DELETED_NAMESPACES.get(self.name, set())
        while deleted and self._exists(f"/api/v1/namespaces/{name}"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"namespace {name} still there {timeout}s after it was deleted")
            time.sleep(0.5)
        self.rest.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        self.wait_service_account(name, timeout=timeout)

    def delete_namespace(self, name: str, *, timeout: float = 90.0) -> None:
        """A test's namespace, deleted so that the next test finds the nodes free: its pods are
        deleted in one request and waited for (KWOK ends them at once), the namespace itself is
        left to the namespace controller, which takes about ten seconds more.
        ``wait_namespaces_gone`` (the e2e session's end) checks that every namespace deleted so
        went. ``kubectl delete pods --all --wait`` took 57 s for 240 pods (one DELETE and one
        wait per pod, in turn); this takes about one."""
        pods = f"/api/v1/namespaces/{name}/pods"
        try:
            deleted = {p["metadata"]["uid"] for p in self.rest.get(pods)["items"]}
            self.rest.delete_collection(pods)
        except ApiError as exc:
            if exc.status != 404:
                raise
            deleted = set()
        # Only the pods deleted here: a Deployment's ReplicaSet makes new ones until the namespace goes.
        deadline = time.monotonic() + timeout
        while deleted & {p["metadata"]["uid"] for p in self.rest.get(pods)["items"]}:
            if time.monotonic() > deadline:
                raise TimeoutError(f"namespace {name}: pods still there {timeout:g}s after they were deleted")
            time.sleep(0.2)
        try:
            self.rest.delete(f"/api/v1/namespaces/{name}")
        except ApiError as exc:
            if exc.status != 404:  # gone already: what --ignore-not-found allowed
                raise
        _DELETED_NAMESPACES.setdefault(self.name, set()).add(name)

    def wait_namespaces_gone(self, *, timeout: float = 120.0) -> list[str]:
        """The namespaces ``delete_namespace`` deleted that are still there after ``timeout`` s."""
        deleted = _DELETED_NAMESPACES.get(self.name, set())
        deadline = time.monotonic() + timeout
        while True:
            names = {n["metadata"]["name"] for n in self.rest.get("/api/v1/namespaces")["items"]}
            left = sorted(deleted & names)
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(1.0)

    def _exists(self, path: str) -> bool:
        try:
            self.rest.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def wait_service_account(self, namespace: str, *, timeout: float = 60.0) -> None:
        """Wait for the namespace's ``default`` ServiceAccount.

        kube-controller-manager creates that account a moment after the namespace; until then the
        ServiceAccount admission plugin rejects every pod in it ("serviceaccount default not found").
        """
        deadline = time.monotonic() + timeout
        while not self._exists(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"namespace {namespace}: no default ServiceAccount after {timeout}s")
            time.sleep(0.2)

    def apply_file(self, path: Path, *, timeout: float = 60.0) -> str:
        """Server-side apply a manifest file, as a user would; a file that creates a namespace and
        pods in it is applied again until the namespace's ServiceAccount exists."""
        deadline = time.monotonic() + timeout
        while True:
            proc = self.run_kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
            if proc.returncode == 0:
                return proc.stdout
            if MISSING_SERVICE_ACCOUNT not in proc.stderr or time.monotonic() > deadline:
                raise KubectlError(proc)
            time.sleep(0.5)

    def _write_config(self) -> Path:
        for tool in TOOLS:
            self.tool(tool)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        config = self.state_dir / "kwokctl.yaml"
        b = self.bin_dir.resolve()
        config.write_text(
            "kind: KwokctlConfiguration\n"
            "apiVersion: config.kwok.x-k8s.io/v1alpha1\n"
            "options:\n"
            "  runtime: binary\n"
            "  bindAddress: 127.0.0.1\n"
            + (self._real_node_options() if self.real_node else "")
            + f"  kubeApiserverBinary: {(b / 'kube-apiserver').resolve()}\n"
            f"  kubeControllerManagerBinary: {(b / 'kube-controller-manager').resolve()}\n"
            f"  kubeSchedulerBinary: {(b / 'kube-scheduler').resolve()}\n"
            f"  kubectlBinary: {(b / 'kubectl').resolve()}\n"
            f"  etcdBinary: {(b / 'etcd').resolve()}\n"
            f"  kwokControllerBinary: {(b / 'kwok').resolve()}\n"
            # kube-controller-manager lifts the not-ready taints of each new node with a few
            # writes under its client's default 20 QPS: 110 nodes took 20 s to become schedulable.
            "componentsPatches:\n"
            "- name: kube-controller-manager\n"
            "  extraArgs:\n"
            "  - key: kube-api-qps\n"
            '    value: "500"\n'
            "  - key: kube-api-burst\n"
            '    value: "1000"\n'
            + "".join(
                f'  - key: {key}\n    value: "{value}"\n' for key, value in self.controller_manager_args
            )
            + (self._real_node_patches() if self.real_node else "")
        )
        return config

    def _real_node_options(self) -> str:
        # Pods reach the API server as https://<kubernetes Service's ClusterIP> (in-cluster config)
        # or by its DNS names: kwokctl's certificate names only the host's addresses.
        sans = ["10.0.0.1", "10.96.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
        sans.append("kubernetes.default.svc.cluster.local")
        return "  kubeApiserverCertSANs:\n" + "".join(f"  - {san}\n" for san in sans)

    def _real_node_patches(self) -> str:
        from e2e.realnode.host import primary_ip  # only this flavour needs it

        pki = self.kwok_workdir / "clusters" / self.name / "pki"
        return (
            "- name: kube-apiserver\n"
            "  extraArgs:\n"
            "  - key: bind-address\n"
            '    value: "0.0.0.0"\n'
            "    override: true\n"
            "  - key: advertise-address\n"
            f'    value: "{primary_ip()}"\n'
            "  - key: enable-aggregator-routing\n"
            '    value: "true"\n'
            "  - key: kubelet-client-certificate\n"
            f'    value: "{pki / "admin.crt"}"\n'
            "  - key: kubelet-client-key\n"
            f'    value: "{pki / "admin.key"}"\n'
            # the node's name is no DNS name: reach kubelet (logs, exec) at its InternalIP
            "  - key: kubelet-preferred-address-types\n"
            '    value: "InternalIP,Hostname"\n'
            # kwokctl's binary runtime starts kwok with --manage-all-nodes=true: it would take the
            # real node over. Our fake nodes all carry this annotation (e2e/clusters/*.yaml).
            "- name: kwok-controller\n"
            "  extraArgs:\n"
            "  - key: manage-all-nodes\n"
            '    value: "false"\n'
            "    override: true\n"
            "  - key: manage-nodes-with-annotation-selector\n"
            '    value: "kwok.x-k8s.io/node=fake"\n'
        )

    def is_running(self) -> bool:
        if not self.kubeconfig.exists():
            return False
        try:
            self.kubectl("get", "--raw", "/readyz", check=True)
        except (KubectlError, ToolsMissing):
            return False
        return True

    def start(self, *, wait: str = "3m") -> None:
        """Create the cluster, or do nothing if it already answers."""
        if self.is_running():
            _progress(f"cluster {self.name} already running")
            return
        self.stop(quiet=True)
        config = self._write_config()
        _progress(f"starting cluster {self.name} (kube-apiserver, etcd, kube-controller-manager, kwok)")
        began = time.monotonic()
        with _create_lock():
            proc = self._create(config, wait)
        if proc.returncode != 0:
            raise RuntimeError(
                f"kwokctl create cluster failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        _progress(f"cluster {self.name} ready in {time.monotonic() - began:.1f}s")

    def _create(self, config: Path, wait: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                self.tool("kwokctl"),
                "-c",
                str(config),
                "create",
                "cluster",
                "--name",
                self.name,
                "--runtime",
                "binary",
                # KWOK clusters have no kube-scheduler: koord-scheduler (a local process) binds every
                # pod. The real-node flavour has one, as a real cluster does: it places the chart's
                # own pods (koord-scheduler among them) on the real node.
                *(() if self.real_node else ("--disable", "kube-scheduler")),
                "--kubeconfig",
                str(self.kubeconfig),
                "--wait",
                wait,
            ],
            env=self._env(),
            capture_output=True,
            text=True,
        )

    def stop(self, *, quiet: bool = False, component_timeout: float = 10.0) -> None:
        """Delete the cluster and make sure none of its processes is left running.

        Components started against it (``e2e.components``: koord-manager ...) go first, each
        SIGTERMed and given ``component_timeout`` seconds before SIGKILL, so that none of them
        outlives the API server it talks to (nor meets the next cluster on the same port).
        """
        self._stop_components(component_timeout)
        self._stop_real_node()
        if (self.kwok_workdir / "clusters" / self.name).exists():
            kwokctl = self.bin_dir / "kwokctl"
            if kwokctl.exists():
                subprocess.run(
                    [str(kwokctl), "delete", "cluster", "--name", self.name],
                    env=self._env(),
                    capture_output=True,
                    text=True,
                )
        self._kill_leftovers()
        if self.kwok_workdir.exists():
            shutil.rmtree(self.kwok_workdir, ignore_errors=True)
        self.kubeconfig.unlink(missing_ok=True)
        if not quiet:
            _progress(f"cluster {self.name} stopped")

    def _stop_real_node(self) -> None:
        """The real node goes before the API server it reports to (``e2e.realnode``)."""
        if not (self.state_dir / "realnode").exists():
            return
        from e2e.realnode import config_for, stop  # it imports this module

        for line in stop(config_for(self)):
            _progress(line)

    def _stop_components(self, timeout: float) -> None:
        """Stop each process with a pid file in the state directory (``e2e.components``), each
        within ``timeout`` seconds, and say how each went."""
        for pid_file in sorted(self.state_dir.glob("*.pid")) if self.state_dir.exists() else []:
            try:
                pid: int | None = int(pid_file.read_text().strip())
            except ValueError:
                pid = None
            stopped = processes.stop_group(pid_file.stem, pid, timeout=timeout)
            pid_file.unlink(missing_ok=True)
            if stopped.outcome != "not running":
                _progress(str(stopped))

    def _kill_leftovers(self) -> None:
        pid_dir = self.kwok_workdir / "clusters" / self.name / "pids"
        for pid_file in pid_dir.glob("*.pid") if pid_dir.exists() else []:
            with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)

    def restart_apiserver(self) -> None:
        """Kill kube-apiserver (SIGKILL) and start it again with the same command line and pid file:
        clients see their connections drop and must reconnect; etcd keeps the data. Its port is free
        for a moment, so no other cluster may be created meanwhile (``_create_lock``)."""
        with _create_lock():
            self._restart_apiserver()

    def _restart_apiserver(self) -> None:
        pid_file = self.kwok_workdir / "clusters" / self.name / "pids" / "kube-apiserver.pid"
        pid = int(pid_file.read_text().strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        cwd = os.readlink(f"/proc/{pid}/cwd")
        os.kill(pid, signal.SIGKILL)
        # An API server this process restarted earlier is its child: reap it, or it stays a zombie
        # (and /proc/PID with it) until the wait below times out.
        ours = next((p for p in _RESTARTED if p.pid == pid), None)
        if ours is not None:
            ours.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.05)
        log_path = self.kwok_workdir / "clusters" / self.name / "logs" / "kube-apiserver.log"
        for _ in range(20):  # the old process may hold its port a moment longer: start again then
            with open(log_path, "ab") as log:
                proc = subprocess.Popen(
                    [a.decode() for a in argv],
                    cwd=cwd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            try:
                proc.wait(timeout=1.5)
            except subprocess.TimeoutExpired:
                break  # still running: it has its port
            time.sleep(0.5)
        pid_file.write_text(str(proc.pid))
        _RESTARTED.append(proc)

    def server_version(self) -> str:
        return self.kubectl("version", "-o", "yaml")

    def logs(self, component: str) -> str:
        log = self.kwok_workdir / "clusters" / self.name / "logs" / f"{component}.log"
        return log.read_text() if log.exists() else ""


# Processes this module restarted; kept so they are not reaped as garbage while running.
_RESTARTED: list[subprocess.Popen[bytes]] = []


def _progress(message: str) -> None:
    print(f"[cluster] {message}", file=sys.stderr, flush=True)
