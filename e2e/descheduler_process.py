"""koord-descheduler as the chart runs it: its ServiceAccount and RBAC applied from the chart."""

from __future__ import annotations

from pathlib import Path

from e2e.cluster.controlplane import ControlPlane
from e2e.cluster.credentials import service_account_kubeconfig
from e2e.scheduler_process import CHART, NAMESPACE

__all__ = ["install_descheduler_rbac"]


def install_descheduler_rbac(cp: ControlPlane) -> Path:
    """Apply the chart's ServiceAccount and RBAC for koord-descheduler; a kubeconfig with its token."""
    cp.kubectl(
        "apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n"
    )
    rendered = cp.helm(
        "template",
        "koordinator-py",
        str(CHART),
        "--set",
        "descheduler.enabled=true",
        "--show-only",
        "templates/descheduler-serviceaccount.yaml",
        "--show-only",
        "templates/descheduler-rbac.yaml",
    )
    cp.kubectl("apply", "-f", "-", input=rendered)
    return service_account_kubeconfig(
        cp, NAMESPACE, "koord-descheduler", cp.state_dir / "koord-descheduler.kubeconfig"
    )
