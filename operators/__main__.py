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

from apis.errors import InvalidValue
from apis.features import FeatureGates, parse_feature_gates
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
from operators.webhook_certs import ensure_self_signed


def _feature_gates(text: str) -> FeatureGates:
    try:
        return parse_feature_gates(text)
    except InvalidValue as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_args(argv: list[str] | None) -> ManagerConfig:
    parser = argparse.ArgumentParser(prog="koord-manager", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig; in-cluster credentials when omitted")
    parser.add_argument("--webhook-host", default="127.0.0.1", help="how the API server reaches the webhook")
    parser.add_argument("--webhook-bind", default="127.0.0.1", help="listen address of the webhook server")
    parser.add_argument("--webhook-port", type=int, default=9443)
    parser.add_argument("--webhook-cert-dir", type=Path, default=Path(".cluster/koord-manager"))
    parser.add_argument(
        "--manage-webhook-configuration",
        action=argparse.BooleanOptionalAction,
        help="create and update the webhook configurations (default; off in the chart, which renders them)",
    )
    parser.add_argument("--liveness-port", type=int, default=None)
    parser.add_argument("--peering", dest="peering_name", help="Kopf peering name (default koord-manager)")
    parser.add_argument("--standalone", action="store_true", help="run without peering")
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
    parser.add_argument(
        "--feature-gates",
        type=_feature_gates,
        help="Koordinator's feature gates, Name=true|false separated by commas (ElasticQuotaGuaranteeUsage "
        "adds admission rule 11); an unknown gate or a value that is not a boolean is an error",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    return ManagerConfig(**{k: v for k, v in vars(args).items() if v is not None})


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
        if config.kubeconfig is not None:
            return kopf.login_with_kubeconfig(**kwargs)
        return kopf.login_with_service_account(**kwargs)

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
    kopf.configure(verbose=config.verbose, log_format=kopf.LogFormat.JSON)
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
