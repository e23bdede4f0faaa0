"""The chart installed for real: `helm install` on a cluster of its own, then koord-manager and
koord-scheduler run as local processes with the chart's ServiceAccount tokens and the chart's
scheduler ConfigMap, a small gang in an elastic quota passes through them, `helm upgrade` changes
the configuration, and `helm uninstall` leaves nothing of what the chart created but the CRDs.

KWOK runs no containers, so the chart's Deployments never start a pod: the components run here as
they would in their pods, with exactly the permissions the chart grants (a missing RBAC rule
fails this test). The API server cannot reach a Service either, so the test points the chart's
webhook configurations at the local koord-manager, as the cluster network would route them to the
Service; koord-manager runs with ``--no-manage-webhook-configuration``, as the chart deploys it.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster.__main__ import apply_description, wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.cluster.credentials import service_account_kubeconfig
from e2e.components import LocalComponent, koord_scheduler, wait_for_admission, wait_until_ready
from e2e.scenarios.test_elasticquota_scheduling import elastic_quota
from e2e.scenarios.test_gangs import bound_count, member, pod_group
from e2e.scheduler_process import free_port
from e2e.workloads import apply, bound, get_object, make_pod, present, wait_for
from operators.webhook_certs import ensure_self_signed
from scheduler.simulator.description import ClusterDescription

CHART = repo_root() / "charts" / "koordinator-py"
RELEASE = "koordinator-py"
NAMESPACE = "koordinator-system"
WEBHOOKS = "koordinator-py.koordinator.sh"
# This cluster runs beside the session's: its own name and webhook port.
CLUSTER = os.environ.get("KOORD_E2E_CLUSTER", "e2e") + "-helm"
WEBHOOK_PORT = int(os.environ.get("KOORD_E2E_WEBHOOK_PORT", "19443")) + 2
NODES = ClusterDescription.model_validate(
    {"name": CLUSTER, "nodePools": [{"name": "cpu", "count": 3, "cpu": "8", "memory": "32Gi"}]}
)


def manifest_objects(cp: ControlPlane) -> list[tuple[str, str, str | None]]:
    """(kind, name, namespace) of every object of the release (CRDs are not in it)."""
    docs = [d for d in yaml.safe_load_all(cp.helm("get", "manifest", RELEASE)) if d]
    return [(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for d in docs]


@pytest.fixture(scope="module")
def cluster() -> Iterator[ControlPlane]:
    cp = ControlPlane(name=CLUSTER)
    cp.start()
    try:
        apply_description(cp, NODES)
        wait_nodes_ready(cp)
        cp.wait_service_account("default")
        yield cp
    finally:
        cp.stop(quiet=True)


@pytest.fixture(scope="module")
def installed(cluster: ControlPlane) -> list[tuple[str, str, str | None]]:
    cluster.helm("install", RELEASE, str(CHART), "--set", "scheduler.coscheduling.awareNetworkTopology=true")
    return manifest_objects(cluster)


def route_webhooks_to(cp: ControlPlane, port: int, certfile: Path) -> dict[str, list[Any]]:
    """What the cluster network does for a real pod: the chart's webhooks reach koord-manager.
    Returns the chart's client configurations, for ``restore_webhooks``."""
    ca = base64.b64encode(certfile.read_bytes()).decode()
    original: dict[str, list[Any]] = {}
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        webhooks = get_object(cp, kind, WEBHOOKS)["webhooks"]
        original[kind] = [w["clientConfig"] for w in webhooks]
        local = [
            {"url": f"https://127.0.0.1:{port}{w['clientConfig']['service']['path']}", "caBundle": ca}
            for w in webhooks
        ]
        _replace_client_configs(cp, kind, local)
    return original


def restore_webhooks(cp: ControlPlane, original: dict[str, list[Any]]) -> None:
    for kind, configs in original.items():
        _replace_client_configs(cp, kind, configs)


def _replace_client_configs(cp: ControlPlane, kind: str, configs: list[Any]) -> None:
    ops = [
        {"op": "replace", "path": f"/webhooks/{i}/clientConfig", "value": config}
        for i, config in enumerate(configs)
    ]
    cp.kubectl("patch", kind, WEBHOOKS, "--type=json", "-p", json.dumps(ops))


