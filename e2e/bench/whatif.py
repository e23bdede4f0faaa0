"""The cost of a what-if beside the plain scheduling of the same gang, in process (memory backend,
no API server): koord-scheduler's default profile with job-level preemption and network-topology
gangs, on GPU nodes in spines of 8 blocks of 32 nodes, a share of them (``--fill``) taken by
low-priority whole-node pods.

Two gangs of ``--members`` whole-node members per size:

- ``fits now``: no topology rule; the what-if answers yes with a node per member. Beside it, the
  plain scheduling of the same gang: its placement (the problem the first member's PreFilter
  builds and the solve) and the wall time until the scheduler has bound every member.
- ``after preemption``: MustGather at SpineLayer, which no spine holds with the fill: the what-if
  answers no, chooses the victims, bisects the largest gang and tries every relaxation. Beside
  it, the victim choice alone (the cycle's PostFilter without the evictions).

Beside each wall time, the process CPU time of the same calls (every thread: the solver's
included): on a shared machine whose other work takes the cores, wall time grows with the load and
CPU time much less, so a comparison of two versions run at different moments reads the CPU
columns. Nothing is asserted on time (``docs/benchmarks.md``).

To compare with an earlier version, run this file against that version's code:

    .venv/bin/python -m e2e.bench.whatif [--sizes 64x1000,256x5000] [--fill 0.9] [--repeat 20] [-o json]
    PYTHONPATH=/path/to/old/checkout .venv/bin/python e2e/bench/whatif.py ...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from apis.client.backend import NODES, PODGROUPS, PODS, TOPOLOGIES
from scheduler import solver
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.whatif.answer import WhatIfAnswer
from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.engine import what_if
from scheduler.whatif.preemption import choose
from scheduler.whatif.probe import build
from scheduler.whatif.request import WhatIfRequest
from scheduler.whatif.workload import Job, job_of_objects

SCHEDULER = "koord-scheduler"
SPINE, BLOCK, GPU = "network.topology.nvidia.com/spine", "network.topology.nvidia.com/block", "nvidia.com/gpu"
NODES_PER_BLOCK, BLOCKS_PER_SPINE = 32, 8
HIGH, LOW = 1_000_000, 1000

CONFIG = f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: {SCHEDULER}
  pluginConfig:
  - name: Coscheduling
    args:
      enablePreemption: true
      awareNetworkTopology: true
"""

TOPOLOGY = {
    "metadata": {"name": "default"},
    "spec": {
        "networkTopologySpec": [
            {"labelKey": [SPINE], "topologyLayer": "SpineLayer"},
            {"labelKey": [BLOCK], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
            {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
        ]
    },
}


@dataclass(frozen=True)
class Figures:
    members: int
    nodes: int
    case: str
    whatif_p50_ms: float
    whatif_p99_ms: float
    answer: str
    cycle_ms: float
    """The cycle's own cost for the same job: its placement (fits now) or its victim choice."""
    whatif_cpu_p50_ms: float
    whatif_cpu_p99_ms: float
    cycle_cpu_ms: float
    bound_ms: float | None = None
    """Fits now: the wall time until the scheduler bound every member of the submitted gang."""


def _pod(
    name: str, *, priority: int, node: str | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "priority": priority,
        "containers": [
            {
                "name": "c",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi", GPU: "8"}, "limits": {GPU: "8"}},
            }
        ],
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": spec,
    }


def gang(name: str, members: int, *, must_gather: str | None = None) -> list[dict[str, Any]]:
    annotations = {}
    if must_gather:
        annotations["gang.scheduling.koordinator.sh/network-topology-spec"] = json.dumps(
            {"gatherStrategy": [{"layer": must_gather, "strategy": "MustGather"}]}
        )
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"minMember": members},
    }
    pods = [
        _pod(f"{name}-{i}", priority=HIGH, labels={"pod-group.scheduling.sigs.k8s.io": name})
        for i in range(members)
    ]
    return [group, *pods]


def cluster(nodes: int, fill: float, seed: int = 0) -> MemoryBackend:
    backend = MemoryBackend()
    backend.apply(TOPOLOGIES, TOPOLOGIES.model.model_validate(TOPOLOGY))
    rng = random.Random(seed)
    for i in range(nodes):
        block = i // NODES_PER_BLOCK
        name = f"n{i}"
        backend.apply(
            NODES,
            {
                "metadata": {
                    "name": name,
                    "labels": {SPINE: f"s{block // BLOCKS_PER_SPINE}", BLOCK: f"b{block}"},
                },
                "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", GPU: "8"}},
            },
        )
        if rng.random() < fill:
            backend.apply(PODS, _pod(f"low-{i}", priority=LOW, node=name))
    return backend


async def _start(backend: MemoryBackend) -> tuple[SchedulerApp, asyncio.Event, asyncio.Task[None]]:
    config = load_config(CONFIG, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    # As koord-scheduler's process: the synced caches frozen out of the collector's walks.
    settings = AppSettings(profiles=tuple(config.profiles), freeze_synced_objects=True)
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.1)
    return app, stop, task


