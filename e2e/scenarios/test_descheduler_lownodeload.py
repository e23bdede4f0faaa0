"""LowNodeLoad on the real API server: ``koordlet --simulate`` makes two nodes hot, koord-descheduler
moves the right pod off each through PodMigrationJobs, and leaves bare pods and cool nodes alone.

Four fake nodes of its own (4 CPUs, tainted so no other scenario's pods land there): two hot,
two cool. Six pods of a ReplicaSet are bound to the hot nodes directly (created bare with
``nodeName``, then adopted by the ReplicaSet, so where each one runs is known), plus one bare pod.
koordlet reports per-pod usage from a load file written for those pods:

- ``lnl-hot-1`` at 90% (0.8 CPU over the 70% high): the bare pod uses exactly 0.8 and would be
  the best candidate, but the MigrationController leaves bare pods alone; ``web-1a`` (1.5) covers
  the excess and goes first, and then the node is under high: nothing else moves.
- ``lnl-hot-2`` at 85% (0.6 over): ``web-2a`` (1.2).

The metrics are static, so a second round would see the hot nodes as hot again: the
configuration runs one round (``deschedulingInterval: 0``) with ``consecutiveAbnormalities: 1``.
A dry run comes first: it reports the same two pods as events on their nodes and creates nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koord_descheduler, koordlet_simulation
from e2e.descheduler_process import install_descheduler_rbac
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, get_object, list_items, pods, wait_for

NAMESPACE = "lownodeload"
TAINT = {"key": "koord-e2e/pool", "value": "lownodeload", "effect": "NoSchedule"}
HOT = ("lnl-hot-1", "lnl-hot-2")
COOL = ("lnl-cool-1", "lnl-cool-2")
LABELS = {"app": "lnl-web"}
# pod -> (node, measured CPU)
WEB = {
    "web-1a": ("lnl-hot-1", "1500m"),
    "web-1b": ("lnl-hot-1", "300m"),
    "web-1c": ("lnl-hot-1", "300m"),
    "web-2a": ("lnl-hot-2", "1200m"),
    "web-2b": ("lnl-hot-2", "300m"),
    "web-2c": ("lnl-hot-2", "300m"),
}
BARE = ("bare-1", "lnl-hot-1", "800m")
NODE_USAGE = {"lnl-hot-1": "3600m", "lnl-hot-2": "3400m", "lnl-cool-1": "400m", "lnl-cool-2": "400m"}
EXPECTED = {"web-1a", "web-2a"}


def _config(dry_run: bool) -> str:
    return f"""
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 0s
profiles:
- name: koord-descheduler
  plugins:
    balance:
      enabled: [{{name: LowNodeLoad}}]
  pluginConfig:
  - name: MigrationController
    args:
      apiVersion: descheduler/v1alpha2
      kind: MigrationControllerArgs
      defaultJobMode: EvictDirectly
      namespaces: {{include: [{NAMESPACE}]}}
      # The default workload limiter lets this 6-replica ReplicaSet lose one pod per 150 s.
      objectLimiters: {{workload: {{duration: 1s}}}}
  - name: LowNodeLoad
    args:
      apiVersion: descheduler/v1alpha2
      kind: LowNodeLoadArgs
      dryRun: {str(dry_run).lower()}
      nodeSelector: {{matchLabels: {{koord-e2e/pool: lownodeload}}}}
      lowThresholds: {{cpu: 30, memory: 100}}
      highThresholds: {{cpu: 70, memory: 100}}
      anomalyCondition: {{consecutiveAbnormalities: 1}}
