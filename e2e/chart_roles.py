"""The chart's koord-manager ClusterRole as the RBAC tests check it: rendered by helm, bound under a
name of its own (beside the chart's role, if the chart is installed) to a ServiceAccount name of
``default``, and asked with ``kubectl auth can-i --as`` what the controllers do."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import yaml

from e2e.cluster.controlplane import ControlPlane, repo_root

__all__ = ["assert_can", "koord_manager_role"]

CHART = repo_root() / "charts" / "koordinator-py"


@contextmanager
def koord_manager_role(cp: ControlPlane, prefix: str) -> Iterator[str]:
    """The chart's koord-manager ClusterRole bound to ``<prefix>-<random>``; yields the user to ask
    as, and removes the role and binding on exit."""
    account = f"{prefix}-{secrets.token_hex(3)}"
    rendered = cp.helm("template", prefix, str(CHART), "--show-only", "templates/manager-rbac.yaml")
    docs = [doc for doc in yaml.safe_load_all(rendered) if doc]
    for doc in docs:
        doc["metadata"]["name"] = account
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = account
            doc["subjects"] = [{"kind": "ServiceAccount", "name": account, "namespace": "default"}]
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    try:
        yield f"system:serviceaccount:default:{account}"
    finally:
        cp.kubectl("delete", "clusterrole,clusterrolebinding", account, "--ignore-not-found")


def assert_can(cp: ControlPlane, user: str, calls: Iterable[tuple[str, str, Sequence[str]]]) -> None:
    """``user`` may make every call (verb, resource, extra kubectl arguments such as a subresource)."""
    for verb, resource, extra in calls:
        allowed = cp.run_kubectl("auth", "can-i", verb, resource, *extra, "--as", user)
        assert allowed.stdout.strip() == "yes", f"{verb} {resource}: {allowed.stdout}{allowed.stderr}"
