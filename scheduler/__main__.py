"""``koord-scheduler``: the scheduler process.

    koord-scheduler [--kubeconfig PATH] [--config FILE] [--leader-elect=true|false]
                    [--lease-namespace NS] [--bind-address ADDR] [--port PORT] [-v N]
                    [--debug-scores N] [--feature-gates Name=true,...]

Flags override the configuration file (as kube-scheduler's do). Without a kubeconfig the
in-cluster service account is used. SIGTERM/SIGINT stop scheduling, let bindings in flight
finish, release the Lease and exit 0. Losing the Lease (no renewal for renewDeadline: an API server
restarting, a partition) stops scheduling at once and nothing more is written; the process stays up,
not ready, and campaigns again, and on winning a later term schedules with a fresh app as a newly
started process would (``scheduler.elected``), so a standby that took over meanwhile is never
doubled. An invalid configuration is reported (every problem, each with its field path) before
anything starts, and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

from apis.errors import InvalidValue
from apis.features import FeatureGates, parse_feature_gates
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.base import ClusterBackend
from scheduler.backend.kubernetes import KubernetesBackend
from scheduler.backend.lease import KubernetesLeaseStore
from scheduler.config import DEFAULT_CONFIG_YAML, ConfigError, SchedulerConfig, load_config
from scheduler.debug import DebugFlags
from scheduler.elected import ElectedScheduler
from scheduler.http import SchedulerHTTPServer
from scheduler.leader import LeaderElector
from scheduler.logging_setup import configure_logging
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

log = logging.getLogger("koord-scheduler")

EXIT_INVALID_CONFIG = 2


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _feature_gates(text: str) -> FeatureGates:
    try:
        return parse_feature_gates(text)
    except InvalidValue as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="koord-scheduler", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig; in-cluster credentials when omitted")
    parser.add_argument("--config", type=Path, help="KubeSchedulerConfiguration file")
    parser.add_argument(
        "--leader-elect", type=_bool, nargs="?", const=True, default=None, help="override leaderElection"
    )
    parser.add_argument("--lease-namespace", help="namespace of the koord-scheduler Lease")
    parser.add_argument("--bind-address", default="127.0.0.1", help="address of the HTTP server")
    parser.add_argument("--port", type=int, default=10251, help="port of /healthz, /metrics, debug API")
    parser.add_argument(
        "-v", "--v", dest="verbosity", type=int, default=0, help="log verbosity (klog levels)"
    )
    parser.add_argument(
        "-s",
        "--debug-scores",
        type=int,
        default=0,
        help="log the top N nodes' total and per-plugin scores of every scored pod; 0 disables "
        "(Koordinator's flag; PUT /debug/flags/s changes it at run time)",
    )
    parser.add_argument(
        "--feature-gates",
        type=_feature_gates,
        default=FeatureGates(),
        help="Koordinator's feature gates, Name=true|false separated by commas: "
        "ElasticQuotaIgnorePodOverhead, DisableDefaultQuota, ElasticQuotaGuaranteeUsage (default false); "
        "an unknown gate or a value that is not a boolean is an error",
    )
    return parser.parse_args(argv)


def debug_flags_of(args: argparse.Namespace) -> DebugFlags:
    """The start values of what the debug API changes at run time (shared by the app and server)."""
    return DebugFlags(verbosity=args.verbosity, top_n_scores=args.debug_scores)


def settings_of(config: SchedulerConfig, feature_gates: FeatureGates | None = None) -> AppSettings:
    return AppSettings(
        profiles=tuple(config.profiles),
        feature_gates=feature_gates or FeatureGates(),
        parallelism=config.parallelism,
        pod_initial_backoff_seconds=config.pod_initial_backoff_seconds,
        pod_max_backoff_seconds=config.pod_max_backoff_seconds,
        percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
    )


def load(args: argparse.Namespace) -> SchedulerConfig:
    """The configuration file (or the shipped default), checked against the plugin registry."""
    return load_config(args.config if args.config else DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY)


async def run(args: argparse.Namespace, config: SchedulerConfig) -> int:
    election = config.leader_election
    leader_elect = election.leader_elect if args.leader_elect is None else args.leader_elect
    kubeconfig = args.kubeconfig or (Path(config.client_connection.kubeconfig) or None)
    connection = config.client_connection
    backend = await KubernetesBackend.connect(
        kubeconfig, max_concurrency=AppSettings.bind_concurrency, qps=connection.qps, burst=connection.burst
    )
    metrics = SchedulerMetrics()
    flags = debug_flags_of(args)
    settings = settings_of(config, args.feature_gates)

    def build(term_backend: ClusterBackend) -> SchedulerApp:
        """A new app: at start, and for every later term of leadership (fresh cache and queue)."""
        return SchedulerApp(settings, term_backend, DEFAULT_REGISTRY, metrics, debug_flags=flags)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    elector: LeaderElector | None = None
    if leader_elect:
        lease = KubernetesLeaseStore(
            backend.api_client,
            namespace=args.lease_namespace or election.resource_namespace,
            name=election.resource_name,
        )
        elector = LeaderElector(
            lease,
            lease_duration=election.lease_duration.total_seconds(),
            renew_deadline=election.renew_deadline.total_seconds(),
            retry_period=election.retry_period.total_seconds(),
        )
    scheduler = ElectedScheduler(build, backend, metrics, elector)

    server = SchedulerHTTPServer(
        metrics,
        ready=lambda: scheduler.ready,
        explain=scheduler.explain,
        flags=flags,
        host=args.bind_address,
        port=args.port,
    )
    try:
        async with server:
            log.info("serving /healthz, /readyz, /metrics and the debug API on %s", server.url)
            running = asyncio.create_task(scheduler.run(stop))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not running.done() and elector is not None:
                running.cancel()  # the elector releases the lease if we held it
            with contextlib.suppress(asyncio.CancelledError):
                await running
            stopping.cancel()
    finally:
        await backend.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.verbosity)
    try:
        config = load(args)
    except (ConfigError, OSError) as exc:
        print(f"koord-scheduler: {exc}", file=sys.stderr)
        return EXIT_INVALID_CONFIG
    try:
        return asyncio.run(run(args, config))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