"""


def _descheduler(cp: ControlPlane, config: Path, name: str) -> LocalComponent:
    """koord-descheduler with the chart's ServiceAccount and RBAC (LowNodeLoad's rules included)."""
    return koord_descheduler(cp, config, kubeconfig=install_descheduler_rbac(cp), name=name)


def _node(name: str) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "koord-e2e/pool": "lownodeload"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _pod_spec(node: str | None = None) -> dict[str, Any]:
    requests = {"cpu": "100m", "memory": "128Mi"}
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "tolerations": [TAINT],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "koord-e2e/pool", "operator": "In", "values": ["lownodeload"]}
                            ]
                        }
                    ]
                }
            }
        },
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": requests}}
        ],
    }
    if node is not None:
        spec["nodeName"] = node
    return spec


def _bound_pod(name: str, node: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": _pod_spec(node),
    }


def _replicaset() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "lnl-web", "namespace": NAMESPACE},
        "spec": {
            "replicas": len(WEB),
            "selector": {"matchLabels": LABELS},
            "template": {"metadata": {"labels": LABELS}, "spec": _pod_spec()},
        },
    }


def _load_file(directory: Path) -> Path:
    pods_of: dict[str, list[dict[str, Any]]] = {node: [] for node in NODE_USAGE}
    for pod, (node, cpu) in WEB.items():
        pods_of[node].append({"namespace": NAMESPACE, "name": pod, "usage": {"cpu": cpu, "memory": "128Mi"}})
    bare, node, cpu = BARE
    pods_of[node].append({"namespace": NAMESPACE, "name": bare, "usage": {"cpu": cpu, "memory": "128Mi"}})
    load = {
        "reportIntervalSeconds": 2,
        "nodes": [
            {"name": node, "usage": {"cpu": usage, "memory": "2Gi"}, "pods": pods_of[node]}
            for node, usage in NODE_USAGE.items()
        ],
    }
    path = directory / "lownodeload-load.yaml"
    path.write_text(yaml.safe_dump(load))
    return path


def _pmjs(cp: ControlPlane) -> list[dict[str, Any]]:
    items = list_items(cp, "podmigrationjobs")
    return [
        job
        for job in items
        if job["spec"]["podRef"].get("namespace") == NAMESPACE
        and (job["metadata"].get("annotations") or {}).get("koordinator.sh/evict-trigger") == "LowNodeLoad"
    ]


def _dry_run_events(cp: ControlPlane) -> list[dict[str, Any]]:
    events = list_items(cp, "events", namespace=None)
    return [
        e
        for e in events
        if e.get("reason") == "LowNodeLoadDryRun" and e["involvedObject"].get("name") in HOT + COOL
    ]


@pytest.fixture(scope="module")
def hot_cluster(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    apply(cp, [_node(name) for name in HOT + COOL])
    wait_nodes_ready(cp)
    apply(cp, [_bound_pod(name, node, dict(LABELS)) for name, (node, _) in WEB.items()])
    apply(cp, [_bound_pod(BARE[0], BARE[1], {"app": "bare"})])
    apply(cp, [_replicaset()])

    def adopted() -> bool:
        owned = [p for p in pods(cp, NAMESPACE) if p["metadata"].get("ownerReferences")]
        return {p["metadata"]["name"] for p in owned} == set(WEB)

    wait_for(adopted, timeout=60, what="the ReplicaSet adopting the six bound pods")
    directory = tmp_path_factory.mktemp("lownodeload")
    wait_for(
        lambda: all(cp.read("nodemetric", node) is not None for node in NODE_USAGE),
        timeout=60,
        what="koord-manager's NodeMetrics for the LowNodeLoad nodes",
    )
    koordlet = koordlet_simulation(
        cp, _load_file(directory), report_interval_seconds=None, name="koordlet-lnl"
    )
    koordlet.start()

    def reported() -> bool:
        for node in NODE_USAGE:
            status = get_object(cp, "nodemetric", node).get("status") or {}
            if not status.get("updateTime") or (node in HOT and not status.get("podsMetric")):
                return False
        return True

    try:
        wait_for(reported, timeout=60, what="koordlet's per-pod reports")
        yield directory
    finally:
        koordlet.stop()
        cp.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cp.kubectl("delete", "node", *HOT, *COOL, "--ignore-not-found")


def test_dry_run_reports_and_moves_nothing(control_plane: ControlPlane, hot_cluster: Path) -> None:
    cp = control_plane
    config = hot_cluster / "descheduler-dry-run.yaml"
    config.write_text(_config(dry_run=True))
    descheduler = _descheduler(cp, config, "koord-descheduler-lnl-dry")
    descheduler.start()
    try:
        events = wait_for(
            lambda: (lambda got: got if len(got) >= 2 else None)(_dry_run_events(cp)),
            timeout=60,
            what="LowNodeLoad's dry-run events on the hot nodes",
        )
    finally:
        descheduler.stop()
    reported = {e["involvedObject"]["name"]: e["message"] for e in events}
    assert set(reported) == set(HOT), reported
    assert f"{NAMESPACE}/web-1a" in reported["lnl-hot-1"]
    assert f"{NAMESPACE}/web-2a" in reported["lnl-hot-2"]
    assert _pmjs(cp) == []
    assert {p["metadata"]["name"] for p in pods(cp, NAMESPACE)} == {*WEB, BARE[0]}


def test_moves_the_pod_that_covers_each_hot_nodes_excess(
    control_plane: ControlPlane, hot_cluster: Path, scheduler: Scheduler
) -> None:
    """koord-scheduler places the ReplicaSet's replacements."""
    cp = control_plane
    config = hot_cluster / "descheduler.yaml"
    config.write_text(_config(dry_run=False))
    descheduler = _descheduler(cp, config, "koord-descheduler-lnl")
    descheduler.start()
    try:
        wait_for(lambda: len(_pmjs(cp)) >= len(EXPECTED), timeout=60, what="LowNodeLoad's PodMigrationJobs")
        time.sleep(5)  # nothing more comes: each hot node is under high after one pod
        jobs = _pmjs(cp)
        assert {j["spec"]["podRef"]["name"] for j in jobs} == EXPECTED, descheduler.log_tail()
        for job in jobs:
            reason = job["metadata"]["annotations"]["koordinator.sh/evict-reason"]
            assert reason.startswith("node is overutilized, node cpu usage("), reason

        def finished() -> list[dict[str, Any]] | None:
            done = [j for j in _pmjs(cp) if (j.get("status") or {}).get("phase") == "Succeeded"]
            return done if len(done) == len(EXPECTED) else None

        wait_for(finished, timeout=120, what="the PodMigrationJobs to succeed")

        def replaced() -> bool:
            live = [
                p
                for p in pods(cp, NAMESPACE)
                if p["metadata"]["labels"].get("app") == "lnl-web" and p["spec"].get("nodeName")
            ]
            names = {p["metadata"]["name"] for p in live}
            return len(live) == len(WEB) and not names & EXPECTED

        wait_for(replaced, timeout=120, what="the ReplicaSet's replacements bound")
        # the bare pod stays where it was
        bare = [p for p in pods(cp, NAMESPACE) if p["metadata"]["name"] == BARE[0]]
        assert bare
        assert bare[0]["spec"]["nodeName"] == BARE[1]
    finally:
        descheduler.stop()
