"""``koord-scheduler``: the scheduler process.

    koord-scheduler [--kubeconfig PATH] [--config FILE] [--leader-elect=true|false]
                    [--lease-namespace NS] [--bind-address ADDR] [--port PORT] [-v N]
                    [--debug-scores N] [--feature-gates Name=true,...]

Koordinator's koord-scheduler command line is taken as is, in Go's flag syntax (docs/flags.md):
kube-scheduler's flags this project has no use for are accepted with one warning each.
Flags override the configuration file (as kube-scheduler's do). Without a kubeconfig the
in-cluster service account is used. SIGTERM/SIGINT stop scheduling, let bindings in flight
finish, release the Lease and exit 0. Losing the Lease (no renewal for renewDeadline: an API server
restarting, a partition) stops scheduling at once and nothing more is written; the process stays up,
not ready, and campaigns again, and on winning a later term schedules with a fresh app as a newly
started process would (``scheduler.elected``), so a standby that took over meanwhile is never
doubled. An invalid configuration is reported (every problem, each with its field path) before
anything starts, and exits 2.
"""

# ruff: noqa: E402 (the collector is paused before the imports)

from __future__ import annotations

import gc

# The imports make about 200,000 objects, nearly all alive until the process ends; the cyclic
# collector's full runs over them while they were made cost about a tenth of the imports' CPU.
# Here only what connecting and asking for the first pod list needs; the rest (the plugins, the
# app) is imported after that request (``_HEAVY``, ``scheduler.first_lists``).
_COLLECTING = gc.isenabled()
gc.disable()

import argparse
import asyncio
import contextlib
import importlib
import logging
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from apis.client.backend import PODS, ClusterBackend
from apis.client.kubernetes import KubernetesBackend
from apis.client.lease import KubernetesLeaseStore
from apis.features import FeatureGates, feature_gate_notes, parse_feature_gates
from apis.goflags import SERVING_BOOL_FLAGS, SERVING_FLAGS, GoFlagParser, log_flag_notes
from scheduler.cache.decode_ahead import decode_ahead
from scheduler.config import BIND_CONCURRENCY, DEFAULT_CONFIG_YAML, ConfigError, SchedulerConfig, load_config
from scheduler.config.models import ClientConnectionConfiguration
from scheduler.first_lists import client_connection_ahead
from scheduler.logging_setup import configure_logging
from scheduler.startup_spans import seconds_since_process_start

if TYPE_CHECKING:
    from scheduler.app import AppSettings, SchedulerApp
    from scheduler.debug import DebugFlags

if _COLLECTING:
    gc.enable()

log = logging.getLogger("koord-scheduler")

EXIT_INVALID_CONFIG = 2

_HEAVY = (
    "scheduler.plugins",
    "scheduler.app",
    "scheduler.elected",
    "scheduler.http",
    "scheduler.metrics",
    "scheduler.debug",
    "apis.client.leader",
)
"""What ``run`` needs beyond the top of this module, imported once the first pod list is asked for."""


