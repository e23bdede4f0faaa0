"""Quota trees at scale: koord-scheduler's throughput and quota-update latency with 10,000 quotas
five levels deep and pods in every leaf, beside the same run without quotas.

    python -m e2e.bench.quota_tree [--fanout 4 5 5 5 20] [--pods-per-leaf 1] [--nodes 500]
                                   [--changes 200] [-o table|json]

Method
------

In one process, on the in-memory backend (no API server: what is measured is the scheduler's own
work, not the API server's), with the default profile:

1. **Quotas.** A tree under ``koordinator-root-quota`` with ``--fanout`` children per level (the
   default, 4 x 5 x 5 x 5 x 20, gives 10,000 leaves and 10,624 quotas five levels deep); every
   quota's min is its share of the cluster, its max twice that.
2. **Throughput.** ``--pods-per-leaf`` pods of 100m CPU in every leaf's namespace are created at
   once; pods per second from the first creation to the last binding. The run without quotas
   creates the same pods with no quota objects (every pod in ``koordinator-default-quota``).
3. **Quota-update latency.** ``--changes`` times: one more pod in a random leaf, then the time the
   ElasticQuota plugin takes to have every quota's figures true again (``quota_figures()``, as
   the next PreFilter asks); beside it, the same figures computed from scratch (what each pod
   change cost before incremental updates). Then ``--changes`` times a random leaf's max
   changes, and the same time is taken.

Nothing is asserted; the exit code is 0 unless a pod stays unbound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from math import prod
from typing import Any

from apis.client.backend import ELASTICQUOTAS, NODES, PODS
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.snapshot import Snapshot
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.elastic_quota import ElasticQuota

Q = "quota.scheduling.koordinator.sh/"
NODE_CPU = 64


@dataclass
class Result:
    quotas: int
    leaves: int
    pods: int
    seconds_with_quotas: float
    seconds_without: float
    update_ms_p50: float
    update_ms_p99: float
    full_ms_p50: float
    full_ms_p99: float
    quota_ms_p50: float
    quota_ms_p99: float
    unbound: int

    @property
    def pods_per_second_with_quotas(self) -> float:
        return self.pods / self.seconds_with_quotas if self.seconds_with_quotas else 0.0

    @property
    def pods_per_second_without(self) -> float:
        return self.pods / self.seconds_without if self.seconds_without else 0.0


def _progress(message: str) -> None:
    print(f"[quota_tree] {message}", file=sys.stderr, flush=True)


def quota_objects(fanout: list[int], cluster_cpu: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The tree (parents before children) and its leaves' names."""
    objects: list[dict[str, Any]] = []
    level = [("", cluster_cpu * 1000)]
    for depth, width in enumerate(fanout):
        last = depth == len(fanout) - 1
        below = []
        for parent, milli in level:
            for i in range(width):
                name = f"{parent}-{i}" if parent else f"q{i}"
                share = milli // width
                labels = {Q + "parent": parent} if parent else {}
                if not last:
                    labels[Q + "is-parent"] = "true"
                objects.append(
                    {
                        "metadata": {"name": name, "namespace": name, "labels": labels},
                        "spec": {"min": {"cpu": f"{share}m"}, "max": {"cpu": f"{2 * share}m"}},
                    }
                )
                below.append((name, share))
        level = below
    return objects, [name for name, _ in level]


def pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
        },
    }


@dataclass
class Running:
    app: SchedulerApp
    stop: asyncio.Event
    task: asyncio.Task[None]

    async def close(self) -> None:
        self.stop.set()
        await self.task


async def _run(backend: MemoryBackend, pods: list[dict[str, Any]]) -> tuple[float, Running]:
    """Start a scheduler, create ``pods`` at once; seconds to the last binding, and the scheduler."""
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    app = SchedulerApp(
        AppSettings(profiles=tuple(config.profiles)), backend, DEFAULT_REGISTRY, SchedulerMetrics()
    )
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.2)
    start = time.perf_counter()
    for p in pods:
        backend.apply(PODS, p)
    last_bound, seen = start, 0
    while True:
        bound = sum(1 for p in backend.list(PODS) if p.spec.node_name)
        if bound != seen:
            seen, last_bound = bound, time.perf_counter()
        if bound == len(pods) or time.perf_counter() - last_bound > 30:
            break
        await asyncio.sleep(0.05)
    return last_bound - start, Running(app, stop, task)


def _nodes(backend: MemoryBackend, count: int) -> None:
    for i in range(count):
        backend.apply(
            NODES,
            {
                "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {"cpu": str(NODE_CPU), "memory": "256Gi", "pods": "500"}},
            },
        )


