"""The processes under test: the upstream kube-scheduler as a component, readiness, the CPU each
process uses over a measured window, and what is kept of them afterwards (metrics, cluster logs)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from pathlib import Path

import aiohttp

from e2e.bench.harness import BenchError, log_progress
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent

__all__ = [
    "KOORD",
    "KUBE",
    "KUBE_PROFILE",
    "CpuMeter",
    "cluster_pids",
    "cpu_seconds",
    "keep_cluster_logs",
    "kube_scheduler",
    "peak_rss_mib",
    "save_metrics",
    "settle",
    "wait_ready",
]

KOORD = "koord-scheduler"
KUBE = "kube-scheduler"
KUBE_PROFILE = "kube-bench"
"""The schedulerName of kube-scheduler's one profile (its pods name it)."""

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of ``pid`` (all its threads) so far."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def peak_rss_mib(pid: int) -> float | None:
    """The most memory ``pid`` has held resident so far (``VmHWM``), in MiB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def cluster_pids(cp: ControlPlane) -> dict[str, int]:
    pids: dict[str, int] = {}
    pid_dir = cp.kwok_workdir / "clusters" / cp.name / "pids"
    for pid_file in sorted(pid_dir.glob("*.pid")) if pid_dir.exists() else []:
        with contextlib.suppress(ValueError, OSError):
            pids[pid_file.stem] = int(pid_file.read_text().strip())
    return pids


class CpuMeter:
    """CPU share of one core used by each process between ``start`` and ``stop``."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._began = 0.0
        self._before: dict[str, float] = {}

    def start(self) -> None:
        self._began = time.monotonic()
        self._before = {name: s for name, pid in self.pids.items() if (s := cpu_seconds(pid)) is not None}

    def stop(self) -> dict[str, float]:
        elapsed = max(time.monotonic() - self._began, 1e-9)
        usage = {}
        for name, before in self._before.items():
            after = cpu_seconds(self.pids[name])
            if after is not None:
                usage[name] = round(100 * (after - before) / elapsed, 1)
        return usage


async def settle(
    pids: dict[str, int], *, below: float = 60.0, window: float = 2.0, within: float = 180.0
) -> float:
    """Wait until ``pids`` together use less than ``below`` percent of one core over ``window``
    seconds, for at most ``within`` seconds; the last window's share. After 50,000 pods are
    created KWOK and the API server take both cores for minutes (the bound pods' status), and
    whatever lists then pays for it; an idle 5,000-node cluster takes 30-40% of one."""
    deadline = time.monotonic() + within
    while True:
        meter = CpuMeter(pids)
        meter.start()
        await asyncio.sleep(window)
        share = sum(meter.stop().values())
        if share < below or time.monotonic() >= deadline:
            return share
        log_progress(f"waiting for the cluster to settle: {share:.0f}% of a core")


async def _http_ok(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url, ssl=False, timeout=aiohttp.ClientTimeout(total=2)) as response:
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError, OSError):
        return False


async def wait_ready(component: LocalComponent, url: str, within: float) -> float:
    """The monotonic time at which ``url`` first answered 200 (polled every 50ms)."""
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if component.pid() is None:
                raise BenchError(f"{component.name} exited:\n{component.log_tail()}")
            if await _http_ok(session, url):
                return time.monotonic()
            await asyncio.sleep(0.05)
    raise BenchError(f"{component.name} was not ready in {within:.0f}s:\n{component.log_tail()}")


async def save_metrics(url: str, path: Path) -> None:
    """Keep the scheduler's /metrics at the end of its run, for looking into where its time went."""
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as r,
        ):
            data = await r.read()
        await asyncio.to_thread(path.write_bytes, data)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        log_progress(f"could not save {url}: {exc}")


def kube_scheduler(cp: ControlPlane, config: Path, port: int) -> LocalComponent:
    return LocalComponent(
        name=KUBE,
        argv=(
            cp.tool("kube-scheduler"),
            f"--config={config}",
            f"--authentication-kubeconfig={cp.kubeconfig}",
            f"--authorization-kubeconfig={cp.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={cp.state_dir / 'kube-scheduler-certs'}",
        ),
        cluster=cp,
    )


def keep_cluster_logs(cp: ControlPlane) -> None:
    """Copy the control plane's logs to ``.cluster/<name>/cluster-logs/`` (stopping deletes them)."""
    logs = cp.kwok_workdir / "clusters" / cp.name / "logs"
    if logs.exists():
        target = cp.state_dir / "cluster-logs"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(logs, target)