def chart_manager(cp: ControlPlane) -> LocalComponent:
    kubeconfig = service_account_kubeconfig(
        cp, NAMESPACE, "koord-manager", cp.state_dir / "koord-manager.kubeconfig"
    )
    return LocalComponent(
        name="koord-manager",
        argv=(
            sys.executable,
            "-m",
            "operators",
            "--kubeconfig",
            str(kubeconfig),
            "--webhook-port",
            str(WEBHOOK_PORT),
            "--webhook-cert-dir",
            str(cp.state_dir / "koord-manager"),
            "--no-manage-webhook-configuration",
        ),
        cluster=cp,
    )


def test_install_creates_the_components_objects(
    cluster: ControlPlane, installed: list[tuple[str, str, str | None]]
) -> None:
    kinds = {(kind, name) for kind, name, _ in installed}
    expected = {
        ("ServiceAccount", "koord-scheduler"),
        ("ServiceAccount", "koord-manager"),
        ("ClusterRole", "koord-scheduler"),
        ("ClusterRole", "koord-manager"),
        ("ClusterRoleBinding", "koord-scheduler"),
        ("ClusterRoleBinding", "koord-manager"),
        ("ConfigMap", "koord-scheduler-config"),
        ("ValidatingWebhookConfiguration", WEBHOOKS),
        ("MutatingWebhookConfiguration", WEBHOOKS),
        ("Service", "koord-manager"),
        ("Service", "koord-scheduler"),
        ("Deployment", "koord-manager"),
        ("Deployment", "koord-scheduler"),
    }
    assert expected <= kinds, expected - kinds
    for kind, name, namespace in installed:  # each one is really there
        get_object(cluster, kind, name, namespace=namespace or "default")


def test_a_gang_in_a_quota_and_a_preempting_pod_run_through_the_chart_configured_components(
    cluster: ControlPlane, installed: list[tuple[str, str, str | None]]
) -> None:
    manager = chart_manager(cluster)
    certfile, _ = ensure_self_signed(cluster.state_dir / "koord-manager", "127.0.0.1")
    chart_routes = route_webhooks_to(cluster, WEBHOOK_PORT, certfile)
    config = cluster.state_dir / "chart-scheduler-config.yaml"
    config.write_text(
        get_object(cluster, "configmap", "koord-scheduler-config", namespace=NAMESPACE)["data"]["config.yaml"]
    )
    port = free_port()
    scheduler = koord_scheduler(
        cluster,
        kubeconfig=service_account_kubeconfig(
            cluster, NAMESPACE, "koord-scheduler", cluster.state_dir / "koord-scheduler.kubeconfig"
        ),
        port=port,
        config=config,
        lease_namespace=NAMESPACE,
    )
    manager.start()
    scheduler.start()
    try:
        wait_for_admission(cluster, manager)
        wait_until_ready(scheduler, port, timeout=90)
        # koord-manager, with the chart's RBAC, creates a NodeMetric per node.
        nodes = {n["metadata"]["name"] for n in get_object(cluster, "nodes")["items"]}
        wait_for(
            lambda: (
                nodes <= {m["metadata"]["name"] for m in get_object(cluster, "nodemetrics")["items"]} or None
            ),
            60,
            "a NodeMetric per node from the chart-permissioned koord-manager",
        )
        ns = "helm-gang"
        cluster.create_namespace(ns)
        apply(cluster, [elastic_quota(ns, ns, min={"cpu": "2"}, max={"cpu": "4"})])
        # The chart-configured mutating webhook gave the quota its parent.
        labels = get_object(cluster, "elasticquota", ns, namespace=ns)["metadata"].get("labels") or {}
        assert labels.get("quota.scheduling.koordinator.sh/parent") == "koordinator-root-quota"
        quota = {"quota.scheduling.koordinator.sh/name": ns}
        members = [member(f"w{i}", ns, "job", cpu="1", memory="1Gi") for i in range(2)]
        for pod in members:
            pod["metadata"]["labels"].update(quota)
        apply(cluster, [pod_group("job", ns, 2), *members])
        wait_for(lambda: bound_count(cluster, ns, 2), 60, "both gang members bound")
        wait_for(
            lambda: (
                get_object(cluster, "podgroup", "job", namespace=ns).get("status", {}).get("phase")
                == "Running"
            ),
            60,
            "the PodGroup Running (koord-manager's status timer)",
        )
        preempt_with_the_charts_default_profile(cluster, gang_namespace=ns)
    finally:
        print(manager.stop(), scheduler.stop())
    # A stopped replica leaves the chart's webhooks in place (no admission gap in a rolling update).
    validating = get_object(cluster, "validatingwebhookconfiguration", WEBHOOKS)["webhooks"]
    mutating = get_object(cluster, "mutatingwebhookconfiguration", WEBHOOKS)["webhooks"]
    restore_webhooks(cluster, chart_routes)  # first: the upgrade test needs the chart's own routes
    assert len(validating) == len(chart_routes["validatingwebhookconfiguration"])
    assert len(mutating) == len(chart_routes["mutatingwebhookconfiguration"])


