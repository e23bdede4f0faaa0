"""Scheduler throughput: koord-scheduler against the upstream kube-scheduler, same cluster, same run.

    python -m e2e.bench.scheduler_throughput [--nodes 1000] [--pods 10000] [--workload mixed|identical]
                                             [--qps 1000 --burst 2000]
                                             [--load-aware] [--reservations N [--owner-share 0.5]]
                                             [--skip-upstream] [--skip-simulate] [-o table|json]

Method
------

1. **Cluster.** A dedicated local cluster ``bench`` (``ControlPlane(name="bench")``: kube-apiserver,
   etcd, kube-controller-manager and KWOK, ``.cluster/bench/``) is started fresh, the CRDs are
   installed, and ``--nodes`` KWOK nodes are created from a cluster description (four node pools,
   one per zone label, 32 CPU / 128Gi / 110 pods each by default). The run waits until every node is
   Ready and carries no taint: the API server's admission taints new nodes
   ``node.kubernetes.io/not-ready``, and the harness lifts that taint itself from the nodes KWOK has
   marked Ready (kube-controller-manager does it at only ~5 nodes/s). The cluster is stopped at the
   end, also on errors or ^C; its logs are kept in ``.cluster/bench/cluster-logs/``.
2. **Workload.** ``--pods`` pods with mixed requests (cpu cycling 250m/500m/1/2, memory cycling
   256Mi/512Mi/768Mi/1Gi/2Gi, no limits) are created *pending* in namespace ``bench-koord``
   (``schedulerName: koord-scheduler``) and the same pods in ``bench-kube`` (``schedulerName:
   kube-bench``), both before any scheduler runs, so the cluster holds both workloads at once and
   creation never overlaps a measurement. Creation uses one kubernetes_asyncio client with
   ``--concurrency`` (32) requests in flight; progress goes to stderr. The nodes are sized for both
   workloads (the run refuses a size where they would not fit comfortably).
   ``--workload identical`` makes every pod a replica of one Deployment instead: the same requests
   (cpu 500m, memory 512Mi), labels ``app=identical`` and ``pod-template-hash``, and an
   ownerReference to one ReplicaSet (``controller: true``, a fixed uid), as a Deployment's pods
   carry (issue 32: pods of one template sharing one Filter/Score pass). The ReplicaSet itself is
   not created: the only thing either scheduler reads it for is the selector of the default
   spread constraints (PodTopologySpread's ``System`` defaults), which without it is empty, so
   neither spreads these pods.
3. **koord-scheduler** runs as a real process (``e2e.components.koord_scheduler``, log in
   ``.cluster/bench/koord-scheduler.log``) with a KubeSchedulerConfiguration v1: no leader
   election, ``clientConnection.qps/burst`` from the flags, one profile ``koord-scheduler``. The
   clock starts when its ``/readyz`` answers 200 (informers synced: every node and every pending pod
   is in its cache), or at the first binding if that is seen earlier, and stops when the last pod of
   ``bench-koord`` is seen bound. Bindings are seen by a watch on the namespace held by this process
   (listed and watching before the scheduler starts); the time of a binding is when the harness
   receives the event that first shows ``spec.nodeName``. The scheduler is stopped afterwards.
4. **kube-scheduler** (``.bin/kube-scheduler``, built from the same Go modules as the API server)
   runs the same way on ``bench-kube``: ``--config`` with ``clientConnection.kubeconfig`` the
   cluster's kubeconfig, the same qps/burst, no leader election, one profile ``kube-bench`` with
   the default plugins, serving on a free port. Its clock starts at its ``/readyz`` (HTTPS, which
   includes the scheduler's informer-handler sync) or its first binding, whichever is earlier.
   Both schedulers run with their default ``percentageOfNodesToScore`` (adaptive) and parallelism.
   With ``--load-aware``, every node first gets a NodeMetric with fresh usage (0..30% of the
   node, ``e2e.bench.node_metrics``), just before koord-scheduler starts, so that its
   LoadAwareScheduling (in the default profile) filters and scores on reported usage.
5. **koordctl simulate**: ``scheduler.simulator.run.simulate`` (the same app and plugins on the
   in-memory backend) on the same node description and the same pods, in this process, after the
   cluster has been stopped; its clock covers submitting the pods to the last binding.

With ``--reservations N`` (``throughput_reservations``), N Reservations owned by pods the
workload does not contain (``app=reserved-<i>``) are created after the nodes and placed by a
koord-scheduler process of their own (the clock from its ``/readyz`` to the last one seen
Available gives the placement rate) before the pods are created; the measured koord-scheduler
then starts with them placed and holding room. kube-scheduler does not know Reservations and
ignores them. ``--owner-share S`` labels that share of the pods (both namespaces) as owners of a
reservation, so koord-scheduler restores reserved room for them. ``koordctl simulate`` gets the
reservations already placed (round-robin over the nodes).

Figures: ``seconds`` is start of the clock to the last binding; ``pods/s`` = bound / seconds;
``sustained pods/s`` is the rate over the middle 80% of the bindings (from the 10th to the 90th
percentile binding), which leaves out the ramp-up and the tail. ``ratio`` is koord-scheduler's
pods/s over kube-scheduler's. ``startup s`` is process start to ready (not measured). ``cpu %`` is
each process's CPU time over the measured window as a share of one core (the machine's cores are
shared by every process of the cluster, the scheduler and the harness).

Targets (printed, never asserted): koord-scheduler at least as fast as kube-scheduler on the same
cluster in the same run (ratio >= 1.0), and at least 300 pods/s sustained at 5,000 nodes. The exit
code is 0 unless something failed to run (a process did not start, pods were left unbound).

This module is the command line. The harness is split by job: ``throughput_workload`` (nodes, pods,
configuration), ``throughput_runs`` (the runs), ``throughput_model`` and ``throughput_table`` (the
report); the cluster pieces it shares with ``preemption`` are ``kube_api``, ``nodes``, ``bindings``,
``processes`` and ``harness``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from e2e.bench.harness import BenchError
from e2e.bench.processes import KOORD, KUBE
from e2e.bench.throughput_model import SIMULATE, WORKLOADS, Options, Report, RunResult
from e2e.bench.throughput_runs import run_benchmark
from e2e.bench.throughput_table import render
from e2e.bench.throughput_workload import bench_description, workload

__all__ = [
    "KOORD",
    "KUBE",
    "SIMULATE",
    "BenchError",
    "Options",
    "Report",
    "RunResult",
    "bench_description",
    "main",
    "render",
    "run_benchmark",
    "workload",
]


def parse_args(argv: list[str] | None) -> tuple[Options, str]:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.bench.scheduler_throughput", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000, help="pods per scheduler")
    parser.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="mixed",
        help="mixed requests, or identical: every pod a replica of one Deployment",
    )
    parser.add_argument("--qps", type=float, default=1000.0, help="clientConnection.qps of both schedulers")
    parser.add_argument("--burst", type=int, default=2000, help="clientConnection.burst of both schedulers")
    parser.add_argument(
        "--parallelism", type=int, help="parallelism of both schedulers' configurations (default: theirs, 16)"
    )
    parser.add_argument(
        "--load-aware",
        action="store_true",
        help="give every node a fresh NodeMetric first (LoadAwareScheduling works on real usage)",
    )
    parser.add_argument("--skip-upstream", action="store_true", help="do not run kube-scheduler")
    parser.add_argument("--skip-simulate", action="store_true", help="do not run koordctl simulate")
    parser.add_argument("--concurrency", type=int, default=32, help="create requests in flight")
    parser.add_argument(
        "--stall-timeout", type=float, default=120.0, help="give up after s without a binding"
    )
    parser.add_argument(
        "--reservations",
        type=int,
        default=0,
        help="Reservations placed by koord-scheduler before the pods (kube-scheduler ignores them)",
    )
    parser.add_argument(
        "--owner-share",
        type=float,
        default=0.0,
        help="share of the pods that own one of the reservations (0..1; needs --reservations)",
    )
    parser.add_argument("--cluster-name", default="bench")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 1:
        parser.error("--nodes and --pods must be positive")
    if args.reservations < 0:
        parser.error("--reservations must not be negative")
    if not 0.0 <= args.owner_share <= 1.0 or (args.owner_share and not args.reservations):
        parser.error("--owner-share must be within 0..1, with --reservations")
    if args.owner_share and args.workload == "identical":
        parser.error("--owner-share relabels pods: the identical workload's are all alike")
    return Options(
        nodes=args.nodes,
        pods=args.pods,
        qps=args.qps,
        burst=args.burst,
        parallelism=args.parallelism,
        skip_upstream=args.skip_upstream,
        skip_simulate=args.skip_simulate,
        cluster_name=args.cluster_name,
        concurrency=args.concurrency,
        stall_timeout=args.stall_timeout,
        keep=args.keep,
        load_aware=args.load_aware,
        reservations=args.reservations,
        owner_share=args.owner_share,
        workload=args.workload,
    ), args.output


def main(argv: list[str] | None = None) -> int:
    opts, output = parse_args(argv)
    try:
        report = asyncio.run(run_benchmark(opts))
    except BenchError as exc:
        print(f"[bench] {exc}", file=sys.stderr)
        return 2
    print(render(report, output), flush=True)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
