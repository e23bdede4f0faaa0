"""koord-manager's Reservation lifecycle against the real API server: a ttl expires a reservation,
owner pods make it Succeeded (allocateOnce) or are released when deleted (allocateOnce: false), a
deleted node fails it, a finished one past its retention is deleted, admission names the field of
an invalid one, ``kubectl get reservations`` shows the owners, and the chart's ClusterRole allows
what the operator does.

koord-manager is the session's process (``control_plane`` starts it). koord-scheduler's side (placing
a reservation, annotating owners at PreBind) is played by the tests: they write the status through
the status subresource and the ``reservation-allocated`` annotation as the scheduler would, and
give the templates a scheduler name nobody serves, so that no scheduler races them.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from apis.extension.reservation import ANNOTATION_RESERVATION_ALLOCATED
from e2e.chart_roles import assert_can, koord_manager_role
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.kubectl_table import header, rows
from e2e.workloads import get_object, wait_for

TIMEOUT = 30.0
NODE = "cpu-9"  # a node no other scenario names
TEMPLATE: dict[str, Any] = {
    "metadata": {"namespace": "default"},
    "spec": {
        "schedulerName": "no-such-scheduler",
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}}
        ],
    },
}


def _name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def _reservation(name: str, **spec: Any) -> str:
    body = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name},
        "spec": {"template": TEMPLATE, "owners": [{"labelSelector": {"matchLabels": {"app": name}}}], **spec},
    }
    return json.dumps(body)


def _status(cp: ControlPlane, name: str) -> dict[str, Any]:
    status: dict[str, Any] = get_object(cp, "reservation", name).get("status") or {}
    return status


def _ready(status: dict[str, Any]) -> dict[str, Any]:
    (ready,) = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return dict(ready)


def _set_status(cp: ControlPlane, name: str, status: dict[str, Any]) -> None:
    """Write ``status`` as koord-scheduler does (the status subresource)."""
    cp.kubectl(
        "patch",
        "reservation",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def _place(cp: ControlPlane, name: str, node: str = NODE) -> None:
    """What koord-scheduler writes when it binds a reservation."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _set_status(
        cp,
        name,
        {
            "phase": "Available",
            "nodeName": node,
            "allocatable": {"cpu": "2", "memory": "2Gi"},
            "conditions": [
                {"type": "Scheduled", "status": "True", "reason": "Scheduled", "lastTransitionTime": now},
                {"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": now},
            ],
        },
    )


def _owner(cp: ControlPlane, namespace: str, name: str, reservation: str, node: str = NODE) -> str:
    """A pod bound into ``reservation`` on ``node``, annotated as koord-scheduler's PreBind does; its uid."""
    uid = get_object(cp, "reservation", reservation)["metadata"]["uid"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": reservation},
            "annotations": {ANNOTATION_RESERVATION_ALLOCATED: json.dumps({"name": reservation, "uid": uid})},
        },
        "spec": {
            "schedulerName": "no-such-scheduler",
            "nodeName": node,  # KWOK runs a pod created on one of its nodes
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                }
            ],
        },
    }
    cp.kubectl("apply", "-f", "-", input=json.dumps(pod))
    pod_uid: str = get_object(cp, "pod", name, namespace=namespace)["metadata"]["uid"]
    return pod_uid


@pytest.fixture
def reservations(control_plane: ControlPlane) -> Iterator[list[str]]:
    """Names to delete after the test."""
    names: list[str] = []
    yield names
    for name in names:
        control_plane.kubectl("delete", "reservation", name, "--ignore-not-found", "--wait=false")


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = _name("rsv")
    control_plane.create_namespace(name)
    yield name
    # The owner pods are gone from the node before the next scenario.
    control_plane.delete_namespace(name)


def test_a_reservation_with_ttl_3s_expires_to_failed(
    control_plane: ControlPlane, reservations: list[str]
) -> None:
    cp = control_plane
    name = _name("ttl")
    reservations.append(name)
    cp.kubectl("apply", "-f", "-", input=_reservation(name, ttl="3s"))
    status = wait_for(
        lambda: (s := _status(cp, name)).get("phase") == "Failed" and s, TIMEOUT, f"{name} Failed"
    )
    ready = _ready(status)
    assert (ready["status"], ready["reason"]) == ("False", "Expired")
    assert "spec.ttl 3s passed since its creation" in ready["message"]
    # Pending: it never had a node, and expiring it is what frees the scheduler's queue.
    assert "nodeName" not in status


