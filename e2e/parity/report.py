"""The parity report as text: one row per workload, both schedulers side by side, then every
violation and what each scheduler left unbound."""

from __future__ import annotations

from e2e.bench.processes import KOORD, KUBE
from e2e.parity.run import Outcome, ParityReport

__all__ = ["render", "same_node_share", "verdict"]


def same_node_share(kube: Outcome, koord: Outcome) -> float | None:
    """The share of pods bound by both that landed on the same node (kube-scheduler breaks ties at
    random, so 1.0 is not expected where several nodes score the same)."""
    both = set(kube.placements) & set(koord.placements)
    if not both:
        return None
    return sum(1 for p in both if kube.placements[p] == koord.placements[p]) / len(both)


def verdict(kube: Outcome | None, koord: Outcome | None) -> str:
    """``ok``, or what is wrong: the checker disagreeing with kube-scheduler, koord-scheduler
    violating a constraint, or binding fewer pods."""
    if kube is None or koord is None:
        return "not run"
    problems = []
    if kube.violations:
        problems.append("checker rejects kube-scheduler")
    if koord.violations:
        problems.append("koord-scheduler violates")
    if koord.bound < kube.bound:
        problems.append("koord-scheduler binds fewer")
    return "; ".join(problems) or "ok"


def _soft(outcome: Outcome | None) -> str:
    if outcome is None or not outcome.soft:
        return "-"
    return ", ".join(f"{name} {value:g}" for name, value in outcome.soft.items())


def render(report: ParityReport) -> str:
    header = [
        "WORKLOAD",
        "PODS",
        "KUBE BOUND",
        "KOORD BOUND",
        "KUBE VIOL.",
        "KOORD VIOL.",
        "SAME NODE",
        "VERDICT",
    ]
    rows = []
    for workload in report.workloads:
        kube, koord = report.outcome(workload.name, KUBE), report.outcome(workload.name, KOORD)
        share = same_node_share(kube, koord) if kube and koord else None
        rows.append(
            [
                workload.name,
                str(workload.pods()),
                "-" if kube is None else str(kube.bound),
                "-" if koord is None else str(koord.bound),
                "-" if kube is None else str(len(kube.violations)),
                "-" if koord is None else str(len(koord.violations)),
                "-" if share is None else f"{share:.0%}",
                verdict(kube, koord),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    lines.append("")
    for workload in report.workloads:
        kube, koord = report.outcome(workload.name, KUBE), report.outcome(workload.name, KOORD)
        if kube is None and koord is None:
            continue
        lines.append(f"{workload.name} ({', '.join(workload.plugins) or 'no plugin named'}):")
        lines.append(f"  soft: kube-scheduler {_soft(kube)}; koord-scheduler {_soft(koord)}")
        for outcome in (o for o in (kube, koord) if o is not None):
            if outcome.unsettled_steps:
                lines.append(f"  {outcome.scheduler}: {outcome.unsettled_steps} step(s) not settled in time")
            for violation in outcome.violations:
                lines.append(f"  {outcome.scheduler}: {violation}")
    lines.append("phases: " + ", ".join(f"{name} {s:.1f}s" for name, s in report.phases.items()))
    lines.extend(f"ERROR: {e}" for e in report.errors)
    return "\n".join(lines)
