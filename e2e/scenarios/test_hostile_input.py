"""Hostile pods and nodes on the real API server: koord-scheduler stays alive and ready, binds the
healthy pods beside them, and tells the owner of each hostile object what is wrong with it.

What kube-apiserver accepts decides what can reach the scheduler: it takes ``memory: 10E`` (more
than int64 holds), ``cpu: 1e999``, a node advertising ``10E`` and any annotation text, so each of
those must be refused or accounted safely on our side. It also keeps ``cpu: 1e1000`` (as
``10e999``), beyond what our parser reads: the Kubernetes backend decodes it as ``1e999``.

Round two (issue 35): a bound pod whose ``resource-status`` cpuset repeats ``0-1048575`` up to the
API server's 256 KiB annotation limit once stalled the scheduler for about 20 minutes; it is now
refused at its first range, with a Warning event, while the healthy pods bind in their usual time.
A node whose ``resource-amplification-ratio`` is ``1e308`` or ``Infinity`` once made the Node
mutating webhook refuse its status updates; they now go through unamplified, with a warning.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.components import http_status, koord_manager, wait_for_admission, wait_until_ready
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, get_object, list_items, make_pod, pods, wait_for

NAMESPACE = "hostile-input"
FULL_NODE = "hostile-full"  # two bound 5E pods on it: full, not negative
HUGE_NODE = "hostile-huge"  # allocatable memory 10E: no candidate
GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
AMPLIFICATION = "node.koordinator.sh/resource-amplification-ratio"
RATIO_NODE = "hostile-ratio"
RATIO_NAMESPACE = "hostile-ratio"  # the first test's namespace may still be terminating
E2E_WEBHOOK_PORT = int(os.environ.get("KOORD_E2E_WEBHOOK_PORT", "19443"))

# 24,000 ranges of 0-1048575 (about 240 KiB): under the API server's 256 KiB limit on annotations.
# Enumerated as written, that is 25 billion CPU ids; the parser refuses it at the first range.
STALLING_STATUS = json.dumps({"cpuset": ",".join(["0-1048575"] * 24_000)})


def _node(name: str, memory: str) -> dict[str, Any]:
    resources = {"cpu": "8", "memory": memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "node-type": "hostile"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _bound_pod(name: str, node: str, memory: str) -> dict[str, Any]:
    pod = make_pod(name, NAMESPACE, cpu="100m", memory=memory)
    pod["spec"]["nodeName"] = node
    return pod


def _create(cp: ControlPlane, obj: dict[str, Any]) -> None:
    """``kubectl create``: ``apply`` would copy a 240 KiB annotation into last-applied-configuration
    and pass the API server's limit."""
    cp.kubectl("create", "-f", "-", input=json.dumps(obj))


def _warnings(cp: ControlPlane, name: str) -> list[str]:
    raw = list_items(cp, "events", namespace=NAMESPACE)
    return [
        e.get("message") or e.get("note") or ""
        for e in raw
        if e.get("type") == "Warning" and e["involvedObject"]["name"] == name
    ]


def _ready(cp: ControlPlane, name: str) -> bool:
    conditions = cp.get_json(f"/api/v1/nodes/{name}").get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _node_warnings(cp: ControlPlane, name: str) -> list[str]:
    raw = list_items(cp, "events")
    return [
        e.get("message") or e.get("note") or ""
        for e in raw
        if e.get("type") == "Warning"
        and e["involvedObject"].get("kind") == "Node"
        and e["involvedObject"]["name"] == name
    ]


def _scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for condition in pod.get("status", {}).get("conditions") or ():
        if condition["type"] == "PodScheduled":
            return dict(condition)
    return None


def _by_name(cp: ControlPlane) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in pods(cp, NAMESPACE)}


def _assert_alive_and_ready(scheduler: Scheduler) -> None:
    assert scheduler.component.pid() is not None, scheduler.component.log_tail()
    assert http_status(f"{scheduler.url}/readyz") == 200, scheduler.component.log_tail()


