"""koord-descheduler's PodMigrationJobs on the real API server, with koord-scheduler placing the
reservations and koord-manager keeping their status, as on a cluster. koord-descheduler runs with
a token of the chart's ``koord-descheduler`` ServiceAccount (a missing RBAC rule fails here) and
takes the Lease ``koordinator-system/koord-descheduler``.

Fake nodes of their own (tainted, so that no other scenario's pods land there). A Deployment's
pods run on them (KWOK makes them Running and Ready); a PodMigrationJob applied as YAML moves one
of them. What is checked is what a user sees: the job's phase, status and conditions, the
replacement pod named in ``status.podRef`` bound (into the reservation, on the reservation's
node), the workload's unavailable pods never above maxUnavailablePerWorkload, and a bare pod
left alone unless ``evictAllBarePods``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koord_descheduler
from e2e.descheduler_process import install_descheduler_rbac
from e2e.scheduler_process import CHART, Scheduler
from e2e.workloads import apply, make_pod, pods, wait_for
from operators.descheduler.config import load, resolve
from operators.descheduler.registry import args_models

TAINT = {"key": "koord-e2e/pool", "value": "migration", "effect": "NoSchedule"}
POOL = {"node-type": "migration"}

CONFIG = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 10s
profiles:
- name: koord-descheduler
  pluginConfig:
  - name: MigrationController
    args:
      apiVersion: descheduler/v1alpha2
      kind: MigrationControllerArgs
      evictAllBarePods: {bare}
      maxMigratingPerNode: 5
      maxMigratingPerWorkload: 1
      maxUnavailablePerWorkload: 1
      objectLimiters:
        workload: {{duration: 1s}}
"""


def _node(name: str) -> dict[str, Any]:
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, **POOL},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _deployment(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    pod = make_pod(name, namespace, cpu="1", memory="1Gi", node_selector=POOL, tolerations=[TAINT])
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod["spec"]},
        },
    }


def _job(pod: dict[str, Any], mode: str, name: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": name or f"pmj-{uuid.uuid4().hex[:8]}"},
        "spec": {
            "mode": mode,
            "ttl": "3m",
            "podRef": {"namespace": pod["metadata"]["namespace"], "name": pod["metadata"]["name"]},
        },
    }