@dataclass(frozen=True)
class Samples:
    wall_ms: list[float]
    cpu_ms: list[float]


async def _times(run: Callable[[], Awaitable[object]], repeat: int) -> Samples:
    await run()
    wall, cpu = [], []
    for _ in range(repeat):
        started, cpu_started = time.perf_counter(), time.process_time()
        await run()
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
    return Samples(wall, cpu)


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def _what_if_ms(app: SchedulerApp, job: Job, repeat: int, time_limit: float) -> tuple[Samples, str]:
    fwk = app.frameworks[SCHEDULER]
    answers: list[WhatIfAnswer] = []

    async def one() -> None:
        answers.append(await what_if(WhatIfContext.of(fwk, app.cache, time_limit), job, profile=SCHEDULER))

    samples = await _times(one, repeat)
    answer = answers[-1]
    after = answer.after_preemption
    if answer.fits_now.fits:
        summary = "fits now"
    elif after is not None and after.fits:
        summary = f"fits after evicting {len(after.victims)}"
    else:
        summary = "does not fit"
    return samples, summary


async def measure(
    members: int, nodes: int, *, fill: float, repeat: int, time_limit: float = 10.0
) -> list[Figures]:
    backend = cluster(nodes, fill)
    app, stop, task = await _start(backend)
    out = []
    try:
        fwk = app.frameworks[SCHEDULER]
        for case, objects in (
            ("fits now", gang("fits", members)),
            ("after preemption", gang("spine", members, must_gather="SpineLayer")),
        ):
            request = WhatIfRequest.model_validate({"objects": objects, "timeLimitSeconds": time_limit})
            job = job_of_objects(request, SCHEDULER)
            samples, summary = await _what_if_ms(app, job, repeat, time_limit)
            ctx = WhatIfContext.of(fwk, app.cache, time_limit)
            bound_ms: float | None = None
            if case == "fits now":

                async def cycle(job: Job = job, ctx: WhatIfContext = ctx) -> None:
                    problem = build(ctx, job)
                    assert not isinstance(problem, str), problem
                    await asyncio.to_thread(solver.solve, problem)

                cycle_samples = await _times(cycle, repeat)
                bound_ms = await _schedule(backend, objects, members)
            else:

                async def victims(job: Job = job, ctx: WhatIfContext = ctx) -> None:
                    await choose(ctx, job, None)

                cycle_samples = await _times(victims, repeat)
            out.append(
                Figures(
                    members,
                    nodes,
                    case,
                    statistics.median(samples.wall_ms),
                    _p99(samples.wall_ms),
                    summary,
                    statistics.median(cycle_samples.wall_ms),
                    statistics.median(samples.cpu_ms),
                    _p99(samples.cpu_ms),
                    statistics.median(cycle_samples.cpu_ms),
                    bound_ms,
                )
            )
    finally:
        stop.set()
        await task
    return out


async def _schedule(backend: MemoryBackend, objects: list[dict[str, Any]], members: int) -> float:
    started = time.perf_counter()
    backend.apply(PODGROUPS, objects[0])
    for member in objects[1:]:
        backend.apply(PODS, member)
    names = {o["metadata"]["name"] for o in objects[1:]}
    while sum(1 for p in backend.list(PODS) if p.metadata.name in names and p.spec.node_name) < members:
        await asyncio.sleep(0.005)
        if time.perf_counter() - started > 120:
            raise TimeoutError("the gang was not bound within 120 s")
    elapsed = (time.perf_counter() - started) * 1000
    for name in names:  # the next case sees the cluster as before
        backend.delete(PODS, "default", name)
    await asyncio.sleep(0.2)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="64x1000,256x5000", help="MEMBERSxNODES, comma-separated")
    parser.add_argument("--fill", type=float, default=0.9, help="share of nodes a low-priority pod takes")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = parser.parse_args()
    results: list[Figures] = []
    for size in args.sizes.split(","):
        members, nodes = (int(x) for x in size.split("x"))
        results.extend(asyncio.run(measure(members, nodes, fill=args.fill, repeat=args.repeat)))
    if args.output == "json":
        print(json.dumps([asdict(r) for r in results], indent=2))
        return
    print(f"{'members':>7} {'nodes':>6}  {'case':<17} {'what-if p50':>11} {'p99':>8}", end="")
    print(f"  {'cycle':>8}  {'cpu p50':>8} {'p99':>8}  {'cycle':>8}  {'bound':>8}  answer")
    for r in results:
        bound = f"{r.bound_ms:.0f}" if r.bound_ms is not None else "-"
        print(
            f"{r.members:>7} {r.nodes:>6}  {r.case:<17} {r.whatif_p50_ms:>9.1f}ms {r.whatif_p99_ms:>6.1f}ms"
            f"  {r.cycle_ms:>6.1f}ms  {r.whatif_cpu_p50_ms:>6.1f}ms {r.whatif_cpu_p99_ms:>6.1f}ms"
            f"  {r.cycle_cpu_ms:>6.1f}ms  {bound:>6}ms  {r.answer}"
        )


if __name__ == "__main__":
    main()
