"""Stop the real node and take back everything it put on the host, and ``leftovers()``: what of
it is still there (the stop's own check, and the tests').

The order matters: kubelet and kube-proxy first (so nothing restarts the pods), then every process
in the node's cgroup subtree (the containers and their pause processes), containerd, the runc
shims it started (they outlive it), then the mounts under the state dir (rootfs overlays, shm,
projected volumes, the pods' network namespaces: unmounting the last one frees the pod's veth),
the bridge, kube-proxy's and kubelet's iptables chains, the cgroup subtree, and ``ip_forward``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from e2e.cluster import processes
from e2e.realnode import host, images
from e2e.realnode.config import HOST_OWNER, RealNodeConfig

__all__ = ["OUR_CHAIN_PREFIXES", "leftovers", "stop"]

OUR_CHAIN_PREFIXES = ("KUBE-", "CNI-")
"""kube-proxy's and kubelet's chains (KUBE-SERVICES, KUBE-KUBELET-CANARY, ...) and the CNI
plugins'. One real node runs per host, so every such chain is ours."""
TABLES = ("filter", "nat", "mangle", "raw")
IPTABLES = (("iptables", "iptables-save"), ("ip6tables", "ip6tables-save"))
CNI_CACHE = Path("/var/lib/cni")
SHIM_SOCKETS = Path("/run/containerd/s")
"""containerd 2.x puts its runc shims' sockets here whatever its state dir; a shim that is killed
(rather than told to shut down) leaves its socket behind."""


def _listening_unix_paths() -> set[str]:
    paths: set[str] = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8:
            paths.add(fields[7])
    return paths


def _stale_shim_sockets() -> list[Path]:
    """Shim sockets no process listens on any more (on a host running another containerd, its
    live shims' sockets are left alone)."""
    if not SHIM_SOCKETS.is_dir():
        return []
    live = _listening_unix_paths()
    return sorted(p for p in SHIM_SOCKETS.iterdir() if str(p) not in live)


