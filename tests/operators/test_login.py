"""koord-manager and koord-descheduler log in in-cluster at KUBERNETES_SERVICE_HOST:PORT, as
client-go's InClusterConfig does, not at kopf's ``kubernetes.default.svc`` (which needs cluster DNS:
on the real node without it, koord-manager's pods could not start)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kopf
import pytest

from operators import login as login_module
from operators.login import in_cluster_server, login


def test_the_server_is_the_kubelets_service_variables() -> None:
    assert in_cluster_server({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}) == (
        "https://10.0.0.1:443"
    )
    assert in_cluster_server({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}) == (
        "https://[fd00::1]:6443"
    )
    assert in_cluster_server({}) is None
    assert in_cluster_server({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) is None


def test_in_cluster_login_keeps_the_token_and_ca_and_takes_the_service_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def service_account(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server="https://kubernetes.default.svc", token="t", ca_path="/ca.crt")

    monkeypatch.setattr(login_module.kopf, "login_with_service_account", service_account)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    info = login(None)
    assert info is not None
    assert info.server == "https://10.0.0.1:443"
    assert (info.token, info.ca_path) == ("t", "/ca.crt")


def test_outside_a_pod_the_service_account_login_is_left_as_kopf_gives_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(login_module.kopf, "login_with_service_account", lambda **_: None)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert login(None) is None


def test_a_kubeconfig_is_used_when_given(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def kubeconfig(**_: Any) -> kopf.ConnectionInfo:
        seen.append("kubeconfig")
        return kopf.ConnectionInfo(server="https://127.0.0.1:6443")

    monkeypatch.setattr(login_module.kopf, "login_with_kubeconfig", kubeconfig)
    info = login(Path("/kubeconfig"))
    assert info is not None
    assert info.server == "https://127.0.0.1:6443"
    assert seen == ["kubeconfig"]