def test_hostile_objects_are_refused_with_a_reason_and_healthy_pods_still_bind(
    control_plane: ControlPlane, scheduler_kubeconfig: Path, scheduler: Scheduler
) -> None:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    apply(cp, [_node(FULL_NODE, "64Gi"), _node(HUGE_NODE, "10E")])
    try:
        wait_nodes_ready(cp)  # else the not-ready taint, not the memory, keeps pods off FULL_NODE
        hostile = [
            _bound_pod("bound-10e", FULL_NODE, "10E"),
            _bound_pod("bound-5e-a", FULL_NODE, "5E"),
            _bound_pod("bound-5e-b", FULL_NODE, "5E"),
            make_pod("huge-memory", NAMESPACE, memory="10E"),
            make_pod("infinite-cpu", NAMESPACE, cpu="1e999"),
            make_pod("beyond-parser", NAMESPACE, cpu="1e1000"),  # kept as 10e999; we read 1e999
            make_pod("bad-gang", NAMESPACE, annotations={GANG_NAME: "bad", GANG_MIN: "many"}),
            make_pod("long-gang", NAMESPACE, annotations={GANG_NAME: "long", GANG_MIN: "9" * 5000}),
            make_pod("waiting-member", NAMESPACE, annotations={GANG_NAME: "w", GANG_MIN: "3"}),
            # Room on FULL_NODE would be 64Gi if the 5E pods wrapped the sum negative or were dropped.
            make_pod(
                "on-full-node", NAMESPACE, memory="1Gi", node_selector={"kubernetes.io/hostname": FULL_NODE}
            ),
        ]
        healthy = [make_pod(f"healthy-{i}", NAMESPACE, cpu="100m", memory="64Mi") for i in range(5)]
        stalling = _bound_pod("stalling-cpuset", FULL_NODE, "64Mi")
        stalling["metadata"]["annotations"] = {RESOURCE_STATUS: STALLING_STATUS}
        _create(cp, stalling)  # before the healthy pods: the scheduler meets it first
        apply(cp, hostile + healthy)

        wait_for(
            lambda: all(_by_name(cp)[p["metadata"]["name"]]["spec"].get("nodeName") for p in healthy) or None,
            timeout=60,
            what="the healthy pods to bind",
        )
        _assert_alive_and_ready(scheduler)

        refused = {
            "huge-memory": "spec.containers[0].resources.requests.memory: 10E is outside the range",
            "infinite-cpu": "spec.containers[0].resources.requests.cpu: 1e999 is outside the range",
            "beyond-parser": "spec.containers[0].resources.requests.cpu: 1e999 is outside the range",
            "bad-gang": GANG_MIN,
            "long-gang": GANG_MIN,
        }

        def told() -> bool | None:
            by_name = _by_name(cp)
            for name, field in refused.items():
                condition = _scheduled_condition(by_name[name])
                if condition is None or field not in condition.get("message", ""):
                    return None
                if not any(field in m for m in _warnings(cp, name)):
                    return None
            return True

        wait_for(told, timeout=30, what="a Warning event and a PodScheduled=False condition per hostile pod")
        by_name = _by_name(cp)
        for name in refused:
            assert not by_name[name]["spec"].get("nodeName"), name
            condition = _scheduled_condition(by_name[name])
            assert condition is not None
            assert condition["status"] == "False"

        assert _warnings(cp, "waiting-member") == []  # merely waiting for its gang: no Warning
        wait_for(
            lambda: any("Insufficient memory" in m for m in _warnings(cp, "on-full-node")) or None,
            timeout=30,
            what="on-full-node to be refused for memory",
        )
        assert not _by_name(cp)["on-full-node"]["spec"].get("nodeName")
        assert any("status.allocatable.memory: 10E" in m for m in _node_warnings(cp, HUGE_NODE))
        assert any("requests.memory: 5E" in m for m in _warnings(cp, "bound-5e-a"))
        stalling_warnings = wait_for(
            lambda: [m for m in _warnings(cp, "stalling-cpuset") if RESOURCE_STATUS in m] or None,
            timeout=30,
            what="a Warning event on the stalling pod naming resource-status",
        )
        assert any("CPU ids stop at 8191" in m for m in stalling_warnings), stalling_warnings
        assert all(len(m) <= 2000 for m in stalling_warnings)

        # A restart must list all of it and become ready again.
        scheduler.component.stop()
        scheduler.ensure_running(cp, scheduler_kubeconfig)
        wait_until_ready(scheduler.component, scheduler.port, timeout=60)
        apply(cp, [make_pod("after-restart", NAMESPACE, cpu="100m", memory="64Mi")])
        wait_for(
            lambda: _by_name(cp)["after-restart"]["spec"].get("nodeName"),
            timeout=60,
            what="a healthy pod to bind after the restart",
        )
        _assert_alive_and_ready(scheduler)
    finally:
        cp.kubectl("delete", "node", FULL_NODE, HUGE_NODE, "--ignore-not-found", "--wait=false")
        cp.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")


