"""``koord-manager``: Koordinator's manager as one Kopf process.

It serves the admission webhooks of every Koordinator kind (see ``operators.logic.admission``),
keeping their webhook configurations current when run as a local process (in a cluster the Helm
chart renders them: ``operators.webhookgen``), and runs the
lifecycle operators: PodGroup status and schedule timeout (``operators.handlers.podgroup``),
the ClusterNetworkTopology tree (``operators.handlers.networktopology``), the Reservation
lifecycle (``operators.handlers.reservation``), ElasticQuota tree
admission (``operators.handlers.elasticquota``), the built-in quotas with the cluster total
(``operators.handlers.builtin_quotas``), each ElasticQuotaProfile's tree root
(``operators.handlers.elasticquotaprofile``), a NodeMetric per node (``operators.handlers.nodemetric``),
from ``slo-controller-config`` a NodeSLO per node (``operators.handlers.nodeslo``), the nodes' batch
and mid resources (``operators.handlers.noderesource``) and CPU normalization ratios
(``operators.handlers.cpu_normalization``, with the Node webhook ``operators.handlers.node_amplification``),
and the ClusterColocationProfile pod webhook (``operators.handlers.colocation_profile``).

Replicas coordinate through Kopf peering (``--peering``, default ``koord-manager``, cluster-wide):
the replica with the highest priority handles objects, the others pause until its keep-alive
lapses. Admission webhooks are served by every replica. ``--standalone`` turns peering off.

Koordinator's koord-manager command line is taken as is, in Go's flag syntax (docs/flags.md).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
from pathlib import Path
from typing import Any

import kopf
from kubernetes_asyncio import client

from apis.features import feature_gate_notes, parse_feature_gates
from apis.goflags import GoFlagParser, level_for_verbosity, log_flag_notes
from operators.clients import (
    ColocationClient,
    CPUNormalizationClient,
    DeviceNodeClient,
    NodeMetricClient,
    NodeResourceClient,
    NodeSLOClient,
    PodClient,
    QuotaClient,
    ReservationClient,
    load_configuration,
)
from operators.config import ManagerConfig
from operators.handlers import (
    admission,
    builtin_quotas,
    colocation_profile,
    cpu_normalization,
    device,
    elasticquota,
    elasticquotaprofile,
    errors,
    networktopology,
    node_amplification,
    nodemetric,
    noderesource,
    nodeslo,
    pod_tree_affinity,
    podgroup,
    reservation,
)
from operators.login import login as login_as
from operators.webhook_certs import ensure_self_signed

_ACCEPTED: dict[str, tuple[str, bool, object]] = {
    "metrics-addr": ("koord-manager serves no /metrics (--liveness-port serves /healthz)", False, None),
    "leader-election-namespace": ("replicas coordinate through the cluster-wide Kopf peering", False, None),
    "leader-elect-resource-lock": ("replicas coordinate through the cluster-wide Kopf peering", False, None),
    "namespace": ("every namespace is watched", False, None),
    "sync-period": ("Kopf reacts to watch events; --resync-seconds recomputes statuses", False, None),
    "rest-config-qps": ("the API client is not rate limited here", False, None),
    "rest-config-burst": ("the API client is not rate limited here", False, None),
    "enable-pprof": ("no pprof server", True, None),
    "pprof-addr": ("no pprof server", False, None),
    "controllers": ("every controller this project builds runs", False, None),
    "config-namespace": (
        "slo-controller-config is read from koordinator-system",
        False,
        "koordinator-system",
    ),
    "slo-config-name": ("the ConfigMap read is slo-controller-config", False, "slo-controller-config"),
    "disable-no-deepcopy": ("not applicable to this project", True, None),
    "noderesource-plugins": ("the batch and mid resources are always computed", False, None),
    "node-strategy-name-need-check": ("not applicable to this project", False, None),
    **{
        name: ("the colocation profile webhook has no reconciler here", False, None)
        for name in (
            "colocation-profile-expire-pod-cache-duration",
            "colocation-profile-force-update-pod-duration",
            "colocation-profile-reconcile-interval",
            "colocation-profile-update-pod-qps",
            "colocation-profile-update-pod-qps-burst",
        )
    },
    "colocation-profile-reconcile-by-default": (
        "the colocation profile webhook has no reconciler here",
        True,
        None,
    ),
    **{
        name: ("the pod enhanced validator is not built", False, None)
        for name in (
            "pod-enhanced-validator-config-name",
            "pod-enhanced-validator-config-namespace",
            "pod-enhanced-validator-reconcile-interval",
        )
    },
    **{
        name: ("the binding admission webhook is not built", False, None)
        for name in (
            "binding-admission-bypass-annotations",
            "binding-admission-bypass-labels",
            "binding-admission-exclude-namespaces",
            "binding-admission-namespaces",
            "binding-admission-user-name",
        )
    },
    "binding-admission-dry-run": ("the binding admission webhook is not built", True, None),
    **{
        name: ("quota updates are retried by Kopf", False, None)
        for name in ("quota-update-max-retries", "quota-update-max-total-jitter", "quota-update-retry-jitter")
    },
    "quota-update-conflict-fresh-get": ("quota updates are retried by Kopf", True, None),
}
"""Koordinator's koord-manager flags accepted with a warning: why, whether a Go bool flag, and the
value that matches what this project does anyway (no warning then)."""


def _port_of(text: str) -> int:
    _, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected [HOST]:PORT, got {text!r}")
    return int(port)


def parse_args(argv: list[str] | None) -> ManagerConfig:
    parser = GoFlagParser(prog="koord-manager", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig; in-cluster credentials when omitted")
    parser.add_argument("--webhook-host", default="127.0.0.1", help="how the API server reaches the webhook")
    parser.add_argument("--webhook-bind", default="127.0.0.1", help="listen address of the webhook server")
    parser.add_argument("--webhook-port", type=int, default=9443)
    parser.add_argument("--webhook-cert-dir", type=Path, default=Path(".cluster/koord-manager"))
    parser.add_go_bool(
        "manage-webhook-configuration",
        negatable=True,
        help="create and update the webhook configurations (default; off in the chart, which renders them)",
    )
    parser.add_argument("--liveness-port", type=int, default=None)
    parser.add_argument(
        "--health-probe-addr",
        dest="liveness_port",
        type=_port_of,
        help="Koordinator's flag, [HOST]:PORT: the same as --liveness-port (/healthz on every address)",
    )
    parser.add_argument("--peering", dest="peering_name", help="Kopf peering name (default koord-manager)")
    parser.add_go_bool("standalone", help="run without peering")
    parser.add_go_bool(
        "enable-leader-election",
        help="Koordinator's flag: false is the same as --standalone (default true: Kopf peering)",
    )
    parser.add_argument("--peering-priority", type=int, help="peering priority (default: random)")
    parser.add_argument("--resync-seconds", type=float, help="status recompute interval (default 2)")
    parser.add_argument(
        "--quota-group-namespace", help="namespace of the built-in quotas (default koordinator-system)"
    )
    parser.add_argument(
        "--reservation-gc-duration-seconds",
        type=int,
        help="seconds a Succeeded or Failed Reservation is kept before it is deleted (default 86400)",
    )
    parser.add_argument(
        "--shutdown-timeout",
        dest="shutdown_timeout_seconds",
        type=float,
        help="seconds to exit on SIGTERM (default 5)",
    )
    parser.add_feature_gates(
        parse_feature_gates,
        feature_gate_notes,
        help="Koordinator's feature gates, Name=true|false separated by commas, and AllAlpha/AllBeta "
        "(ElasticQuotaGuaranteeUsage adds admission rule 11, NodeMutatingWebhook the Node webhook); "
        "Koordinator's other gates are accepted with a warning; an unknown gate or a value that is not a "
        "boolean is an error",
    )
    parser.add_klog_flags(verbose_alias=True)
    for name, (why, is_bool, quiet) in _ACCEPTED.items():
        parser.add_accepted(name, why, bool_flag=is_bool, quiet_value=quiet)
    args = parser.parse_go_args(argv)
    values = {k: v for k, v in vars(args).items() if v is not None}
    if values.pop("enable_leader_election", True) is False:
        values["standalone"] = True
    return ManagerConfig(**values)


def build_registry(config: ManagerConfig) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    admission.register(registry)
    podgroup.register(registry, config)
    networktopology.register(registry, config)
    quotas = QuotaClient(config)
    elasticquota.register(registry, quotas, PodClient(config), config.feature_gates)
    builtin_quotas.register(registry, config, quotas)
    elasticquotaprofile.register(registry, config, quotas)
    # The colocation profile webhook before the tree affinity, in Koordinator's order.
    colocation_profile.register(registry, ColocationClient(config))
    pod_tree_affinity.register(registry, quotas)
    reservation.register(registry, config, ReservationClient(config))
    nodemetric.register(registry, NodeMetricClient(config))
    nodeslo.register(registry, NodeSLOClient(config))
    device.register(registry, DeviceNodeClient(config))
    cpu_normalization.register(registry, CPUNormalizationClient(config))
    if config.feature_gates.node_mutating_webhook:
        node_amplification.register(registry)
    noderesource.register(registry, NodeResourceClient(config))

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return login_as(config.kubeconfig, **kwargs)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        certfile, keyfile = ensure_self_signed(config.webhook_cert_dir, config.webhook_host)
        settings.admission.server = kopf.WebhookServer(
            addr=config.webhook_bind,
            port=config.webhook_port,
            host=config.webhook_host,
            certfile=str(certfile),
            pkeyfile=str(keyfile),
        )
        settings.admission.managed = (
            config.webhook_configuration if config.manage_webhook_configuration else None
        )
        settings.posting.level = logging.WARNING

    if not config.standalone:

        @kopf.on.startup(registry=registry)
        async def create_peering_object(logger: kopf.Logger, **_: Any) -> None:
            await ensure_peering_object(config, logger)

    return registry


async def ensure_peering_object(config: ManagerConfig, logger: kopf.Logger) -> None:
    """Create the ClusterKopfPeering object if absent: Kopf only patches it, and with peering on it
    keeps the operator paused until the object exists."""
    configuration = await load_configuration(config)
    body = {
        "apiVersion": "kopf.dev/v1",
        "kind": "ClusterKopfPeering",
        "metadata": {"name": config.peering_name},
    }
    async with client.ApiClient(configuration) as api:
        # An unreachable API server is retried (the startup waits); a refusal stops koord-manager.
        with errors.api_errors(f"create the ClusterKopfPeering {config.peering_name!r}"):
            try:
                await client.CustomObjectsApi(api).create_cluster_custom_object(
                    "kopf.dev", "v1", "clusterkopfpeerings", body
                )
            except client.ApiException as exc:
                if exc.status == 409:
                    return
                if exc.status == 404:
                    logger.warning(
                        "the ClusterKopfPeering CRD (kopf.dev) is not installed: operators stay paused until "
                        "it is (install the chart's manager-peering-crd.yaml, or run with --standalone)"
                    )
                    return
                raise
        logger.info(f"created ClusterKopfPeering {config.peering_name!r}")


def operator_settings(config: ManagerConfig) -> kopf.OperatorSettings:
    """Kopf's settings that must hold before the startup handlers run."""
    settings = kopf.OperatorSettings()
    # On SIGTERM Kopf cancels its tasks, then writes its peering record and webhook configuration
    # once more, retrying them for minutes while the API server is gone: bound the whole exit.
    settings.process.ultimate_exiting_timeout = config.shutdown_timeout_seconds
    return settings


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    if config.kubeconfig is not None:
        os.environ["KUBECONFIG"] = str(config.kubeconfig.resolve())
    kopf.configure(log_format=kopf.LogFormat.JSON)
    logging.getLogger().setLevel(level_for_verbosity(config.verbosity))
    log_flag_notes(config.flag_notes, logging.getLogger("koord-manager"))
    liveness = f"http://0.0.0.0:{config.liveness_port}/healthz" if config.liveness_port else None
    priority = config.peering_priority
    if priority is None:
        priority = random.SystemRandom().randint(1, 2**31 - 1)
    kopf.run(
        registry=build_registry(config),
        settings=operator_settings(config),
        clusterwide=True,
        standalone=config.standalone,
        # A peering name makes peering mandatory; with --standalone it must stay unset, or Kopf waits
        # for a peering that standalone mode never watches.
        peering_name=None if config.standalone else config.peering_name,
        priority=priority,
        liveness_endpoint=liveness,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
