"""The throughput report as a table or as JSON."""

from __future__ import annotations

import json

from e2e.bench.processes import KOORD
from e2e.bench.throughput_model import TARGET_NODES, TARGET_RATIO, TARGET_SUSTAINED, Report, WorkloadKind
from e2e.bench.throughput_workload import IDENTICAL_CPU, IDENTICAL_MEMORY, IDENTICAL_OWNER

__all__ = ["render"]


WORKLOAD_LINES: dict[WorkloadKind, str] = {
    "mixed": "mixed (cpu and memory requests cycling over the pods)",
    "identical": (
        f"identical (every pod a replica of ReplicaSet {IDENTICAL_OWNER['name']}: "
        f"{IDENTICAL_CPU} cpu, {IDENTICAL_MEMORY})"
    ),
}


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _verdict(value: bool | None) -> str:
    return "n/a" if value is None else ("met" if value else "NOT met")


def _reservation_lines(report: Report) -> list[str]:
    placement = report.placement
    if placement is None:
        placed = "not placed"
    else:
        placed = (
            f"{placement.placed}/{placement.reservations} placed by koord-scheduler in "
            f"{placement.seconds:.2f}s ({placement.per_second:.1f}/s, "
            f"startup {_fmt(placement.startup_seconds)}s)"
        )
    allocated = "" if report.owners_allocated is None else f", {report.owners_allocated} allocated from one"
    return [
        f"reservations: {report.reservations}, {placed}, before the pods were created",
        f"owner pods: {report.owner_share:.0%} of the pods own a reservation{allocated}",
        "kube-scheduler ignores Reservations: its pods (same labels) see no reserved room",
    ]


def render(report: Report, output: str = "table") -> str:
    if output == "json":
        return json.dumps(report.to_json(), indent=2)
    header = [
        "SCHEDULER",
        "NODES",
        "PODS",
        "BOUND",
        "SECONDS",
        "PODS/S",
        "SUSTAINED PODS/S",
        "STARTUP S",
        "CLOCK FROM",
    ]
    rows = [
        [
            r.scheduler,
            str(r.nodes),
            str(r.pods),
            str(r.bound),
            _fmt(r.seconds, 2),
            _fmt(r.pods_per_second),
            _fmt(r.sustained_pods_per_second),
            _fmt(r.startup_seconds),
            r.clock_started_at,
        ]
        for r in report.results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]
    ]
    lines.append("")
    parallelism = "default" if report.parallelism is None else str(report.parallelism)
    lines.append(f"workload: {WORKLOAD_LINES[report.workload]}")
    lines.append(f"client qps/burst: {report.qps:g}/{report.burst}, parallelism: {parallelism}")
    if report.load_aware:
        lines.append(
            "node metrics: every node reports usage (koord-scheduler's LoadAwareScheduling works on it)"
        )
    if report.reservations:
        lines.extend(_reservation_lines(report))
    lines.append(
        f"ratio koord-scheduler/kube-scheduler: {_fmt(report.ratio, 2)} "
        f"(sustained: {_fmt(report.sustained_ratio, 2)})"
    )
    targets = report.targets()
    koord = report.result(KOORD)
    sustained = koord.sustained_pods_per_second if koord is not None else None
    verdict = _verdict(targets["ratioAtLeast1"])
    lines.append(f"target koord-scheduler >= kube-scheduler (ratio >= {TARGET_RATIO:g}): {verdict}")
    at_5000 = targets["sustainedAtLeast300At5000Nodes"]
    if at_5000 is None and targets["sustainedAtLeast300"] is not None:
        note = (
            f"n/a at {report.nodes} nodes (the target is set at {TARGET_NODES:,}); "
            f"{_fmt(sustained, 0)} pods/s here would have {_verdict(targets['sustainedAtLeast300'])} it"
        )
    else:
        note = f"{_verdict(at_5000)} ({_fmt(sustained, 0)} pods/s)"
    lines.append(f"target >= {TARGET_SUSTAINED:g} pods/s sustained at {TARGET_NODES:,} nodes: {note}")
    first = [
        f"{r.scheduler} {r.first_binding_seconds:.1f}s"
        for r in report.results
        if r.first_binding_seconds is not None
    ]
    if first:
        lines.append("first binding after the clock started: " + ", ".join(first))
    lines.append("")
    lines.append("phases: " + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in report.phases.items()))
    for r in report.results:
        if r.cpu_percent:
            usage = ", ".join(
                f"{name} {pct:.0f}%" for name, pct in sorted(r.cpu_percent.items(), key=lambda x: -x[1])
            )
            lines.append(f"cpu during {r.scheduler} (% of one core): {usage}")
    for error in report.errors:
        lines.append(f"ERROR: {error}")
    return "\n".join(lines)
