"""Gang placement: CP-SAT against Koordinator's greedy plan on the same fragmented clusters.

    python -m e2e.bench.gang_placement [--nodes 1000 5000] [--gang-sizes 8 64 256 1024] [--trials N]
                                       [--time-limit 1.0] [--relative-gap 0.01] [--workers 2] [--seed 0]

Method
------

1. **Cluster.** Built in memory, no API server: ``--nodes`` 8-GPU nodes (128 cores) under two
   spines; blocks per spine grow with the cluster (8 at 1,000 nodes, 32 at 5,000; about 60-80
   nodes per block). Each node's free capacity is random and fragmented: free GPUs are 0..8,
   drawn so that about a third of nodes are busy (0-1 free), most are partly free and few are
   empty; free CPU follows the free GPUs with noise. Each trial draws a new cluster from
   ``--seed`` + trial.
2. **Gang.** ``size`` members of 2 GPUs and 16 cores each, ranks 0..size-1, topology spec
   BlockLayer PreferGather and SpineLayer PreferGather (no MustGather), node scores from a
   GPU bin-packing score (100 for a node whose free GPUs the member would exactly use up).
3. **Strategies.** The same problem goes to ``strategy="greedy"`` (algorithms.md 2.3) and to
   ``strategy="cpsat"`` (hint = greedy, ``--time-limit`` s, ``--relative-gap``, ``--workers``,
   fixed seed), in the same process, one after the other.

Figures per (nodes, gang size, strategy): gangs placed out of the trials; share of placed gangs
inside one block; mean blocks and spines used per placed gang; mean bin-packing score per member
(0..100, the term ranked after topology); solve latency p50 / p99 in ms
(wall time of ``solve``, including model building and, for CP-SAT, the greedy hint); for CP-SAT
the share of solves proven optimal or within the relative gap (status OPTIMAL) and the largest
proven gap; statuses. Nothing is asserted; the exit code is 0 unless a plan breaks a rule.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace

from scheduler.solver import (
    Infeasible,
    NodeSpec,
    PlacementProblem,
    Plan,
    PodGroupSpec,
    ResourceVector,
    SolveOptions,
    TopologyLayer,
    solve,
    violations,
)

RESOURCES = ("nvidia.com/gpu", "cpu")
GPUS_PER_NODE = 8
CPU_PER_NODE = 128_000
MEMBER = ResourceVector((2, 16_000))


def build_cluster(n_nodes: int, rng: random.Random) -> tuple[NodeSpec, ...]:
    """A fragmented two-spine cluster; blocks per spine scale with the node count."""
    blocks_per_spine = max(4, min(32, n_nodes // 150))
    n_blocks = 2 * blocks_per_spine
    gpu_weights = [18, 14, 9, 9, 10, 10, 10, 10, 10]  # P(free GPUs = 0..8)
    nodes = []
    for i in range(n_nodes):
        block = i * n_blocks // n_nodes
        spine = block // blocks_per_spine
        gpus = rng.choices(range(GPUS_PER_NODE + 1), weights=gpu_weights)[0]
        cpu = min(CPU_PER_NODE, gpus * 16_000 + rng.randrange(0, 24_000, 1000))
        nodes.append(
            NodeSpec(f"node-{i:05d}", ResourceVector((gpus, cpu)), (f"s{spine}", f"s{spine}-b{block:02d}"))
        )
    return tuple(nodes)


def binpack_scores(nodes: tuple[NodeSpec, ...]) -> dict[str, int]:
    """MostAllocated-style on GPUs for one member: the fuller the node after placing, the higher."""
    out = {}
    for n in nodes:
        free = n.free.values[0]
        out[n.name] = 0 if free < MEMBER.values[0] else 100 - (free - MEMBER.values[0]) * 100 // GPUS_PER_NODE
    return out


def build_problem(nodes: tuple[NodeSpec, ...], size: int, options: SolveOptions) -> PlacementProblem:
    members = tuple(f"worker-{r}" for r in range(size))
    return PlacementProblem(
        gang="bench/train",
        resources=RESOURCES,
        pod_groups=(PodGroupSpec("worker", MEMBER, members, tuple(range(size))),),
        nodes=nodes,
        layers=(TopologyLayer("SpineLayer", "PreferGather"), TopologyLayer("BlockLayer", "PreferGather")),
        node_scores=binpack_scores(nodes),
        options=options,
    )


@dataclass
class Row:
    placed: int = 0
    trials: int = 0
    one_block: int = 0
    blocks: list[int] = field(default_factory=list)
    spines: list[int] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    score: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    gaps: list[float] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[idx]


def measure(
    n_nodes: int,
    size: int,
    *,
    trials: int,
    time_limit: float = 1.0,
    relative_gap: float = SolveOptions().relative_gap,
    workers: int = 2,
    seed: int = 0,
) -> tuple[dict[str, Row], int]:
    """Both strategies on ``trials`` clusters of ``n_nodes`` for one gang ``size``: their rows, and
    how many plans broke a rule."""
    broken = 0
    rows = {"greedy": Row(), "cpsat": Row()}
    for trial in range(trials):
        nodes = build_cluster(n_nodes, random.Random(seed * 7919 + trial * 104729 + n_nodes))
        base = SolveOptions(
            time_limit_seconds=time_limit, workers=workers, seed=seed, relative_gap=relative_gap
        )
        for strategy in ("greedy", "cpsat"):
            problem = build_problem(nodes, size, replace(base, strategy=strategy))
            t0 = time.perf_counter()
            result = solve(problem)
            ms = (time.perf_counter() - t0) * 1000
            row = rows[strategy]
            row.trials += 1
            row.ms.append(ms)
            if isinstance(result, Infeasible):
                row.statuses[result.reason] += 1
                continue
            assert isinstance(result, Plan)
            if violations(problem, result.assignment):
                broken += 1
            used = dict(result.domains_used)
            row.placed += 1
            row.blocks.append(used["BlockLayer"])
            row.spines.append(used["SpineLayer"])
            row.one_block += used["BlockLayer"] == 1
            row.score.append(-result.objective[-1] / size)
            row.statuses[result.status] += 1
            if result.gap is not None:
                row.gaps.append(result.gap)
    return rows, broken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--gang-sizes", type=int, nargs="+", default=[8, 64, 256, 1024])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=1.0)
    parser.add_argument("--relative-gap", type=float, default=SolveOptions().relative_gap)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    broken = 0
    header = (
        f"{'nodes':>6} {'gang':>5} {'strategy':<7} {'placed':>7} {'1 block':>8} {'blocks':>7} "
        f"{'spines':>7} {'score':>6} {'p50 ms':>8} {'p99 ms':>8} {'proven':>7} {'max gap':>8}  statuses"
    )
    print(header)
    print("-" * len(header))
    for n_nodes in args.nodes:
        for size in args.gang_sizes:
            rows, broke = measure(
                n_nodes,
                size,
                trials=args.trials,
                time_limit=args.time_limit,
                relative_gap=args.relative_gap,
                workers=args.workers,
                seed=args.seed,
            )
            broken += broke
            for strategy, row in rows.items():
                share = f"{row.one_block / row.placed:.0%}" if row.placed else "-"
                blocks = f"{statistics.mean(row.blocks):.2f}" if row.blocks else "-"
                spines = f"{statistics.mean(row.spines):.2f}" if row.spines else "-"
                score = f"{statistics.mean(row.score):.1f}" if row.score else "-"
                statuses = " ".join(f"{k}={v}" for k, v in sorted(row.statuses.items()))
                proven = f"{row.statuses['OPTIMAL'] / row.trials:.0%}" if strategy == "cpsat" else "-"
                max_gap = f"{max(row.gaps):.2%}" if row.gaps else "-"
                print(
                    f"{n_nodes:>6} {size:>5} {strategy:<7} {row.placed:>3}/{row.trials:<3} {share:>8} "
                    f"{blocks:>7} {spines:>7} {score:>6} {percentile(row.ms, 50):>8.1f} "
                    f"{percentile(row.ms, 99):>8.1f} {proven:>7} {max_gap:>8}  {statuses}",
                    flush=True,
                )
    if broken:
        print(f"{broken} plans broke a rule", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
