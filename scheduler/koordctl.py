"""``koordctl``: koordinator-py's command line, with kubectl's conventions (``-n``, ``-o``).

- ``koordctl simulate --cluster CLUSTER.yaml --workload PODS.yaml [--config SCHED.yaml] [-o wide|json]``
  runs the real scheduler on the in-memory backend and prints where every pod went, why every
  pending pod is pending, and a summary (pods/s, utilisation per resource).
- ``koordctl explain pod NAME [-n NAMESPACE] [--server URL] [-o yaml|json]`` asks a running
  koord-scheduler why it placed (or could not place) a pod; for a pending pod, also the
  what-if's blocker and smallest change (``--no-whatif``: not).
- ``koordctl whatif (-f JOB.yaml | --pod NAME | --gang NAME) [-n NAMESPACE] [--server URL]
  [-o wide|json|yaml]`` asks a running koord-scheduler whether a job would fit now, after
  preemption, and the smallest change that makes it fit (read-only; ``docs/whatif.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

__all__ = ["main"]


def _explain(args: argparse.Namespace) -> int:
    url = f"{args.server.rstrip('/')}/debug/pods/{args.namespace}/{args.name}/explanation"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            explanation: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            print(f"koord-scheduler has no record of pod {args.namespace}/{args.name}", file=sys.stderr)
            return 1
        print(f"error: {url}: HTTP {exc.code}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: cannot reach koord-scheduler at {args.server}: {exc}", file=sys.stderr)
        return 1
    if args.whatif and explanation.get("result") in ("unschedulable", "waiting"):
        advice = _advice(args)
        if advice is not None:
            explanation["whatif"] = advice
    if args.output == "json":
        print(json.dumps(explanation, indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(explanation, sort_keys=False), end="")
    else:
        print(_render_explanation(explanation))
    return 0


def _advice(args: argparse.Namespace) -> dict[str, Any] | None:
    """The what-if's blocker and smallest change for a pending pod (None: the scheduler answers
    none, e.g. the pod stopped pending meanwhile, or a scheduler without ``/debug/whatif``)."""
    body = {"pod": args.name, "namespace": args.namespace, "timeLimitSeconds": 2}
    try:
        answer = _post_whatif(args.server, body, timeout=30)
    except (urllib.error.HTTPError, OSError, ValueError):
        return None
    after = answer.get("after_preemption") or {}
    return {
        "blocker": answer.get("blocker"),
        "fits_after_preemption": bool(after.get("fits")),
        "smallest_change": answer.get("smallest_change"),
    }


def _post_whatif(server: str, body: dict[str, Any], *, timeout: float) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{server.rstrip('/')}/debug/whatif",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        answer: dict[str, Any] = json.load(response)
    return answer


def _whatif(args: argparse.Namespace) -> int:
    from scheduler.whatif.answer import WhatIfAnswer
    from scheduler.whatif.render import render_table

    body: dict[str, Any] = {"namespace": args.namespace, "timeLimitSeconds": args.time_limit}
    if not args.suggest:
        body["suggest"] = False
    if args.filename is not None:
        try:
            text = (
                sys.stdin.read() if str(args.filename) == "-" else args.filename.read_text(encoding="utf-8")
            )
            objects = [d for d in yaml.safe_load_all(text) if d is not None]
        except (OSError, yaml.YAMLError) as exc:
            print(f"error: {args.filename}: {exc}", file=sys.stderr)
            return 1
        body["objects"] = objects
    if args.pod:
        body["pod"] = args.pod
    if args.gang:
        body["gang"] = args.gang
    try:
        payload = _post_whatif(args.server, body, timeout=args.time_limit + 30)
    except urllib.error.HTTPError as exc:
        try:
            error = json.load(exc).get("error", "")
        except ValueError:
            error = ""
        print(f"error: HTTP {exc.code}: {error}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: cannot reach koord-scheduler at {args.server}: {exc}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(payload, indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(payload, sort_keys=False), end="")
    else:
        print(render_table(WhatIfAnswer.model_validate(payload), wide=args.output == "wide"))
    return 0


def _render_explanation(e: dict[str, Any]) -> str:
    lines = [
        f"Pod:       {e['namespace']}/{e['name']}",
        f"Result:    {e['result']}",
        f"Attempts:  {e.get('attempts', 0)}",
    ]
    if e.get("node"):
        lines.append(f"Node:      {e['node']}")
    if e.get("nominated_node"):
        lines.append(f"Nominated: {e['nominated_node']}")
    lines.append(f"Message:   {e['message']}")
    reasons = e.get("reasons") or {}
    if reasons:
        lines.append("Reasons:")
        lines.extend(
            f"  {count:>6}  {reason}" for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1])
        )
    if e.get("smallest_change") and not e.get("whatif"):
        lines.append(f"Advice:    {e['smallest_change']}")
    advice = e.get("whatif") or {}
    if advice.get("blocker"):
        lines.append(f"Blocker:   {advice['blocker']['kind']}: {advice['blocker']['message']}")
    if advice.get("fits_after_preemption"):
        lines.append("Preempting: the job would fit after job-level preemption")
    if advice.get("smallest_change"):
        lines.append(f"Smallest change: {advice['smallest_change']['description']}")
    notes = e.get("notes") or []
    if notes:
        lines.append("Notes:")
        lines.extend(f"  {note}" for note in notes)
    return "\n".join(lines)


def _simulate(args: argparse.Namespace) -> int:
    from scheduler.config.errors import ConfigError
    from scheduler.simulator.description import load as load_cluster
    from scheduler.simulator.run import load_custom_resources, load_workload, render, simulate

    try:
        cluster = load_cluster(args.cluster)
        pods = load_workload(args.workload)
        config_text = Path(args.config).read_text() if args.config else None
        custom = load_custom_resources(args.workload)
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        result = asyncio.run(simulate(cluster, pods, config_text=config_text, custom_resources=custom))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(render(result, args.output))
    return 0 if not result.pending or args.allow_pending else 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="koordctl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("simulate", help="schedule a workload on a described cluster, in memory")
    sim.add_argument("--cluster", required=True, type=Path, help="cluster description YAML")
    sim.add_argument(
        "--workload",
        required=True,
        type=Path,
        help="Pods, Deployments, Jobs, PodGroups, ClusterNetworkTopology",
    )
    sim.add_argument("--config", type=Path, help="KubeSchedulerConfiguration YAML")
    sim.add_argument("-o", "--output", choices=["table", "wide", "json"], default="table")
    sim.add_argument("--allow-pending", action="store_true", help="exit 0 even if some pods stay pending")
    sim.set_defaults(run=_simulate)

    explain = sub.add_parser("explain", help="why a pod is where it is")
    explain_sub = explain.add_subparsers(dest="kind", required=True)
    pod = explain_sub.add_parser("pod", help="a pod's last scheduling outcome")
    pod.add_argument("name")
    pod.add_argument("-n", "--namespace", default="default")
    pod.add_argument("--server", default="http://127.0.0.1:10251", help="koord-scheduler's debug address")
    pod.add_argument("-o", "--output", choices=["text", "yaml", "json"], default="text")
    pod.add_argument(
        "--no-whatif",
        dest="whatif",
        action="store_false",
        help="do not ask the what-if for a pending pod's blocker and smallest change",
    )
    pod.set_defaults(run=_explain)

    whatif = sub.add_parser("whatif", help="would a job fit now, and the smallest change that makes it fit")
    subject = whatif.add_mutually_exclusive_group(required=True)
    subject.add_argument("-f", "--filename", type=Path, help="the job's manifests (YAML; - for stdin)")
    subject.add_argument("--pod", help="a pending pod (its whole gang if it is a gang member)")
    subject.add_argument("--gang", help="a pending gang (name or namespace/name)")
    whatif.add_argument("-n", "--namespace", default="default")
    whatif.add_argument("--server", default="http://127.0.0.1:10251", help="koord-scheduler's debug address")
    whatif.add_argument("-o", "--output", choices=["table", "wide", "json", "yaml"], default="table")
    whatif.add_argument(
        "--time-limit", type=float, default=2.0, help="seconds the what-if may take (at most 10)"
    )
    whatif.add_argument(
        "--no-suggest", dest="suggest", action="store_false", help="skip the smallest-change search"
    )
    whatif.set_defaults(run=_whatif)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