def preempt_with_the_charts_default_profile(cluster: ControlPlane, *, gang_namespace: str) -> None:
    """kube-scheduler's default profile preempts, and so does the chart's: a 6-CPU koord-batch pod
    on each 8-CPU node, then a 7-CPU koord-prod pod (the chart's PriorityClasses) that fits nowhere
    evicts exactly one of them and binds on its node; the gang's members (priority 0, 1 CPU) are
    reprieved, as kube-scheduler's victim choice keeps every pod whose eviction is not needed."""
    ns = "helm-preempt"
    cluster.create_namespace(ns)
    apply(cluster, [make_pod(f"batch-{i}", ns, cpu="6", priority_class="koord-batch") for i in range(3)])
    wait_for(lambda: len(bound(cluster, ns)) == 3 or None, 60, "a koord-batch pod on each node")
    apply(cluster, [make_pod("urgent", ns, cpu="7", priority_class="koord-prod")])
    node = wait_for(lambda: bound(cluster, ns).get("urgent"), 90, "the koord-prod pod bound")
    gone = {f"batch-{i}" for i in range(3)} - present(cluster, ns)
    assert len(gone) == 1, gone
    events = get_object(cluster, "events", namespace=ns)["items"]
    preempted = {e["involvedObject"]["name"] for e in events if e.get("reason") == "Preempted"}
    assert preempted == gone
    assert bound(cluster, ns)["urgent"] == node
    assert len(present(cluster, gang_namespace)) == 2  # the gang's members stay


def test_upgrade_changes_the_scheduler_config_and_keeps_the_certificate(
    cluster: ControlPlane, installed: list[tuple[str, str, str | None]]
) -> None:
    cert_before = get_object(cluster, "secret", "koord-manager-webhook-cert", namespace=NAMESPACE)["data"][
        "tls.crt"
    ]
    cluster.helm(
        "upgrade",
        RELEASE,
        str(CHART),
        "--set",
        "scheduler.coscheduling.awareNetworkTopology=true",
        "--set",
        "scheduler.coscheduling.enablePreemption=true",
    )
    text = get_object(cluster, "configmap", "koord-scheduler-config", namespace=NAMESPACE)["data"][
        "config.yaml"
    ]
    (profile,) = yaml.safe_load(text)["profiles"]
    (coscheduling,) = [p["args"] for p in profile["pluginConfig"] if p["name"] == "Coscheduling"]
    assert coscheduling["enablePreemption"] is True
    assert coscheduling["awareNetworkTopology"] is True
    assert (
        get_object(cluster, "secret", "koord-manager-webhook-cert", namespace=NAMESPACE)["data"]["tls.crt"]
        == cert_before
    )
    assert "STATUS: deployed" in cluster.helm("status", RELEASE)


def test_uninstall_leaves_only_the_crds(
    cluster: ControlPlane, installed: list[tuple[str, str, str | None]]
) -> None:
    objects = manifest_objects(cluster)
    cluster.helm("uninstall", RELEASE)

    def gone() -> list[str] | None:
        left = [
            f"{kind}/{name}"
            for kind, name, namespace in objects
            if cluster.read(kind, name, namespace=namespace or "default") is not None
        ]
        return None if left else ["nothing left"]

    wait_for(gone, 120, "every object of the release deleted (the namespace terminates last)")
    crds = {c["metadata"]["name"] for c in get_object(cluster, "crd")["items"]}
    assert {"podgroups.scheduling.sigs.k8s.io", "elasticquotas.scheduling.sigs.k8s.io"} <= crds
