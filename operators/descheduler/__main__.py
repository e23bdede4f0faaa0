"""``koord-descheduler``: Koordinator's descheduler as one Kopf process.

``--config`` is a ``DeschedulerConfiguration`` (``descheduler/v1alpha2``); an invalid one stops the
process at start with the offending fields named. The watches feed informer caches
(``operators.descheduler.informers``); one replica, the holder of the Lease
``leaderElection.resourceNamespace/resourceName`` (``koordinator-system/koord-descheduler``),
runs the descheduling rounds, arbitration, the scavenger and the PodMigrationJob reconcilers; the
others keep their caches warm and wait.

Koordinator's koord-descheduler command line is taken as is, in Go's flag syntax (docs/flags.md).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

import kopf

from apis.features import feature_gate_notes, parse_feature_gates
from apis.goflags import SERVING_BOOL_FLAGS, SERVING_FLAGS, GoFlagParser, level_for_verbosity, log_flag_notes
from operators.descheduler import handlers
from operators.descheduler.app import Descheduler
from operators.descheduler.config import ConfigError, DeschedulerConfiguration, load
from operators.login import login as login_as

__all__ = ["main"]


_NOT_SERVED = "koord-descheduler serves only /healthz on --liveness-port, without TLS or delegated auth"
_ACCEPTED: dict[str, tuple[str, bool]] = {
    **dict.fromkeys(SERVING_FLAGS, (_NOT_SERVED, False)),
    **dict.fromkeys(SERVING_BOOL_FLAGS, (_NOT_SERVED, True)),
    "address": (_NOT_SERVED, False),
    "port": (_NOT_SERVED, False),
    "write-config-to": ("the configuration is not written back", False),
    "master": ("the API server comes from --kubeconfig or the in-cluster service account", False),
    "kube-api-qps": ("set clientConnection.qps in --config", False),
    "kube-api-burst": ("set clientConnection.burst in --config", False),
    "kube-api-content-type": ("the client speaks JSON", False),
    "profiling": ("no pprof handlers are served", True),
    "contention-profiling": ("no pprof handlers are served", True),
    "leader-elect-lease-duration": ("set leaderElection.leaseDuration in --config", False),
    "leader-elect-renew-deadline": ("set leaderElection.renewDeadline in --config", False),
    "leader-elect-retry-period": ("set leaderElection.retryPeriod in --config", False),
    "leader-elect-resource-lock": ("the lock is always a Lease", False),
    "leader-elect-resource-name": ("set leaderElection.resourceName in --config", False),
    "leader-elect-resource-namespace": ("set leaderElection.resourceNamespace in --config", False),
}
"""Koordinator's koord-descheduler flags accepted with a warning: why, and whether a Go bool flag."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = GoFlagParser(prog="koord-descheduler", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="DeschedulerConfiguration YAML (descheduler/v1alpha2)")
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig; in-cluster credentials when omitted")
    parser.add_go_bool(
        "leader-elect",
        negatable=True,
        default=True,
        help="campaign for the Lease before acting (default; also leaderElection.leaderElect in the config)",
    )
    parser.add_argument(
        "--initial-delay",
        type=float,
        default=3.0,
        help="seconds the first round waits for the watches to list everything (default 3)",
    )
    parser.add_argument("--liveness-port", type=int, default=None)
    parser.add_feature_gates(
        parse_feature_gates,
        feature_gate_notes,
        help="Koordinator's feature gates, Name=true|false separated by commas, and AllAlpha/AllBeta: "
        "accepted (none changes koord-descheduler here: each is warned about); an unknown gate is an error",
    )
    parser.add_klog_flags(verbose_alias=True)
    for name, (why, is_bool) in _ACCEPTED.items():
        parser.add_accepted(name, why, bool_flag=is_bool)
    return parser.parse_go_args(argv)


def build_registry(app: Descheduler, kubeconfig: Path | None) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    handlers.register(registry, app)

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return login_as(kubeconfig, **kwargs)

    @kopf.on.startup(registry=registry)
    async def start(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.level = logging.WARNING
        await app.start()

    @kopf.on.cleanup(registry=registry)
    async def stop(**_: Any) -> None:
        await app.stop()

    return registry


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = load(args.config) if args.config is not None else DeschedulerConfiguration()
        # Built outside the event loop only to validate; the loop's objects are made in it.
        Descheduler.validate(config)
    except ConfigError as exc:
        print(f"koord-descheduler: {exc}", file=sys.stderr)
        return 2
    if args.kubeconfig is not None:
        os.environ["KUBECONFIG"] = str(args.kubeconfig.resolve())
    kopf.configure(log_format=kopf.LogFormat.JSON)
    logging.getLogger().setLevel(level_for_verbosity(args.verbosity))
    log_flag_notes([*args.flag_notes, *config.notes()], logging.getLogger("koord-descheduler"))
    liveness = f"http://0.0.0.0:{args.liveness_port}/healthz" if args.liveness_port else None
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    app = Descheduler(
        config, kubeconfig=args.kubeconfig, leader_elect=args.leader_elect, initial_delay=args.initial_delay
    )
    settings = kopf.OperatorSettings()
    settings.process.ultimate_exiting_timeout = 5.0
    kopf.run(
        loop=loop,
        registry=build_registry(app, args.kubeconfig),
        settings=settings,
        clusterwide=True,
        standalone=True,
        liveness_endpoint=liveness,
    )
    return 1 if app.failure is not None else 0


if __name__ == "__main__":
    sys.exit(main())