_NOT_SERVED = "koord-scheduler serves plain HTTP on --bind-address:--port, without TLS or delegated auth"
_KUBE_SCHEDULER_ACCEPTED: dict[str, tuple[str, bool]] = {
    # kube-scheduler's secure serving, authentication and authorization (component-base options)
    **dict.fromkeys(SERVING_FLAGS, (_NOT_SERVED, False)),
    **dict.fromkeys(SERVING_BOOL_FLAGS, (_NOT_SERVED, True)),
    "profiling": ("no pprof endpoints are served", True),
    "contention-profiling": ("no pprof endpoints are served", True),
    "master": ("the API server comes from --kubeconfig or the in-cluster service account", False),
    "kube-api-content-type": ("the client speaks JSON", False),
    "kube-api-qps": ("set clientConnection.qps in --config", False),
    "kube-api-burst": ("set clientConnection.burst in --config", False),
    "write-config-to": ("the configuration is not written back", False),
    "leader-elect-lease-duration": ("set leaderElection.leaseDuration in --config", False),
    "leader-elect-renew-deadline": ("set leaderElection.renewDeadline in --config", False),
    "leader-elect-retry-period": ("set leaderElection.retryPeriod in --config", False),
    "leader-elect-resource-lock": ("the lock is always a Lease", False),
    "leader-elect-resource-name": ("set leaderElection.resourceName in --config", False),
    "lock-object-name": ("set leaderElection.resourceName in --config", False),
    "pod-max-in-unschedulable-pods-duration": ("set podMaxBackoffSeconds in --config", False),
    # Koordinator's own (frameworkext, sync barrier)
    "debug-diagnosis": ("no diagnosis dump; GET /apis/v1/... explains a pod", True),
    "debug-diagnosis-blocking": ("no diagnosis dump", True),
    "debug-diagnosis-queue-size": ("no diagnosis dump", False),
    "debug-diagnosis-worker-count": ("no diagnosis dump", False),
    "debug-filters": ("filter failures are in the pod's FailedScheduling event", True),
    "controller-plugins": ("the plugins' controllers always run", False),
    "enable-network-topology-manager": ("the network topology tree is kept by koord-manager", True),
    "sync-barrier-pod-namespace": ("no sync barrier", False),
    "sync-barrier-pod-name": ("no sync barrier", False),
    "sync-hard-timeout": ("no sync barrier", False),
}
"""kube-scheduler's and Koordinator's flags koord-scheduler accepts with a warning: why, and whether a
Go bool flag."""
_SHORTS = {"debug-filters": "f", "debug-diagnosis": "d"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = GoFlagParser(prog="koord-scheduler", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig; in-cluster credentials when omitted")
    parser.add_argument("--config", type=Path, help="KubeSchedulerConfiguration file")
    parser.add_go_bool("leader-elect", help="override leaderElection.leaderElect")
    parser.add_argument(
        "--lease-namespace",
        "--leader-elect-resource-namespace",
        "--lock-object-namespace",
        dest="lease_namespace",
        help="namespace of the koord-scheduler Lease (overrides leaderElection.resourceNamespace)",
    )
    parser.add_argument("--bind-address", "--address", default="127.0.0.1", help="address of the HTTP server")
    parser.add_argument("--port", type=int, default=10251, help="port of /healthz, /metrics, debug API")
    parser.add_klog_flags()
    parser.add_argument(
        "-s",
        "--debug-scores",
        type=int,
        default=0,
        help="log the top N nodes' total and per-plugin scores of every scored pod; 0 disables "
        "(Koordinator's flag; PUT /debug/flags/s changes it at run time)",
    )
    parser.add_argument(
        "--whatif-advice-seconds",
        type=float,
        default=0.0,
        help="every this many seconds, off the scheduling loop, ask the what-if for each gang left "
        "unschedulable and write its smallest change as a FailedScheduling event on the PodGroup "
        "and into koordctl explain; 0 (the default) disables (docs/whatif.md)",
    )
    parser.add_feature_gates(
        parse_feature_gates,
        feature_gate_notes,
        default=FeatureGates(),
        help="Koordinator's feature gates, Name=true|false separated by commas, and AllAlpha/AllBeta: "
        "ElasticQuotaIgnorePodOverhead, DisableDefaultQuota, ElasticQuotaGuaranteeUsage, "
        "DevicePluginAdaption take effect; Koordinator's other gates are accepted with a warning; "
        "an unknown gate or a value that is not a boolean is an error",
    )
    for name, (why, is_bool) in _KUBE_SCHEDULER_ACCEPTED.items():
        parser.add_accepted(name, why, bool_flag=is_bool, short=_SHORTS.get(name))
    return parser.parse_go_args(argv)


def debug_flags_of(args: argparse.Namespace) -> DebugFlags:
    """The start values of what the debug API changes at run time (shared by the app and server)."""
    from scheduler.debug import DebugFlags

    return DebugFlags(verbosity=args.verbosity, top_n_scores=args.debug_scores)


def settings_of(
    config: SchedulerConfig, feature_gates: FeatureGates | None = None, *, whatif_advice_seconds: float = 0.0
) -> AppSettings:
    from scheduler.app import AppSettings

    return AppSettings(
        profiles=tuple(config.profiles),
        whatif_advice_seconds=whatif_advice_seconds,
        feature_gates=feature_gates or FeatureGates(),
        parallelism=config.parallelism,
        pod_initial_backoff_seconds=config.pod_initial_backoff_seconds,
        pod_max_backoff_seconds=config.pod_max_backoff_seconds,
        percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
        freeze_synced_objects=True,
    )


def load(args: argparse.Namespace) -> SchedulerConfig:
    """The configuration file (or the shipped default), checked against the plugin registry."""
    from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

    return load_config(args.config if args.config else DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY)


def kubeconfig_of(args: argparse.Namespace, connection: ClientConnectionConfiguration) -> Path | None:
    """``--kubeconfig``, else ``clientConnection.kubeconfig``; None (in-cluster) when both are empty,
    as kube-scheduler's (``Path("")`` is ``.``: the chart's pods once tried to read a directory)."""
    configured = connection.kubeconfig
    kubeconfig: Path | None = args.kubeconfig or (Path(configured) if configured else None)
    return kubeconfig


async def connect(args: argparse.Namespace, connection: ClientConnectionConfiguration) -> KubernetesBackend:
    return await KubernetesBackend.connect(
        kubeconfig_of(args, connection),
        max_concurrency=BIND_CONCURRENCY,
        qps=connection.qps,
        burst=connection.burst,
        # Each page's pods shared (peak memory) and their PodInfos made while the next page comes.
        transforms={PODS: decode_ahead},
        # The first pod list handled page by page, while the API server serializes the next page.
        paged_lists=(PODS,),
    )


def _import_and_load(args: argparse.Namespace) -> tuple[SchedulerConfig, float]:
    """The heavy imports and the whole configuration (in a thread: the first pod list is asked for
    meanwhile); the seconds they took."""
    began = time.perf_counter()
    collecting = gc.isenabled()
    gc.disable()  # as for the imports at the top, and for the same reason
    try:
        for module in _HEAVY:
            importlib.import_module(module)
    finally:
        if collecting:
            gc.enable()
    return load(args), time.perf_counter() - began


async def start(args: argparse.Namespace) -> int:
    """Connect and ask for the first pod list, then import the rest and load the configuration
    (``scheduler.first_lists``), then ``run``."""
    ahead: KubernetesBackend | None = None
    connection = client_connection_ahead(args.config, args.leader_elect)
    if connection is not None:
        with contextlib.suppress(Exception):  # the whole configuration's connection says why
            ahead = await connect(args, connection)
            ahead.ask_first_list(PODS)
    try:
        config, seconds = await asyncio.to_thread(_import_and_load, args)
    except (ConfigError, OSError) as exc:
        if ahead is not None:
            await ahead.close()
        print(f"koord-scheduler: {exc}", file=sys.stderr)
        return EXIT_INVALID_CONFIG
    log.info(
        "plugins, app and configuration: %.2fs, after the pod list was asked for",
        seconds,
        extra={"startup": {"imports_after_asking_seconds": round(seconds, 3)}},
    )
    if ahead is not None and config.client_connection != connection:
        await ahead.close()
        ahead = None
    return await run(args, config, ahead)


async def run(
    args: argparse.Namespace, config: SchedulerConfig, backend: KubernetesBackend | None = None
) -> int:
    """The scheduler on ``backend`` (connected here where None) until SIGTERM/SIGINT."""
    from apis.client.leader import LeaderElector
    from scheduler.app import SchedulerApp
    from scheduler.elected import ElectedScheduler
    from scheduler.http import SchedulerHTTPServer
    from scheduler.metrics import SchedulerMetrics
    from scheduler.plugins import DEFAULT_REGISTRY

    election = config.leader_election
    leader_elect = election.leader_elect if args.leader_elect is None else args.leader_elect
    if backend is None:
        backend = await connect(args, config.client_connection)
    metrics = SchedulerMetrics()
    flags = debug_flags_of(args)
    settings = settings_of(config, args.feature_gates, whatif_advice_seconds=args.whatif_advice_seconds)

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
        what_if=scheduler.what_if,
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
    since_start = seconds_since_process_start()
    if since_start is not None:
        log.info(
            "koord-scheduler %.2fs after the process started (interpreter and imports)",
            since_start,
            extra={"startup": {"imports_seconds": round(since_start, 3)}},
        )
    log_flag_notes(args.flag_notes, log)
    try:
        return asyncio.run(start(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