@pytest.fixture(scope="module")
def gated_manager(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The session's koord-manager swapped for one with the Node mutating webhook on (the plain
    one is put back at the end), as in ``test_cpu_normalization``."""
    cp = control_plane
    koord_manager(cp, webhook_port=E2E_WEBHOOK_PORT).stop()
    gated = koord_manager(
        cp, webhook_port=E2E_WEBHOOK_PORT, extra_args=("--feature-gates=NodeMutatingWebhook=true",)
    )
    gated.start()
    try:
        wait_for_admission(cp, gated)
        cp.create_namespace(RATIO_NAMESPACE)
        yield cp
    finally:
        cp.run_kubectl("delete", "node", RATIO_NODE, "--ignore-not-found", "--wait=true")
        cp.run_kubectl("delete", "namespace", RATIO_NAMESPACE, "--ignore-not-found", "--wait=false")
        print(gated.stop())
        plain = koord_manager(cp, webhook_port=E2E_WEBHOOK_PORT)
        plain.start()
        wait_for_admission(cp, plain)


@pytest.mark.parametrize(
    "ratio", ['{"cpu":1e308}', '{"cpu":Infinity,"memory":1.5}'], ids=["1e308", "infinity"]
)
def test_a_node_with_an_absurd_amplification_ratio_still_gets_its_status_updates(
    gated_manager: ControlPlane, scheduler: Scheduler, ratio: str
) -> None:
    cp = gated_manager
    node = _node(RATIO_NODE, "16Gi")
    node["metadata"]["annotations"][AMPLIFICATION] = ratio
    cp.run_kubectl("delete", "node", RATIO_NODE, "--ignore-not-found", "--wait=true")
    _create(cp, node)
    # KWOK's node-initialize stage writes the status it read when the node appeared (cpu 8) once,
    # until the node is Ready: the status update below comes after it, or KWOK's write undoes it.
    wait_for(lambda: _ready(cp, RATIO_NODE) or None, timeout=60, what=f"KWOK to initialize {RATIO_NODE}")
    # What kubelet does: a status update with the allocatable it computed. Before issue 35 the
    # webhook raised OverflowError and Kopf answered allowed: false, refusing it.
    report = {"status": {"allocatable": {"cpu": "6", "memory": "12Gi", "pods": "110"}}}
    proc = cp.run_kubectl(
        "patch", "node", RATIO_NODE, "--subresource=status", "--type=merge", "-p", json.dumps(report)
    )
    assert proc.returncode == 0, proc.stderr
    stored = get_object(cp, "node", RATIO_NODE)
    assert stored["status"]["allocatable"]["cpu"] == "6"  # not amplified
    if stored["metadata"].get("annotations", {}).get(AMPLIFICATION) == ratio:
        assert AMPLIFICATION in proc.stderr, proc.stderr  # the admission warning kubectl prints

    # koord-scheduler stays alive and binds healthy pods in their usual time.
    name = f"healthy-beside-ratio-{'inf' if 'Infinity' in ratio else 'big'}"
    apply(cp, [make_pod(name, RATIO_NAMESPACE, cpu="100m", memory="64Mi")])

    def bound_to() -> str | None:
        found = {p["metadata"]["name"]: p for p in pods(cp, RATIO_NAMESPACE)}
        return found[name]["spec"].get("nodeName") if name in found else None

    wait_for(bound_to, timeout=60, what=f"{name} to bind")
    _assert_alive_and_ready(scheduler)
