"""The cost of placed reservations in one scheduling cycle, in process (memory backend, no API
server): the default profile's PreFilter, Filter, PreScore and Score, and the Reservation
plugin's own share, for a pod that owns no reservation and for an owner pod, with
``--reservations`` placed reservations (the throughput benchmark's, ``throughput_reservations``)
against none in the same run.

    .venv/bin/python -m e2e.bench.reservation_cycle [--nodes 1000] [--reservations 1000] [--repeat 50]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from apis.client.backend import NODES, RESERVATIONS
from apis.core import Pod
from apis.extension.reservation import LABEL_RESERVATION_IGNORED
from apis.scheduling.reservation import Reservation
from e2e.bench.processes import KOORD
from e2e.bench.throughput_model import Options
from e2e.bench.throughput_reservations import placed_reservations, reservations
from e2e.bench.throughput_workload import bench_description, workload
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.config import load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.reservation.plugin import NAME as RESERVATION
from scheduler.plugins.reservation.plugin import ReservationPlugin

CONFIG = f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: {KOORD}
"""


@dataclass(frozen=True)
class Timing:
    profile_ms: float
    plugin_ms: float
    restored: bool
    """The Reservation plugin found reservations the pod may use (and restored their room)."""


def _median_ms(run: Callable[[], object], repeat: int) -> float:
    run()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def _profile_cycle(fw: Framework, pod: PodInfo, snapshot: Snapshot) -> None:
    state = CycleState()
    try:
        status, _ = fw.run_pre_filter(state, pod, snapshot)
        assert status.ok, status
        rows, status = fw.run_filter(state, pod, snapshot, snapshot.candidate_rows(), Diagnosis())
        assert status.ok, status
        assert rows.size
        assert fw.run_pre_score(state, pod, snapshot, rows).ok
        fw.run_score(state, pod, snapshot, rows)
    finally:
        snapshot.close()


def _plugin(fw: Framework) -> ReservationPlugin:
    plugin = fw.plugin(RESERVATION)
    assert isinstance(plugin, ReservationPlugin)
    return plugin


def _plugin_cycle(fw: Framework, pod: PodInfo, snapshot: Snapshot) -> None:
    """The Reservation plugin's PreFilter, Filter, PreScore and Score alone."""
    plugin = _plugin(fw)
    state = CycleState()
    try:
        result = plugin.pre_filter(state, pod, snapshot)
        if result.status.code == Code.SKIP:
            return
        rows = snapshot.candidate_rows()
        plugin.filter(state, pod, snapshot, rows)
        if plugin.pre_score(state, pod, snapshot, rows).ok:
            plugin.score(state, pod, snapshot, rows)
    finally:
        snapshot.close()


def _restores(fw: Framework, pod: PodInfo, snapshot: Snapshot) -> bool:
    """Whether the plugin's PreFilter restores some reservation's room for ``pod``."""
    plugin = _plugin(fw)
    try:
        plugin.pre_filter(CycleState(), pod, snapshot)
        return any(snapshot.is_lifted(reservation.uid) for reservation in plugin.store.placed())
    finally:
        snapshot.close()


async def _until(check: Callable[[], bool], seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the scheduler did not sync its caches")
        await asyncio.sleep(0.05)


def bench_pods(reservations: int) -> dict[str, PodInfo]:
    """A pod of the throughput workload that owns no reservation, one that owns
    ``reserved-00000``, and one labelled ``reservation-ignored`` (may use every reservation's room)."""
    plain = workload("bench", KOORD, 1)[0]
    owner = workload("bench", KOORD, 1, reservations=max(1, reservations), owner_share=1.0)[0]
    ignored = workload("bench", KOORD, 1)[0]
    ignored["metadata"]["labels"][LABEL_RESERVATION_IGNORED] = "true"
    return {
        kind: PodInfo.of(Pod.model_validate(pod))
        for kind, pod in (("plain pod", plain), ("owner pod", owner), ("ignored pod", ignored))
    }


async def measure(opts: Options, pods: dict[str, PodInfo], repeat: int) -> dict[str, Timing]:
    """Median milliseconds per cycle for each pod, with ``opts.reservations`` placed reservations
    on ``opts.nodes`` nodes."""
    description = bench_description(opts)
    backend = MemoryBackend()
    for node in description.nodes():
        backend.apply(NODES, node)
    names = [node["metadata"]["name"] for node in description.nodes()]
    for obj in placed_reservations(reservations(opts.reservations), names):
        backend.apply(RESERVATIONS, Reservation.model_validate(obj))
    loaded = load_config(CONFIG, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    app = SchedulerApp(
        AppSettings(profiles=tuple(loaded.profiles)), backend, DEFAULT_REGISTRY, SchedulerMetrics()
    )
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        await _until(lambda: app.ready and app.cache.sizes()[1] >= opts.reservations)
        fw = app.frameworks[KOORD]
        snapshot = Snapshot(app.cache)
        timings = {}
        for kind, pod in pods.items():
            timings[kind] = Timing(
                _median_ms(functools.partial(_profile_cycle, fw, pod, snapshot), repeat),
                _median_ms(functools.partial(_plugin_cycle, fw, pod, snapshot), repeat),
                _restores(fw, pod, snapshot),
            )
        return timings
    finally:
        stop.set()
        await task


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--reservations", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    pods = bench_pods(args.reservations)
    for count in (0, args.reservations):
        opts = Options(nodes=args.nodes, reservations=count)
        timings = asyncio.run(measure(opts, pods, args.repeat))
        for kind, timing in timings.items():
            print(
                f"{args.nodes} nodes, {count:5d} reservations, {kind}: default profile "
                f"{timing.profile_ms:6.2f} ms/cycle, Reservation plugin {timing.plugin_ms:6.3f} ms"
                + (" (room restored)" if timing.restored else "")
            )


if __name__ == "__main__":
    main()
