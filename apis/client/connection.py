"""Where a component's API client gets its credentials: a kubeconfig, or the pod's service account."""

from __future__ import annotations

from pathlib import Path

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

__all__ = ["client_configuration"]


async def client_configuration(
    kubeconfig: Path | None, *, context: str | None = None
) -> k8s_client.Configuration:
    """A fresh Configuration from ``kubeconfig`` (its ``context``, else its current one), or from
    the in-cluster service account when ``kubeconfig`` is None."""
    configuration = k8s_client.Configuration()
    if kubeconfig is None:
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await k8s_config.load_kube_config(
            config_file=str(kubeconfig),
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    return configuration