def test_an_owner_pod_makes_an_allocate_once_reservation_succeed(
    control_plane: ControlPlane, reservations: list[str], namespace: str
) -> None:
    cp = control_plane
    name = _name("once")
    reservations.append(name)
    cp.kubectl("apply", "-f", "-", input=_reservation(name, ttl="1h"))
    _place(cp, name)
    pod_uid = _owner(cp, namespace, "owner", name)
    status = wait_for(
        lambda: (s := _status(cp, name)).get("phase") == "Succeeded" and s, TIMEOUT, f"{name} Succeeded"
    )
    assert status["currentOwners"] == [{"namespace": namespace, "name": "owner", "uid": pod_uid}]
    assert status["allocated"] == {"cpu": "500m", "memory": "512Mi"}
    assert (status["nodeName"], status["allocatable"]) == (NODE, {"cpu": "2", "memory": "2Gi"})
    ready = _ready(status)
    assert (ready["status"], ready["reason"]) == ("False", "Succeeded")

    table = cp.kubectl("get", "reservations", name)
    assert header(table) == ["NAME", "PHASE", "AGE", "NODE", "TTL", "EXPIRES", "OWNERS"]
    row = rows(table)[name]
    assert (row["PHASE"], row["NODE"], row["TTL"], row["OWNERS"]) == ("Succeeded", NODE, "1h", "owner")


def test_allocate_once_false_releases_the_owner_when_its_pod_is_deleted(
    control_plane: ControlPlane, reservations: list[str], namespace: str
) -> None:
    cp = control_plane
    name = _name("many")
    reservations.append(name)
    cp.kubectl("apply", "-f", "-", input=_reservation(name, ttl="1h", allocateOnce=False))
    _place(cp, name)
    uids = {pod: _owner(cp, namespace, pod, name) for pod in ("pod-a", "pod-b")}
    both = sorted(uids, key=lambda pod: uids[pod])  # currentOwners is sorted by uid

    def owners() -> list[str]:
        return [o["name"] for o in _status(cp, name).get("currentOwners") or []]

    wait_for(lambda: owners() == both, TIMEOUT, f"{name} owned by both pods")
    status = _status(cp, name)
    assert status["phase"] == "Available"
    assert status["allocated"] == {"cpu": "1", "memory": "1Gi"}
    # The API server prints the first match of a list path: the owner with the smaller uid.
    assert rows(cp.kubectl("get", "reservations", name))[name]["OWNERS"] == both[0]

    cp.kubectl("delete", "pod", both[0], "-n", namespace, "--grace-period=0", "--force")
    wait_for(lambda: owners() == [both[1]], TIMEOUT, f"{name} released {both[0]}")
    assert _status(cp, name)["allocated"] == {"cpu": "500m", "memory": "512Mi"}
    cp.kubectl("delete", "pod", both[1], "-n", namespace, "--grace-period=0", "--force")
    wait_for(lambda: "currentOwners" not in _status(cp, name), TIMEOUT, f"{name} released both")
    status = _status(cp, name)
    assert "allocated" not in status
    assert status["phase"] == "Available"
    assert rows(cp.kubectl("get", "reservations", name))[name]["OWNERS"] == ""


def test_a_reservation_whose_node_is_deleted_fails(
    control_plane: ControlPlane, reservations: list[str]
) -> None:
    cp = control_plane
    node = _name("rsv-node")
    # A bare Node object (no KWOK stage runs it), tainted so that no scheduler considers it meanwhile.
    bare = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node},
        "spec": {"taints": [{"key": "e2e", "effect": "NoSchedule"}]},
    }
    cp.kubectl("apply", "-f", "-", input=json.dumps(bare))
    name = _name("orphan")
    reservations.append(name)
    try:
        cp.kubectl("apply", "-f", "-", input=_reservation(name, ttl="1h"))
        _place(cp, name, node)
        wait_for(lambda: _status(cp, name).get("nodeName") == node, TIMEOUT, f"{name} placed")
    finally:
        cp.kubectl("delete", "node", node, "--ignore-not-found")
    status = wait_for(
        lambda: (s := _status(cp, name)).get("phase") == "Failed" and s, TIMEOUT, f"{name} Failed"
    )
    ready = _ready(status)
    assert ready["reason"] == "Expired"
    assert ready["message"] == f"the reservation expired: its node {node} was deleted"


def test_a_finished_reservation_past_its_retention_is_deleted(
    control_plane: ControlPlane, reservations: list[str]
) -> None:
    """The session's koord-manager keeps finished reservations for Koordinator's 24h."""
    cp = control_plane
    old, recent = _name("old"), _name("recent")
    reservations.extend([old, recent])
    for name, finished in ((old, timedelta(hours=25)), (recent, timedelta(hours=23))):
        cp.kubectl("apply", "-f", "-", input=_reservation(name, ttl="0s"))
        at = (datetime.now(UTC) - finished).strftime("%Y-%m-%dT%H:%M:%SZ")
        ready = {
            "type": "Ready",
            "status": "False",
            "reason": "Expired",
            "lastTransitionTime": at,
            "lastProbeTime": at,
        }
        _set_status(cp, name, {"phase": "Failed", "conditions": [ready]})
    wait_for(
        lambda: cp.read("reservation", old) is None,
        TIMEOUT,
        f"{old}, finished 25h ago, deleted",
    )
    assert _status(cp, recent)["phase"] == "Failed"  # 23h: kept