def _pid(c: RealNodeConfig, name: str) -> int | None:
    try:
        return int(c.pid_file(name).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _stop(c: RealNodeConfig, name: str, timeout: float) -> str | None:
    stopped = processes.stop_group(name, _pid(c, name), timeout=timeout)
    c.pid_file(name).unlink(missing_ok=True)
    return None if stopped.outcome == "not running" else str(stopped)


def _cgroup_dirs(c: RealNodeConfig) -> list[Path]:
    """Our cgroups in every hierarchy, deepest first."""
    found: list[Path] = []
    for hierarchy in host.cgroup_hierarchies():
        top = hierarchy / c.cgroup_root.lstrip("/")
        if top.is_dir():
            found += [Path(d) for d, _, _ in os.walk(top)]
    return sorted(found, key=lambda p: -len(p.parts))


def _cgroup_pids(c: RealNodeConfig) -> set[int]:
    pids: set[int] = set()
    for d in _cgroup_dirs(c):
        with contextlib.suppress(OSError):
            pids |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
    return pids


def _kill_until_gone(pids_of: Callable[[], set[int]], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        pids = pids_of()
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _our_processes(c: RealNodeConfig) -> set[int]:
    """containerd, kubelet, kube-proxy and the shims: each names our state dir or socket."""
    return {pid for pid, _ in host.processes_matching(str(c.state_dir))}


def _unmount(c: RealNodeConfig) -> None:
    for _ in range(3):
        mounts = host.mounts_under(c.state_dir)
        if not mounts:
            return
        for mount_point in mounts:
            if host.run("umount", str(mount_point), check=False).returncode != 0:
                host.run("umount", "-l", str(mount_point), check=False)


def _iptables_rules() -> list[tuple[str, str, str]]:
    """(iptables binary, table, ``-A ...`` line) of each rule or chain of ours."""
    found: list[tuple[str, str, str]] = []
    for binary, save in IPTABLES:
        if shutil.which(save) is None:
            continue
        for table in TABLES:
            out = host.run(save, "-t", table, check=False).stdout
            for line in out.splitlines():
                if any(p in line for p in OUR_CHAIN_PREFIXES) and line[:1] in (":", "-"):
                    found.append((binary, table, line))
    return found


def _remove_iptables() -> None:
    rules = _iptables_rules()
    chains = {(b, t, line[1:].split()[0]) for b, t, line in rules if line.startswith(":")}
    # rules in the built-in chains that jump to ours go first, then our chains are flushed and deleted
    for binary, table, line in rules:
        if line.startswith("-A ") and not line.split()[1].startswith(OUR_CHAIN_PREFIXES):
            host.run(binary, "-t", table, "-D", *shlex.split(line)[1:], check=False)
    for binary, table, chain in chains:
        host.run(binary, "-t", table, "-F", chain, check=False)
    for binary, table, chain in chains:
        host.run(binary, "-t", table, "-X", chain, check=False)


def _links(c: RealNodeConfig) -> list[str]:
    out = host.run("ip", "-o", "link", "show", check=False).stdout
    names: list[str] = []
    for line in out.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name == c.bridge or f" master {c.bridge} " in line:
            names.append(name)
    return names


def _delete_tasks(c: RealNodeConfig) -> list[str]:
    """With containerd still up: kill and delete every container's task, so that each runc shim
    removes its socket (under /run/containerd/s) and runc state and exits. The ids are returned."""
    if _pid(c, "containerd") is None or not c.containerd_socket.exists():
        return []
    try:
        ids = images.ctr(c, "containers", "ls", "-q", timeout=10.0).split()
    except (RuntimeError, subprocess.TimeoutExpired):
        return []
    for cid in ids:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            images.ctr(c, "tasks", "delete", "--force", cid, timeout=15.0)
    return ids


def _owns_host(c: RealNodeConfig) -> bool:
    """Whether the host-wide pieces (bridge, iptables chains, stale shim sockets) are this node's
    to take back: it started last, or no node holds the host (leftovers of a crash)."""
    if not HOST_OWNER.exists():
        return True
    return HOST_OWNER.read_text().strip() == str(c.state_dir)


def stop(c: RealNodeConfig, *, timeout: float = 10.0) -> list[str]:
    """Stop the real node and remove what it created; return what was done (one line each).
    The host-wide pieces are left alone while another cluster's real node holds the host."""
    owns_host = _owns_host(c)
    done = [s for s in (_stop(c, "kubelet", timeout), _stop(c, "kube-proxy", timeout)) if s]
    ids = _delete_tasks(c)
    if ids:
        done.append(f"deleted the tasks of {len(ids)} containers")
    if _cgroup_pids(c):
        done.append(f"killed {len(_cgroup_pids(c))} pod processes")
        _kill_until_gone(lambda: _cgroup_pids(c))
    stopped = _stop(c, "containerd", timeout)
    if stopped:
        done.append(stopped)
    left = _our_processes(c)
    if left:
        done.append(f"killed {len(left)} leftover processes (runc shims)")
        _kill_until_gone(lambda: _our_processes(c))
    _unmount(c)
    if owns_host:
        kube_proxy = c.binary("kube-proxy")
        if kube_proxy.exists() and _iptables_rules():
            host.run(str(kube_proxy), "--cleanup", check=False)
        _remove_iptables()
        for link in _links(c):
            host.run("ip", "link", "del", link, check=False)
    for d in _cgroup_dirs(c):
        for _ in range(20):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
    for cid in ids:  # libcni's result cache (outside our dirs): one file per sandbox and network
        for cached in CNI_CACHE.glob(f"results/*-{cid}-*"):
            cached.unlink(missing_ok=True)
    saved = c.state_dir / "ip_forward.saved"
    if owns_host:
        if saved.exists():
            Path("/proc/sys/net/ipv4/ip_forward").write_text(saved.read_text().strip())
        for cached in CNI_CACHE.glob(f"results/{c.cni_network}-*"):
            cached.unlink(missing_ok=True)
        for stale in _stale_shim_sockets():
            stale.unlink(missing_ok=True)
        HOST_OWNER.unlink(missing_ok=True)
    saved.unlink(missing_ok=True)
    # Runtime state goes (a fresh start next time); logs and the pause archive stay. Never through
    # a mount that is still there.
    if not host.mounts_under(c.state_dir):
        dirs = (c.containerd_dir, c.kubelet_root, c.state_dir / "cni", c.pod_logs_dir, c.state_dir / "nri")
        for d in (*dirs, c.pod_resources_proxy_dir.parent):
            shutil.rmtree(d, ignore_errors=True)
        for f in c.state_dir.glob("*.sock*"):
            f.unlink(missing_ok=True)
    return done


def leftovers(c: RealNodeConfig) -> list[str]:
    """Everything of the real node still on the host: processes, mounts, links, iptables rules,
    cgroups. Empty after a clean ``stop``."""
    found = [f"process {pid}: {cmd[:160]}" for pid, cmd in host.processes_matching(str(c.state_dir))]
    found += [f"process {pid} in {c.cgroup_root}" for pid in sorted(_cgroup_pids(c))]
    found += [f"mount {m}" for m in host.mounts_under(c.state_dir)]
    if _owns_host(c):
        found += [f"link {name}" for name in _links(c)]
        found += [f"{binary} -t {table}: {line}" for binary, table, line in _iptables_rules()]
        found += [f"stale shim socket {p}" for p in _stale_shim_sockets()]
        found += [f"file {f}" for f in CNI_CACHE.glob(f"results/{c.cni_network}-*")]
    found += [f"cgroup {d}" for d in _cgroup_dirs(c)]
    found += [f"cgroup {h / 'kubepods'}" for h in host.cgroup_hierarchies() if (h / "kubepods").exists()]
    return found
