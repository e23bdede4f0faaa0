"""A kubeconfig that authenticates as a ServiceAccount, so a component run outside the cluster has
exactly the permissions the Helm chart grants it (and a missing RBAC rule fails the e2e tests)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from e2e.cluster.controlplane import ControlPlane

__all__ = ["service_account_kubeconfig"]


def service_account_kubeconfig(
    cp: ControlPlane, namespace: str, name: str, path: Path, *, duration: str = "4h"
) -> Path:
    """Write ``path``: the cluster's server and CA from the admin kubeconfig, a token for
    ``namespace/name`` (``kubectl create token``) as the user."""
    token = cp.kubectl("create", "token", name, "-n", namespace, f"--duration={duration}").strip()
    admin = json.loads(cp.kubectl("config", "view", "--raw", "--minify", "-o", "json"))
    cluster = dict(admin["clusters"][0]["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": f"{namespace}:{name}", "user": {"token": token}}],
        "contexts": [
            {
                "name": "sa",
                "context": {"cluster": "local", "user": f"{namespace}:{name}", "namespace": namespace},
            }
        ],
        "current-context": "sa",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path