def test_a_bound_reservation_keeps_its_template_and_owners(
    control_plane: ControlPlane, reservations: list[str]
) -> None:
    cp = control_plane
    name = _name("bound")
    reservations.append(name)
    cp.kubectl("apply", "-f", "-", input=_reservation(name, ttl="1h"))
    cp.kubectl(
        "patch", "reservation", name, "--type=merge", "-p", '{"spec": {"ttl": "2h"}}'
    )  # unbound: allowed
    _place(cp, name)
    changed = cp.run_kubectl(
        "patch",
        "reservation",
        name,
        "--type=json",
        "-p",
        json.dumps(
            [{"op": "replace", "path": "/spec/owners", "value": [{"object": {"name": "someone-else"}}]}]
        ),
    )
    assert changed.returncode != 0
    assert (
        "spec.owners: Forbidden: may not change once the reservation is bound to node " + NODE
        in changed.stderr
    )
    cp.kubectl("patch", "reservation", name, "--type=merge", "-p", '{"spec": {"ttl": "3h"}}')  # still allowed


INVALID = [
    pytest.param({"template": None}, "spec.template: Required value", id="no-template"),
    pytest.param(
        {"template": {"spec": {"containers": {"name": "main"}}}},
        "spec.template.spec.containers: Input should be a valid list",
        id="template-of-the-wrong-shape",
    ),
    pytest.param(
        {"template": {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "-1"}}}]}}},
        "spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: '-1'",
        id="negative-request",
    ),
    pytest.param({"owners": []}, "spec.owners", id="empty-owners"),
    pytest.param({"owners": [{}]}, "spec.owners[0]", id="owner-without-fields"),
    pytest.param(
        {"owners": [{"object": {"namespace": "default"}}]},
        "spec.owners[0].object: Required value: name or uid of the owner pod",
        id="object-without-name-or-uid",
    ),
    pytest.param(
        {
            "owners": [
                {"controller": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": ""}}
            ]
        },
        "spec.owners[0].controller.uid: Required value",
        id="controller-without-uid",
    ),
    pytest.param(
        {
            "owners": [
                {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}
            ]
        },
        "spec.owners[0].labelSelector.matchExpressions[0].values: Forbidden",
        id="selector-exists-with-values",
    ),
    pytest.param(
        {"owners": [{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Equals"}]}}]},
        "spec.owners[0].labelSelector.matchExpressions[0].operator: Invalid value: 'Equals'",
        id="selector-bad-operator",
    ),
    pytest.param(
        {"ttl": "1h", "expires": "2030-01-01T00:00:00Z"},
        "spec.ttl: Forbidden: ttl '1h' and spec.expires are mutually exclusive",
        id="ttl-and-expires",
    ),
    pytest.param({"ttl": "1d"}, "spec.ttl: Value error, invalid duration '1d'", id="unparseable-ttl"),
]


@pytest.mark.parametrize(("spec", "expected"), INVALID)
def test_invalid_reservations_are_rejected_naming_the_field(
    control_plane: ControlPlane, spec: dict[str, Any], expected: str
) -> None:
    name = _name("invalid")
    body = json.loads(_reservation(name, **spec))
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    result = control_plane.run_kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
    assert result.returncode != 0, f"{name} was accepted"
    assert expected in result.stderr, result.stderr


def test_the_chart_lets_koord_manager_do_what_the_reservation_operator_does(
    control_plane: ControlPlane,
) -> None:
    """The chart's ClusterRole, bound to a service account of a throwaway namespace, answers
    ``kubectl auth can-i`` for every call the operator makes."""
    cp = control_plane
    with koord_manager_role(cp, "rsv-rbac") as user:
        calls = [
            ("list", "reservations.scheduling.koordinator.sh", ()),
            ("watch", "reservations.scheduling.koordinator.sh", ()),
            ("delete", "reservations.scheduling.koordinator.sh", ()),
            ("list", "pods", ()),
            ("watch", "pods", ()),
            ("list", "nodes", ()),
            ("watch", "nodes", ()),
            ("create", "events", ()),
            ("update", "reservations.scheduling.koordinator.sh", ("--subresource=status",)),
        ]
        assert_can(cp, user, calls)
        denied = cp.run_kubectl(
            "auth", "can-i", "update", "reservations.scheduling.koordinator.sh", "--as", user
        )
        assert denied.stdout.strip() == "no"  # least privilege: the spec is the user's


def test_the_chart_passes_the_retention_to_koord_manager(control_plane: ControlPlane) -> None:
    def command(*values: str) -> list[str]:
        rendered = control_plane.helm(
            "template",
            "rsv",
            str(repo_root() / "charts" / "koordinator-py"),
            "--show-only",
            "templates/manager-deployment.yaml",
            *values,
        )
        (deployment,) = [doc for doc in yaml.safe_load_all(rendered) if doc]
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["command"])

    assert "--reservation-gc-duration-seconds=86400" in command()  # Koordinator's 24h
    assert "--reservation-gc-duration-seconds=600" in command(
        "--set", "manager.reservation.gcDurationSeconds=600"
    )
