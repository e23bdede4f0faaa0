"""How koord-manager and koord-descheduler log in: the kubeconfig when one is given, otherwise the
pod's service account at the address client-go's ``rest.InClusterConfig`` uses.

Kopf's own service-account login names the API server ``https://kubernetes.default.svc``, which
needs cluster DNS; Koordinator's Go binaries (and kubernetes-asyncio's in-cluster config, which the
rest of each binary uses) take ``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT``, which the
kubelet sets in every container. So do we: a node without cluster DNS runs them all.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from pathlib import Path
from typing import Any

import kopf

__all__ = ["in_cluster_server", "login"]


def in_cluster_server(environ: dict[str, str] | None = None) -> str | None:
    """``https://host:port`` from the kubelet's service environment variables (an IPv6 host in
    brackets), or None where they are not set."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return None
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass  # a name
    return f"https://{host}:{port}"


def login(kubeconfig: Path | None, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """The body of a ``@kopf.on.login`` handler."""
    if kubeconfig is not None:
        return kopf.login_with_kubeconfig(**kwargs)
    info = kopf.login_with_service_account(**kwargs)
    server = in_cluster_server()
    if info is None or server is None:
        return info
    return dataclasses.replace(info, server=server)
