"""Can this host run the real node? Every check runs, and all that fail are reported together,
before anything is started (``make up-real`` stops at once with the list; ``make up`` and the KWOK
suite never call this)."""

from __future__ import annotations

import os
import shutil
import socket
import uuid
from pathlib import Path

from e2e.realnode import host
from e2e.realnode.config import HOST_OWNER, RealNodeConfig

__all__ = ["CNI_BIN_DIR", "HOST_BINARIES", "PreflightError", "check", "problems"]

CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
HOST_BINARIES = (
    "runc",
    "iptables",
    "iptables-save",
    "ip6tables",
    "ip6tables-save",
    "ip",
    "umoci",
    "mount",
    "umount",
)
"""From Debian packages (``make real-node-deps``)."""
BUILT_BINARIES = ("kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "pause", "kubectl")
"""From ``make real-node-tools`` (e2e/toolchain/build.sh real-node), linked into .bin/."""
V1_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "pids")


class PreflightError(RuntimeError):
    """The host lacks what the real node needs; the message lists every missing piece."""

    def __init__(self, missing: list[str]) -> None:
        self.missing = missing
        lines = "\n".join(f"  - {m}" for m in missing)
        super().__init__(f"this host cannot run the real node:\n{lines}")


def _binaries(config: RealNodeConfig) -> list[str]:
    missing = [f"{name} (apt: `make real-node-deps`)" for name in HOST_BINARIES if shutil.which(name) is None]
    missing += [
        f"{CNI_BIN_DIR / name} (apt: containernetworking-plugins, `make real-node-deps`)"
        for name in CNI_PLUGINS
        if not (CNI_BIN_DIR / name).exists()
    ]
    missing += [
        f"{config.binary(name)} (`make real-node-tools`)"
        for name in BUILT_BINARIES
        if not config.binary(name).exists()
    ]
    return missing


def _cgroups() -> list[str]:
    hierarchies = host.cgroup_hierarchies()
    if not hierarchies:
        return [f"no cgroup hierarchy mounted under {host.CGROUP_FS}"]
    if not host.is_cgroup2_root():
        names = {h.name for h in hierarchies}
        absent = [c for c in V1_CONTROLLERS if c not in names]
        if absent:
            return [f"cgroup v1 controllers not mounted under {host.CGROUP_FS}: {', '.join(absent)}"]
    probe = f"koordpy-preflight-{uuid.uuid4().hex[:8]}"
    for hierarchy in hierarchies:
        try:
            (hierarchy / probe).mkdir()
            (hierarchy / probe).rmdir()
        except OSError as err:
            return [f"cannot create a cgroup in {hierarchy}: {err.strerror}"]
    return []


def _network(config: RealNodeConfig) -> list[str]:
    missing: list[str] = []
    if shutil.which("ip") is None:
        return missing  # reported with the binaries
    probe = f"kpf{uuid.uuid4().hex[:8]}"
    if host.sh_ok("ip", "link", "add", probe, "type", "bridge"):
        host.sh_ok("ip", "link", "del", probe)
    else:
        missing.append(
            "cannot create a bridge (`ip link add ... type bridge` failed: CAP_NET_ADMIN, bridge module)"
        )
    if shutil.which("unshare") is not None and not host.sh_ok("unshare", "--net", "true"):
        missing.append("cannot create a network namespace (`unshare --net` failed)")
    if shutil.which("iptables") is not None:
        chain = f"KOORD-PF-{uuid.uuid4().hex[:6]}"
        if host.sh_ok("iptables", "-t", "nat", "-N", chain):
            host.sh_ok("iptables", "-t", "nat", "-X", chain)
        else:
            missing.append("iptables does not work (cannot create a chain in the nat table)")
    if "overlay" not in Path("/proc/filesystems").read_text():
        missing.append("the overlay filesystem is not available (modprobe overlay)")
    return missing


def _host_wide(config: RealNodeConfig) -> list[str]:
    """One real node per host: the bridge, the pod subnet and kubelet's ports are host-wide."""
    missing: list[str] = []
    owner = HOST_OWNER.read_text().strip() if HOST_OWNER.exists() else None
    if owner is not None and owner != str(config.state_dir):
        missing.append(f"the real node of {owner} holds this host (its `python -m e2e.realnode down` first)")
    elif host.sh_ok("ip", "link", "show", config.bridge):
        missing.append(
            f"the bridge {config.bridge} exists: another real node runs here (`python -m e2e.realnode down`)"
        )
    for port in (config.kubelet_port, config.kubelet_healthz_port):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                missing.append(f"port {port} is taken: another kubelet runs on this host")
    return missing


def problems(config: RealNodeConfig) -> list[str]:
    """What this host lacks to run ``config``'s real node; empty when it can."""
    if os.geteuid() != 0:
        return ["the real node must run as root (kubelet, containerd, cgroups, netns)"]
    return _binaries(config) + _cgroups() + _network(config) + _host_wide(config)


def check(config: RealNodeConfig) -> None:
    """Raise ``PreflightError`` listing everything missing; return when the host can run the node."""
    missing = problems(config)
    if missing:
        raise PreflightError(missing)
