"""``python -m e2e.parity [--workloads FILE] [--nodes FILE] [--only NAME ...] [--keep]``: the parity
run outside pytest, with its report on stdout (progress on stderr); exit 1 unless every workload is
ok (see ``e2e/scenarios/test_upstream_parity.py``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from e2e.bench.processes import KOORD, KUBE
from e2e.parity.report import render, verdict
from e2e.parity.run import ParityOptions, run_parity
from e2e.parity.workloads import load_nodes, load_workloads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.parity", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workloads", type=Path, help="a YAML list of workloads (default: the built-in one)")
    parser.add_argument("--nodes", type=Path, help="a cluster description (default: e2e/parity/nodes.yaml)")
    parser.add_argument("--only", action="append", default=[], help="run only this workload (repeatable)")
    parser.add_argument("--cluster-name", default="parity")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    args = parser.parse_args(argv)
    workloads = [w for w in load_workloads(args.workloads) if not args.only or w.name in args.only]
    opts = ParityOptions(cluster_name=args.cluster_name, keep=args.keep)
    report = asyncio.run(run_parity(load_nodes(args.nodes), workloads, opts))
    print(render(report), flush=True)
    ok = all(
        verdict(report.outcome(w.name, KUBE), report.outcome(w.name, KOORD)) == "ok" for w in report.workloads
    )
    return 0 if ok and not report.errors else 1


if __name__ == "__main__":
    sys.exit(main())