async def _changed(read: Callable[[], int], old: int) -> None:
    """Until ``read()`` is no longer ``old``: the in-memory watch has handed the change over."""
    for _ in range(100_000):
        if read() != old:
            return
        await asyncio.sleep(0)
    raise RuntimeError("the change never reached the ElasticQuota plugin")


def _ms(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


async def run(fanout: list[int], pods_per_leaf: int, nodes: int, changes: int, seed: int = 0) -> Result:
    rng = random.Random(seed)
    objects, leaves = quota_objects(fanout, nodes * NODE_CPU)
    workload = [pod(f"p{j}", leaf) for leaf in leaves for j in range(pods_per_leaf)]

    _progress(f"without quotas: {len(workload)} pods on {nodes} nodes")
    plain = MemoryBackend()
    _nodes(plain, nodes)
    seconds_without, running = await _run(plain, workload)
    await running.close()

    _progress(f"with {len(objects)} quotas ({len(leaves)} leaves)")
    backend = MemoryBackend()
    _nodes(backend, nodes)
    for obj in objects:
        backend.apply(ELASTICQUOTAS, obj)
    seconds_with, running = await _run(backend, workload)
    unbound = sum(1 for p in backend.list(PODS) if not p.spec.node_name)

    plugin = next(iter(running.app.frameworks.values())).plugin("ElasticQuota")
    assert isinstance(plugin, ElasticQuota)
    _progress(f"{changes} quota updates")
    incremental, full, respec = [], [], []
    for i in range(changes):
        version = plugin.ledger.version
        backend.apply(PODS, pod(f"extra-{i}", rng.choice(leaves)))
        await _changed(lambda: plugin.ledger.version, version)
        began = time.perf_counter()
        plugin.quota_figures()
        incremental.append(time.perf_counter() - began)
        began = time.perf_counter()
        plugin._compute(plugin.ledger.usage(), Snapshot(running.app.cache))
        full.append(time.perf_counter() - began)
    by_name = {obj["metadata"]["name"]: obj for obj in objects}
    for i in range(changes):
        changed = dict(by_name[rng.choice(leaves)])
        spec = changed["spec"]
        changed["spec"] = {"min": spec["min"], "max": {"cpu": f"{i + 1}{spec['max']['cpu']}"}}
        version = plugin.index.spec_version
        backend.apply(ELASTICQUOTAS, changed)
        await _changed(lambda: plugin.index.spec_version, version)
        began = time.perf_counter()
        plugin.quota_figures()
        respec.append(time.perf_counter() - began)
    await running.close()
    update = _ms(incremental)
    whole = _ms(full)
    quota_update = _ms(respec)
    return Result(
        quotas=len(objects),
        leaves=len(leaves),
        pods=len(workload),
        seconds_with_quotas=seconds_with,
        seconds_without=seconds_without,
        update_ms_p50=update[0],
        update_ms_p99=update[1],
        full_ms_p50=whole[0],
        full_ms_p99=whole[1],
        quota_ms_p50=quota_update[0],
        quota_ms_p99=quota_update[1],
        unbound=unbound,
    )


def render(result: Result) -> str:
    with_q, without = result.pods_per_second_with_quotas, result.pods_per_second_without
    return "\n".join(
        [
            f"quotas {result.quotas} ({result.leaves} leaves), pods {result.pods}",
            f"{'run':<16} {'seconds':>8} {'pods/s':>8}",
            f"{'without quotas':<16} {result.seconds_without:>8.2f} {without:>8.0f}",
            f"{'with quotas':<16} {result.seconds_with_quotas:>8.2f} {with_q:>8.0f}",
            f"quota update after one pod: p50 {result.update_ms_p50:.2f} ms, "
            f"p99 {result.update_ms_p99:.2f} ms (from scratch: p50 {result.full_ms_p50:.1f} ms, "
            f"p99 {result.full_ms_p99:.1f} ms)",
            f"quota update after one quota's max changed: p50 {result.quota_ms_p50:.2f} ms, "
            f"p99 {result.quota_ms_p99:.2f} ms",
            f"unbound pods: {result.unbound}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.bench.quota_tree", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--fanout", type=int, nargs="+", default=[4, 5, 5, 5, 20])
    parser.add_argument("--pods-per-leaf", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("-o", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    if prod(args.fanout) * args.pods_per_leaf * 100 > args.nodes * NODE_CPU * 1000:
        parser.error("the pods do not fit the nodes: add --nodes")
    result = asyncio.run(run(args.fanout, args.pods_per_leaf, args.nodes, args.changes))
    if args.o == "json":
        print(
            json.dumps(
                {
                    **asdict(result),
                    "pods_per_second_with_quotas": result.pods_per_second_with_quotas,
                    "pods_per_second_without": result.pods_per_second_without,
                }
            )
        )
    else:
        print(render(result))
    return 1 if result.unbound else 0


if __name__ == "__main__":
    sys.exit(main())