def _get(cp: ControlPlane, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    return cp.read(kind, name, namespace=namespace or "default")


def _final(cp: ControlPlane, name: str, timeout: float = 120) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        job = _get(cp, "podmigrationjob", name)
        phase = ((job or {}).get("status") or {}).get("phase")
        return job if phase in ("Succeeded", "Failed", "Aborted") else None

    return wait_for(done, timeout=timeout, what=f"PodMigrationJob {name} final")


def _ready(pod: dict[str, Any]) -> bool:
    return pod["spec"].get("nodeName") is not None and any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _running(cp: ControlPlane, namespace: str, app: str) -> list[dict[str, Any]]:
    return [
        p
        for p in pods(cp, namespace)
        if p["metadata"].get("labels", {}).get("app") == app and not p["metadata"].get("deletionTimestamp")
    ]


def _wait_ready(cp: ControlPlane, namespace: str, app: str, count: int) -> list[dict[str, Any]]:
    def ready() -> list[dict[str, Any]] | None:
        found = [p for p in _running(cp, namespace, app) if _ready(p)]
        return found if len(found) == count else None

    return wait_for(ready, timeout=90, what=f"{count} Ready pods of {app}")


class Descheduler:
    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.config = cp.state_dir / "koord-descheduler-config.yaml"
        self.component: LocalComponent = koord_descheduler(
            cp, self.config, kubeconfig=install_descheduler_rbac(cp)
        )

    def start(self, *, evict_all_bare_pods: bool = False) -> None:
        self.component.stop()
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text(CONFIG.format(bare=str(evict_all_bare_pods).lower()))
        self.component.start()
        # Leader election and the first lists take a moment; a job applied meanwhile just waits.
        time.sleep(1)
        if self.component.pid() is None:
            raise RuntimeError(f"koord-descheduler exited:\n{self.component.log_tail()}")


@pytest.fixture(scope="module")
def descheduler(control_plane: ControlPlane) -> Iterator[Descheduler]:
    apply(control_plane, [_node(f"migrate-{i}") for i in range(3)])
    wait_nodes_ready(control_plane)
    running = Descheduler(control_plane)
    running.start()
    yield running
    running.component.stop()
    control_plane.kubectl("delete", "podmigrationjobs", "--all", "--wait=false", check=False)


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"migrate-{uuid.uuid4().hex[:6]}"
    control_plane.create_namespace(name)
    yield name
    control_plane.delete_namespace(name)


def _log_on_failure(descheduler: Descheduler) -> str:
    return descheduler.component.log_tail(60)


def test_reservation_first_moves_a_deployment_pod_into_its_reservation(
    control_plane: ControlPlane, scheduler: Scheduler, descheduler: Descheduler, namespace: str
) -> None:
    cp = control_plane
    apply(cp, [_deployment("web", namespace, 3)])
    before = _wait_ready(cp, namespace, "web", 3)
    victim = before[0]
    job = _job(victim, "ReservationFirst")
    apply(cp, [job])
    final = _final(cp, job["metadata"]["name"])
    status = final["status"]
    assert status["phase"] == "Succeeded", (status, _log_on_failure(descheduler))
    assert status["status"] == "Complete"
    conditions = {c["type"]: (c["status"], c.get("reason")) for c in status["conditions"]}
    assert conditions["ReservationCreated"][0] == "True"
    assert conditions["ReservationScheduled"][0] == "True"
    assert conditions["Eviction"] == ("True", "EvictComplete")
    assert conditions["BoundPodReady"][0] == "True"
    assert conditions["PodBoundReservation"][0] == "True"
    # The replacement is a new pod of the Deployment, bound into the reservation on its node,
    # which is not the node the pod left.
    replacement = _get(cp, "pod", status["podRef"]["name"], namespace)
    assert replacement is not None
    assert replacement["metadata"]["uid"] != victim["metadata"]["uid"]
    assert replacement["spec"]["nodeName"] == status["nodeName"] != victim["spec"]["nodeName"]
    reservation_name = final["spec"]["reservationOptions"]["reservationRef"]["name"]
    allocated = json.loads(
        replacement["metadata"]["annotations"]["scheduling.koordinator.sh/reservation-allocated"]
    )
    assert allocated["name"] == reservation_name
    assert _get(cp, "pod", victim["metadata"]["name"], namespace) is None
    _wait_ready(cp, namespace, "web", 3)


def test_evict_directly_evicts_and_the_owner_replaces_the_pod(
    control_plane: ControlPlane, scheduler: Scheduler, descheduler: Descheduler, namespace: str
) -> None:
    cp = control_plane
    apply(cp, [_deployment("api", namespace, 3)])
    victim = _wait_ready(cp, namespace, "api", 3)[0]
    job = _job(victim, "EvictDirectly")
    apply(cp, [job])
    status = _final(cp, job["metadata"]["name"])["status"]
    assert status["phase"] == "Succeeded", (status, _log_on_failure(descheduler))
    assert status["status"] == "Complete"
    assert {c["type"]: c["reason"] for c in status["conditions"]} == {"Eviction": "EvictComplete"}
    after = _wait_ready(cp, namespace, "api", 3)
    assert victim["metadata"]["uid"] not in {p["metadata"]["uid"] for p in after}


def test_a_workloads_max_unavailable_is_never_exceeded(
    control_plane: ControlPlane, scheduler: Scheduler, descheduler: Descheduler, namespace: str
) -> None:
    """Three jobs for three pods of one Deployment at once, maxMigratingPerWorkload and
    maxUnavailablePerWorkload 1: each waits until the previous one ended and its replacement is
    Ready, so at every look at most one job runs and at most one pod is missing or not Ready, and
    all three succeed."""
    cp = control_plane
    apply(cp, [_deployment("batch", namespace, 3)])
    victims = _wait_ready(cp, namespace, "batch", 3)
    jobs = [_job(p, "EvictDirectly") for p in victims]
    apply(cp, jobs)
    names = [j["metadata"]["name"] for j in jobs]
    deadline = time.monotonic() + 150
    worst_ready = 3
    while time.monotonic() < deadline:
        ready = sum(1 for p in _running(cp, namespace, "batch") if _ready(p))
        worst_ready = min(worst_ready, ready)
        phases = [((_get(cp, "podmigrationjob", n) or {}).get("status") or {}).get("phase") for n in names]
        assert phases.count("Running") <= 1, phases
        if all(phase in ("Succeeded", "Failed") for phase in phases):
            break
        time.sleep(0.3)
    assert phases == ["Succeeded"] * 3, (phases, _log_on_failure(descheduler))
    assert worst_ready >= 2, worst_ready


def test_a_bare_pod_is_moved_only_with_evict_all_bare_pods(
    control_plane: ControlPlane, scheduler: Scheduler, descheduler: Descheduler, namespace: str
) -> None:
    cp = control_plane
    bare = make_pod("lonely", namespace, cpu="1", memory="1Gi", node_selector=POOL, tolerations=[TAINT])
    apply(cp, [bare])
    wait_for(
        lambda: next((p for p in pods(cp, namespace) if _ready(p)), None), timeout=60, what="bare pod Ready"
    )
    refused = _job(bare, "EvictDirectly")
    apply(cp, [refused])
    status = _final(cp, refused["metadata"]["name"])["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "ForbiddenMigratePod"), status
    assert "bare pod" in status["message"]
    assert _get(cp, "pod", "lonely", namespace) is not None

    descheduler.start(evict_all_bare_pods=True)
    try:
        allowed = _job(bare, "EvictDirectly")
        apply(cp, [allowed])
        status = _final(cp, allowed["metadata"]["name"])["status"]
        assert status["phase"] == "Succeeded", (status, _log_on_failure(descheduler))
        wait_for(
            lambda: _get(cp, "pod", "lonely", namespace) is None or None, timeout=60, what="bare pod gone"
        )
    finally:
        descheduler.start()


def test_the_charts_descheduler_renders_and_its_configuration_loads(control_plane: ControlPlane) -> None:
    rendered = control_plane.helm(
        "template",
        "koordinator-py",
        str(CHART),
        "--set",
        "descheduler.enabled=true",
        "--show-only",
        "templates/descheduler-configmap.yaml",
        "--show-only",
        "templates/descheduler-deployment.yaml",
    )
    applied = control_plane.run_kubectl("apply", "--dry-run=server", "-f", "-", input=rendered)
    assert applied.returncode == 0, applied.stderr
    [configmap] = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "ConfigMap"]
    config = load(configmap["data"]["config.yaml"])
    [profile] = resolve(config, args_models())
    assert profile.evict == ["MigrationController"]


def test_a_lease_it_cannot_take_stops_the_process_with_the_reason(control_plane: ControlPlane) -> None:
    """A leader-election namespace that does not exist is an error, not a process idling forever."""
    cp = control_plane
    config = cp.state_dir / "koord-descheduler-no-lease.yaml"
    config.write_text(
        "apiVersion: descheduler/v1alpha2\n"
        "kind: DeschedulerConfiguration\n"
        "leaderElection: {leaderElect: true, resourceNamespace: no-such-namespace}\n"
    )
    component = koord_descheduler(cp, config, name="koord-descheduler-no-lease")
    component.start()
    try:
        deadline = time.monotonic() + 60
        while component.pid() is not None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert component.pid() is None, "koord-descheduler kept running without its Lease"
        assert "namespace 'no-such-namespace' does not exist" in component.log_tail(200)
    finally:
        component.stop()
