"""Reservations on the real API server: applied as YAML, placed by koord-scheduler, used by their
owners and by nobody else.

Fake nodes of their own (tainted, so that no other scenario's pods land there); reservations and
pods tolerate the taint and select the pool. What is checked is what a user sees: the
Reservation's status (phase, nodeName, allocatable, conditions), the pods' nodes and their
``scheduling.koordinator.sh/reservation-allocated`` annotation, and FailedScheduling events.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import yaml

from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, failed_scheduling, get_object, list_items, make_pod, pods, wait_for

NAMESPACE = "reservations"
TAINT = {"key": "koord-e2e/pool", "value": "reservation", "effect": "NoSchedule"}
POOL = {"node-type": "reservation"}
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


def _node(name: str, cpu: str) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "32Gi", "pods": "110"}
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


def _reservation_yaml(name: str, cpu: str, owner_label: str, extra: str = "") -> str:
    return f"""
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata:
  name: {name}
spec:
  template:
    metadata:
      namespace: {NAMESPACE}
    spec:
      schedulerName: koord-scheduler
      nodeSelector: {json.dumps(POOL)}
      tolerations: [{json.dumps(TAINT)}]
      containers:
      - name: main
        resources:
          requests: {{cpu: "{cpu}", memory: 1Gi}}
  owners:
  - labelSelector:
      matchLabels: {{app: {owner_label}}}
  ttl: 1h
{extra}"""


def _pod(name: str, cpu: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    pod = make_pod(name, NAMESPACE, cpu=cpu, memory="1Gi", node_selector=POOL, tolerations=[TAINT])
    pod["metadata"]["labels"] = {**pod["metadata"].get("labels", {}), **(labels or {})}
    return pod


def _reservation(cp: ControlPlane, name: str) -> dict[str, Any]:
    return get_object(cp, "reservation", name)


def _available(cp: ControlPlane, name: str) -> str | None:
    status = _reservation(cp, name).get("status") or {}
    return status.get("nodeName") if status.get("phase") == "Available" else None


def _bound(cp: ControlPlane) -> dict[str, str | None]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods(cp, NAMESPACE)}


def _cleanup(cp: ControlPlane, *reservations: str) -> None:
    cp.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--force", check=False)
    for name in reservations:
        cp.kubectl("delete", "reservation", name, "--ignore-not-found", check=False)


def test_a_job_lands_exactly_on_the_nodes_reserved_for_it(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    apply(cp, [_node(f"resv-{i}", "8") for i in range(4)])
    wait_nodes_ready(cp)
    names = ("train-a", "train-b")
    try:
        # 6 of 8 CPUs each: the two reservations cannot share a node.
        for name in names:
            cp.kubectl("apply", "-f", "-", input=_reservation_yaml(name, "6", "train"))
        reserved = wait_for(
            lambda: {n: _available(cp, n) for n in names} if all(_available(cp, n) for n in names) else None,
            timeout=60,
            what="both reservations Available",
        )
        assert len(set(reserved.values())) == 2, reserved
        status = _reservation(cp, names[0])["status"]
        assert status["allocatable"]["cpu"] == "6", status
        assert {(c["type"], c["status"]) for c in status["conditions"]} >= {
            ("Scheduled", "True"),
            ("Ready", "True"),
        }

        # A stranger asking for 4 CPUs may not use reserved room: it goes to one of the free nodes.
        apply(cp, [_pod("stranger", "4")])
        stranger = wait_for(lambda: _bound(cp).get("stranger"), timeout=60, what="stranger bound")
        assert stranger not in reserved.values()

        # The job's two pods land exactly on the reserved nodes and say which reservation they used.
        apply(cp, [_pod(f"worker-{i}", "6", {"app": "train"}) for i in range(2)])

        def workers() -> dict[str, str | None] | None:
            bound = _bound(cp)
            return bound if bound.get("worker-0") and bound.get("worker-1") else None

        placed = wait_for(workers, timeout=60, what="both workers bound")
        assert {placed["worker-0"], placed["worker-1"]} == set(reserved.values()), (placed, reserved)
        by_node = {node: name for name, node in reserved.items()}
        for pod in pods(cp, NAMESPACE):
            if pod["metadata"]["name"].startswith("worker-"):
                allocated = json.loads(pod["metadata"]["annotations"][ALLOCATED])
                assert allocated["name"] == by_node[pod["spec"]["nodeName"]], allocated

        # koordctl explain says which reservation the pod used.
        explained = subprocess.run(
            [
                sys.executable,
                "-m",
                "scheduler.koordctl",
                "explain",
                "pod",
                "worker-0",
                "-n",
                NAMESPACE,
                "--server",
                scheduler.url,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        used = by_node[placed["worker-0"] or ""]
        assert f"allocated from reservation {used} on {placed['worker-0']}" in explained, explained
    finally:
        _cleanup(cp, *names)


def test_a_non_owner_is_kept_off_reserved_room_and_a_too_large_reservation_says_why(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    cp = control_plane
    cp.kubectl("create", "namespace", NAMESPACE, check=False)
    cp.wait_service_account(NAMESPACE)
    apply(cp, [_node(f"resv-{i}", "8") for i in range(4)])
    wait_nodes_ready(cp)
    reservations = [f"hold-{i}" for i in range(4)]
    try:
        # Every pool node is 6/8 reserved: 2 CPUs stay free per node.
        for name in reservations:
            cp.kubectl("apply", "-f", "-", input=_reservation_yaml(name, "6", "owner"))
        wait_for(
            lambda: all(_available(cp, n) for n in reservations), timeout=60, what="4 reservations Available"
        )
        apply(cp, [_pod("too-big", "3")])
        message = wait_for(
            lambda: [m for m in failed_scheduling(cp, NAMESPACE, "too-big") if "Insufficient cpu" in m],
            timeout=60,
            what="a FailedScheduling event for too-big",
        )[-1]
        assert "Insufficient cpu" in message, message
        assert _bound(cp)["too-big"] is None

        # An owner of the same size uses one reservation's room.
        apply(cp, [_pod("owner-0", "3", {"app": "owner"})])
        wait_for(lambda: _bound(cp).get("owner-0"), timeout=60, what="owner-0 bound")

        # A reservation larger than any node stays Pending and says why, on the Reservation.
        cp.kubectl("apply", "-f", "-", input=_reservation_yaml("huge", "64", "nobody"))
        condition = wait_for(
            lambda: next(
                (
                    c
                    for c in (_reservation(cp, "huge").get("status") or {}).get("conditions") or ()
                    if c["type"] == "Scheduled" and c["status"] == "False"
                ),
                None,
            ),
            timeout=60,
            what="huge's Scheduled=False condition",
        )
        assert condition["reason"] == "Unschedulable"
        assert "Insufficient cpu" in condition["message"], condition
        assert (_reservation(cp, "huge").get("status") or {}).get("phase", "Pending") == "Pending"
        events = list_items(cp, "events", namespace=None)
        assert any(
            e["involvedObject"].get("kind") == "Reservation"
            and e["involvedObject"]["name"] == "huge"
            and e["reason"] == "FailedScheduling"
            for e in events
        ), [e["involvedObject"] for e in events if e["reason"] == "FailedScheduling"]
    finally:
        _cleanup(cp, *reservations, "huge")


def test_reservation_affinity_and_ignored_pods(control_plane: ControlPlane, scheduler: Scheduler) -> None:
    cp = control_plane
    cp.kubectl("create", "namespace", NAMESPACE, check=False)
    cp.wait_service_account(NAMESPACE)
    apply(cp, [_node(f"resv-{i}", "8") for i in range(4)])
    wait_nodes_ready(cp)
    reservations = [f"named-{i}" for i in range(4)]
    try:
        for name in reservations:
            cp.kubectl("apply", "-f", "-", input=_reservation_yaml(name, "6", "any"))
        wait_for(
            lambda: all(_available(cp, n) for n in reservations), timeout=60, what="4 reservations Available"
        )
        target = _available(cp, "named-2")
        # By name: the pod goes to that reservation's node, whatever else is free.
        pod = _pod("by-name", "1", {"app": "any"})
        pod["metadata"]["annotations"] = {
            "scheduling.koordinator.sh/reservation-affinity": '{"name": "named-2"}'
        }
        apply(cp, [pod])
        assert wait_for(lambda: _bound(cp).get("by-name"), timeout=60, what="by-name bound") == target
        # A pod that names a reservation that does not exist waits, and the event says so.
        missing = _pod("missing", "1", {"app": "any"})
        missing["metadata"]["annotations"] = {
            "scheduling.koordinator.sh/reservation-affinity": '{"name": "nope"}'
        }
        apply(cp, [missing])
        message = wait_for(
            lambda: failed_scheduling(cp, NAMESPACE, "missing"), timeout=60, what="missing's FailedScheduling"
        )[-1]
        assert "no reservations match reservation affinity" in message, message
        # reservation-ignored: 6 CPUs fit only by using reserved room; it is allowed to.
        backfill = _pod("backfill", "6", {"scheduling.koordinator.sh/reservation-ignored": "true"})
        apply(cp, [backfill])
        wait_for(lambda: _bound(cp).get("backfill"), timeout=60, what="backfill bound")
    finally:
        _cleanup(cp, *reservations)


def test_the_documented_example_applies(control_plane: ControlPlane, scheduler: Scheduler) -> None:
    """docs/examples/reservation/ as a user applies it: koord-scheduler places the reservation and
    its owner uses it; koord-manager then records the owner and, allocateOnce, ends it Succeeded."""
    from pathlib import Path

    cp = control_plane
    files = sorted(Path("docs/examples/reservation").glob("*.yaml"))
    assert files, "docs/examples/reservation/*.yaml"
    docs = [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]
    names = [d["metadata"]["name"] for d in docs if d["kind"] == "Reservation"]
    owners = [d for d in docs if d["kind"] == "Pod"]
    namespace = owners[0]["metadata"]["namespace"]
    wanted = {owner["metadata"]["name"] for owner in owners}
    try:
        for path in files:
            cp.apply_file(path)

        def all_bound() -> bool:
            return wanted <= {p["metadata"]["name"] for p in pods(cp, namespace) if p["spec"].get("nodeName")}

        wait_for(all_bound, timeout=60, what=f"{sorted(wanted)} bound")
        for pod in pods(cp, namespace):
            allocated = json.loads((pod["metadata"].get("annotations") or {})[ALLOCATED])
            assert allocated["name"] in names, allocated

        def succeeded() -> list[dict[str, Any]] | None:
            statuses = [_reservation(cp, n).get("status") or {} for n in names]
            return statuses if all(s.get("phase") == "Succeeded" for s in statuses) else None

        for status in wait_for(succeeded, timeout=60, what="the example reservations Succeeded"):
            assert {o["name"] for o in status["currentOwners"]} <= wanted, status
            assert status["nodeName"], status
    finally:
        for path in files:
            cp.kubectl("delete", "-f", str(path), "--ignore-not-found", "--wait=false", check=False)


def test_koordinators_own_e2e_reservation_manifests_apply_verbatim(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    """Koordinator's test/e2e/testing-manifests/scheduling/simple-reservation.yaml (a schemaless
    template whose container has no name) and simple-pod-with-reservation.yaml, as its e2e suite
    applies them: admitted, placed by koord-scheduler, and the pod allocates from it."""
    from e2e.cluster.controlplane import repo_root

    cp = control_plane
    data = repo_root() / "tests" / "data"
    pause = "registry.k8s.io/pause:3.10"
    reservation_yaml = (data / "koordinator_simple_reservation.yaml").read_text()
    pod_yaml = (data / "koordinator_simple_pod_with_reservation.yaml").read_text()
    try:
        cp.kubectl("apply", "-f", "-", input=reservation_yaml.replace("{{.PauseImage}}", pause))
        node = wait_for(
            lambda: _available(cp, "simple-reservation"), timeout=60, what="simple-reservation Available"
        )
        allocatable = _reservation(cp, "simple-reservation")["status"]["allocatable"]
        assert allocatable == {"cpu": "1", "memory": "1Gi"}
        cp.kubectl("apply", "-n", "default", "-f", "-", input=pod_yaml.replace("{{.PauseImage}}", pause))

        def bound() -> dict[str, Any] | None:
            pod: dict[str, Any] = cp.get_json("/api/v1/namespaces/default/pods/simple-pod-with-reservation")
            return pod if pod["spec"].get("nodeName") else None

        pod = wait_for(bound, timeout=60, what="simple-pod-with-reservation bound")
        assert pod["spec"]["nodeName"] == node
        assert json.loads(pod["metadata"]["annotations"][ALLOCATED])["name"] == "simple-reservation"
    finally:
        cp.kubectl("delete", "pod", "simple-pod-with-reservation", "-n", "default", "--ignore-not-found")
        cp.kubectl("delete", "reservation", "simple-reservation", "--ignore-not-found")


def test_an_expired_reservation_frees_its_room(control_plane: ControlPlane, scheduler: Scheduler) -> None:
    """koord-scheduler holds the room; koord-manager fails the reservation when its ttl passes;
    the room goes back to everyone and the waiting pod binds."""
    cp = control_plane
    cp.kubectl("create", "namespace", NAMESPACE, check=False)
    cp.wait_service_account(NAMESPACE)
    apply(cp, [_node(f"resv-{i}", "8") for i in range(4)])
    wait_nodes_ready(cp)
    reservations = [f"short-{i}" for i in range(4)]
    try:
        for name in reservations:
            extra = "  ttl: 20s\n" if name == "short-0" else ""
            text = _reservation_yaml(name, "6", "nobody")
            if extra:
                text = text.replace("  ttl: 1h\n", extra)
            cp.kubectl("apply", "-f", "-", input=text)
        wait_for(
            lambda: all(_available(cp, n) for n in reservations), timeout=60, what="4 reservations Available"
        )
        apply(cp, [_pod("waiting", "4")])
        wait_for(
            lambda: [m for m in failed_scheduling(cp, NAMESPACE, "waiting") if "Insufficient cpu" in m],
            timeout=60,
            what="waiting is refused while every node is reserved",
        )
        freed = _available(cp, "short-0")

        def expired() -> bool:
            status = _reservation(cp, "short-0").get("status") or {}
            return status.get("phase") == "Failed"

        wait_for(expired, timeout=90, what="short-0 Failed by koord-manager")
        ready = next(c for c in _reservation(cp, "short-0")["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "Expired"), ready
        assert wait_for(lambda: _bound(cp).get("waiting"), timeout=60, what="waiting bound") == freed
    finally:
        _cleanup(cp, *reservations)
