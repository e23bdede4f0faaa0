"""``koord-manager``: Koordinator's manager as one Kopf process.

For now it serves the validating admission webhooks of every Koordinator kind (see
``operators.logic.admission``) and keeps their ValidatingWebhookConfiguration current; the
lifecycle operators (ElasticQuota, Reservation, PodGroup, ClusterNetworkTopology) plug into the
same process.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

import kopf

from operators.config import ManagerConfig
from operators.handlers import admission
from operators.webhook_certs import ensure_self_signed


def parse_args(argv: list[str] | None) -> ManagerConfig:
    parser = argparse.ArgumentParser(prog="koord-manager", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig; in-cluster credentials when omitted")
    parser.add_argument("--webhook-host", default="127.0.0.1", help="how the API server reaches the webhook")
    parser.add_argument("--webhook-bind", default="127.0.0.1", help="listen address of the webhook server")
    parser.add_argument("--webhook-port", type=int, default=9443)
    parser.add_argument("--webhook-cert-dir", type=Path, default=Path(".cluster/koord-manager"))
    parser.add_argument("--liveness-port", type=int, default=None)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    return ManagerConfig(**{k: v for k, v in vars(args).items() if v is not None})


def build_registry(config: ManagerConfig) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    admission.register(registry)

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
        settings.admission.managed = config.webhook_configuration
        settings.posting.level = logging.WARNING

    return registry


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    if config.kubeconfig is not None:
        os.environ["KUBECONFIG"] = str(config.kubeconfig.resolve())
    kopf.configure(verbose=config.verbose, log_format=kopf.LogFormat.JSON)
    liveness = f"http://0.0.0.0:{config.liveness_port}/healthz" if config.liveness_port else None
    kopf.run(
        registry=build_registry(config),
        clusterwide=True,
        standalone=True,
        liveness_endpoint=liveness,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
