"""Start the real node of a running cluster: containerd (CRI + NRI), the pause image, kubelet and
kube-proxy, each a host process with its pid file and log under ``.cluster/<cluster>/realnode/``.

``start_real_node(cp)`` is all ``make up-real`` needs after the cluster is up (in its real-node
flavour: ``ControlPlane(real_node=True)``, whose API server pods can reach)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from e2e.cluster import processes
from e2e.cluster.controlplane import ControlPlane
from e2e.realnode import host, images, preflight, render
from e2e.realnode.config import HOST_OWNER, PAUSE_IMAGE, RealNodeConfig, config_for

__all__ = ["node_ready", "progress", "start", "start_real_node"]

IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


def progress(message: str) -> None:
    print(f"[realnode] {message}", file=sys.stderr, flush=True)


def _spawn(c: RealNodeConfig, name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
    c.logs_dir.mkdir(parents=True, exist_ok=True)
    with open(c.logs_dir / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    c.pid_file(name).write_text(str(proc.pid))
    _CHILDREN.append(proc)
    return proc.pid


_CHILDREN: list[subprocess.Popen[bytes]] = []


def _wait(what: str, ready: Callable[[], bool], pid: int | None, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if pid is not None and not processes.alive(pid):
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"{what} exited while starting; the end of {log}:\n{tail}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout:.0f}s (see {log})")
        time.sleep(0.3)


def _prepare_host(c: RealNodeConfig) -> None:
    for d in (c.containerd_dir, c.cni_conf_dir, c.cni_ipam_dir, c.kubelet_root, c.pod_logs_dir, c.images_dir):
        d.mkdir(parents=True, exist_ok=True)
    # kubelet wants its cgroupRoot to exist in every hierarchy; all we create lies below it.
    for hierarchy in host.cgroup_hierarchies():
        (hierarchy / c.cgroup_root.lstrip("/")).mkdir(exist_ok=True)
    HOST_OWNER.write_text(str(c.state_dir))
    saved = c.state_dir / "ip_forward.saved"
    if not saved.exists():
        saved.write_text(IP_FORWARD.read_text().strip())
    IP_FORWARD.write_text("1")


def _start_containerd(c: RealNodeConfig) -> None:
    c.containerd_config.write_text(render.containerd_toml(c, runc=shutil.which("runc") or "runc"))
    (c.cni_conf_dir / "10-koord.conflist").write_text(render.cni_conflist(c))
    env = dict(os.environ)
    env["PATH"] = f"{c.bin_dir}:/usr/local/sbin:/usr/sbin:/sbin:{env.get('PATH', '')}"
    pid = _spawn(c, "containerd", [str(c.binary("containerd")), "--config", str(c.containerd_config)], env)

    def answers() -> bool:
        if not c.containerd_socket.exists():
            return False
        try:
            images.ctr(c, "version", timeout=5.0)
        except (RuntimeError, subprocess.TimeoutExpired):
            return False
        return True

    _wait("containerd", answers, pid, c.logs_dir / "containerd.log", 60.0)


def _start_kubelet(c: RealNodeConfig, cp: ControlPlane, node_ip: str) -> None:
    ca = cp.kwok_workdir / "clusters" / cp.name / "pki" / "ca.crt"
    c.kubelet_config.write_text(render.kubelet_yaml(c, client_ca=ca))
    argv = [
        str(c.binary("kubelet")),
        f"--config={c.kubelet_config}",
        f"--kubeconfig={c.kubeconfig}",
        f"--root-dir={c.kubelet_root}",
        f"--hostname-override={c.node_name}",
        f"--node-ip={node_ip}",
        f"--node-labels={c.node_label}=true",
    ]
    env = dict(os.environ)
    env["PATH"] = f"{c.bin_dir}:/usr/local/sbin:/usr/sbin:/sbin:{env.get('PATH', '')}"
    pid = _spawn(c, "kubelet", argv, env)
    _wait(f"node {c.node_name}", lambda: node_ready(cp, c.node_name), pid, c.logs_dir / "kubelet.log", 120.0)


def _start_kube_proxy(c: RealNodeConfig) -> None:
    c.kube_proxy_config.write_text(render.kube_proxy_yaml(c))
    pid = _spawn(c, "kube-proxy", [str(c.binary("kube-proxy")), f"--config={c.kube_proxy_config}"])

    def synced() -> bool:
        return "KUBE-SERVICES" in host.run("iptables-save", "-t", "nat", check=False).stdout

    _wait("kube-proxy", synced, pid, c.logs_dir / "kube-proxy.log", 60.0)


def node_ready(cp: ControlPlane, name: str) -> bool:
    found = cp.read("node", name)
    if found is None:
        return False
    conditions = found.get("status", {}).get("conditions") or []
    return any(cond["type"] == "Ready" and cond["status"] == "True" for cond in conditions)


def start(cp: ControlPlane, c: RealNodeConfig) -> RealNodeConfig:
    """Start the real node ``c`` for the running cluster ``cp``; the host is checked first
    (``preflight.PreflightError`` lists what is missing, and nothing is started then)."""
    preflight.check(c)
    if not cp.kubeconfig.exists():
        raise RuntimeError(f"cluster {cp.name} is not running (no {cp.kubeconfig}): start it first")
    began = time.monotonic()
    node_ip = host.primary_ip()
    _prepare_host(c)
    progress(f"starting containerd ({c.containerd_socket}, NRI at {c.nri_socket})")
    _start_containerd(c)
    images.import_image(c, images.pause_image(c), PAUSE_IMAGE, pinned=True)
    progress(f"imported {PAUSE_IMAGE}")
    progress(f"starting kubelet (node {c.node_name}, {node_ip}, root dir {c.kubelet_root})")
    _start_kubelet(c, cp, node_ip)
    progress("starting kube-proxy (iptables)")
    _start_kube_proxy(c)
    progress(f"node {c.node_name} ready in {time.monotonic() - began:.1f}s")
    return c


def start_real_node(cp: ControlPlane) -> RealNodeConfig:
    """``make up-real``'s one line: the real node of the (running, real-node flavoured) cluster."""
    return start(cp, config_for(cp))
