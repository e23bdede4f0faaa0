"""Victim selection at scale: CP-SAT against Koordinator's greedy, in process, same problems.

    python -m e2e.bench.victim_selection [--sizes 100x16,1000x64,5000x256] [--seconds 1.0] [--seed 0]
                                         [--trials 1] [--relative-gap 0.01]

Each size ``NxM`` is N nodes of 4 CPU, every node full of four 1-CPU running pods of random
priority (100, 200 or 300); half of those pods belong to one of 50 eight-pod gangs, the rest are
single pods. A job of M members of 3 CPU must fit. Both selectors get the same problem; CP-SAT
gets ``--seconds`` (the scheduler's ``solverTimeLimitSeconds``). Printed per size and selector:
the objective (highest victim priority rank, PDB violations, victim jobs, pods of those jobs, pods
evicted: smaller is better, compared left to right), the status, the wall time, the model size and
the proven relative gap (of the weighted last term, among the nodes modelled). With ``--trials N``
each size is drawn N times (seeds ``--seed`` .. ``--seed`` + N - 1) and a summary per size gives
both selectors' p50 / p99 wall time, CP-SAT's answers within the gap, and how often CP-SAT was
cheaper than greedy. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.solver import (
    NodeSpec,
    PlacementProblem,
    PodGroupSpec,
    PreemptionProblem,
    ResourceVector,
    SolveOptions,
    VictimSelection,
    VictimSpec,
    select_victims,
)
from scheduler.solver.victim_greedy import select_greedy

GANGS = 50
GANG_SIZE = 8


def problem(
    nodes: int, members: int, seconds: float, seed: int, relative_gap: float = SolveOptions().relative_gap
) -> PreemptionProblem:
    rng = random.Random(seed)
    node_specs = tuple(NodeSpec(f"n{i}", ResourceVector((0, 0))) for i in range(nodes))
    victims = tuple(
        VictimSpec(
            uid=f"v{i}-{j}",
            name=f"default/v{i}-{j}",
            node=f"n{i}",
            request=ResourceVector((1000, 1 << 30)),
            priority=rng.choice([100, 200, 300]),
            job=rng.choice([f"gang-{i % GANGS}", f"v{i}-{j}"]),
        )
        for i in range(nodes)
        for j in range(4)
    )
    job = PodGroupSpec("job", ResourceVector((3000, 1 << 30)), tuple(f"m{k}" for k in range(members)))
    placement = PlacementProblem(
        gang="default/job",
        resources=("cpu", "memory"),
        pod_groups=(job,),
        nodes=node_specs,
        options=SolveOptions(time_limit_seconds=seconds, relative_gap=relative_gap),
    )
    return PreemptionProblem(placement, victims, {f"gang-{g}": GANG_SIZE for g in range(GANGS)})


def row(size: str, selector: str, selection: VictimSelection | None, seconds: float) -> str:
    if selection is None:
        return f"{size:>10}  {selector:<7}  {'none':<24}  {'-':<15}  {seconds:7.3f}  {'-':>9}"
    objective = "(" + ", ".join(str(x) for x in selection.objective) + ")"
    gap = "-" if selection.gap is None else f"{selection.gap:.2%}"
    return (
        f"{size:>10}  {selector:<7}  {objective:<24}  {selection.status:<15}  {seconds:7.3f}  "
        f"{selection.variables:>9}  {gap:>6}"
    )


@dataclass
class Measured:
    """One size over its trials: each selector's wall times and objectives (None: no selection),
    and how often CP-SAT was within the gap and cheaper than greedy."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: {"greedy": [], "cpsat": []})
    objectives: dict[str, list[tuple[int, ...] | None]] = field(
        default_factory=lambda: {"greedy": [], "cpsat": []}
    )
    within: int = 0
    cheaper: int = 0


def measure(
    nodes: int,
    members: int,
    *,
    trials: int,
    seconds: float = 1.0,
    seed: int = 0,
    relative_gap: float = SolveOptions().relative_gap,
    on_row: Callable[[str], None] = lambda _: None,
) -> Measured:
    """Both selectors on ``trials`` draws of one size (seeds ``seed`` ..), each answer shown to
    ``on_row`` as a table row."""
    size = f"{nodes}x{members}"
    out = Measured()
    for trial in range(trials):
        print(f"[bench] {size}: building the problem", file=sys.stderr)
        built = problem(nodes, members, seconds, seed + trial, relative_gap)
        started = time.perf_counter()
        greedy = select_greedy(built)
        out.seconds["greedy"].append(time.perf_counter() - started)
        on_row(row(size, "greedy", greedy, out.seconds["greedy"][-1]))
        started = time.perf_counter()
        cpsat = select_victims(built)
        out.seconds["cpsat"].append(time.perf_counter() - started)
        on_row(row(size, "cpsat", cpsat, out.seconds["cpsat"][-1]))
        for name, selection in (("greedy", greedy), ("cpsat", cpsat)):
            out.objectives[name].append(None if selection is None else tuple(selection.objective))
        if cpsat is not None and cpsat.gap is not None and cpsat.gap <= relative_gap:
            out.within += 1
        if cpsat is not None and greedy is not None and cpsat.objective < greedy.objective:
            out.cheaper += 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench.victim_selection", description=__doc__)
    parser.add_argument("--sizes", default="100x16,1000x64,5000x256")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--relative-gap", type=float, default=SolveOptions().relative_gap)
    args = parser.parse_args(argv)
    print(f"{'nodes x M':>10}  {'solver':<7}  {'objective':<24}  {'status':<15}  {'seconds':>7}  ", end="")
    print(f"{'variables':>9}  {'gap':>6}")
    summaries = []
    for size in args.sizes.split(","):
        nodes, members = (int(x) for x in size.split("x"))
        measured = measure(
            nodes,
            members,
            trials=args.trials,
            seconds=args.seconds,
            seed=args.seed,
            relative_gap=args.relative_gap,
            on_row=print,
        )
        if args.trials > 1:
            g, c = measured.seconds["greedy"], measured.seconds["cpsat"]
            summaries.append(
                f"{size:>10}  greedy p50 {_pct(g, 50):.3f} p99 {_pct(g, 99):.3f}"
                f"  cpsat p50 {_pct(c, 50):.3f} p99 {_pct(c, 99):.3f}"
                f"  within gap {measured.within}/{args.trials}"
                f"  cheaper than greedy {measured.cheaper}/{args.trials}"
            )
    if summaries:
        print("\nseconds per selection:")
        print("\n".join(summaries))
    return 0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


if __name__ == "__main__":
    sys.exit(main())
