"""Gangs on the real API server: no member is bound before minMember members have a place."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster.controlplane import ControlPlane
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, bound, make_pod, pods, wait_for

SMALL = {"gang-test": "small"}
SMALL_NODES = ("cpu-22", "cpu-23")


def pod_group(name: str, namespace: str, min_member: int, **extra: Any) -> dict[str, Any]:
    annotations = extra.pop("annotations", {})
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"minMember": min_member, **extra},
    }


def member(name: str, namespace: str, group: str, **kwargs: Any) -> dict[str, Any]:
    labels = {"pod-group.scheduling.sigs.k8s.io": group}
    return make_pod(name, namespace, labels=labels, **kwargs)


def bound_count(cp: ControlPlane, namespace: str, count: int) -> dict[str, str] | None:
    """The bound pods once there are ``count`` of them (for wait_for)."""
    placed = bound(cp, namespace)
    return placed if len(placed) == count else None


@pytest.fixture(scope="module")
def small_nodes(control_plane: ControlPlane) -> Iterator[None]:
    """Two 16-CPU nodes labelled gang-test=small: room for two 12-CPU members, not three."""
    for node in SMALL_NODES:
        control_plane.kubectl("label", "node", node, "gang-test=small", "--overwrite")
    yield
    for node in SMALL_NODES:
        control_plane.kubectl("label", "node", node, "gang-test-")


def test_gang_waits_for_its_fourth_member(control_plane: ControlPlane, scheduler: Scheduler) -> None:
    ns = "gang-wait"
    control_plane.create_namespace(ns)
    apply(control_plane, [pod_group("train", ns, 4)])
    apply(control_plane, [member(f"w{i}", ns, "train", cpu="1", memory="1Gi") for i in range(3)])
    # The scheduler has seen each member and holds it back (not a sleep that hopes it has).
    scheduler.wait_explained(ns, [f"w{i}" for i in range(3)])
    assert bound(control_plane, ns) == {}
    apply(control_plane, [member("w3", ns, "train", cpu="1", memory="1Gi")])
    placed: dict[str, str] = wait_for(
        lambda: bound_count(control_plane, ns, 4), timeout=60, what="4 members bound"
    )
    assert sorted(placed) == ["w0", "w1", "w2", "w3"]
    annotations = next(p for p in pods(control_plane, ns) if p["metadata"]["name"] == "w0")["metadata"][
        "annotations"
    ]
    assert annotations["internal.scheduling.koordinator.sh/bind-gang-group-id"] == f"{ns}/train"
    assert annotations["internal.scheduling.koordinator.sh/bind-gang-member-count"] == "4"


def test_oversubscribed_gang_says_min_member_on_every_member(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    """Three pods for minMember 2: every member, the one bound after the gang was satisfied too,
    carries bind-gang-member-count 2 (Koordinator's oversubscribed gang)."""
    ns = "gang-over"
    control_plane.create_namespace(ns)
    apply(control_plane, [pod_group("over", ns, 2)])
    apply(control_plane, [member(f"o{i}", ns, "over", cpu="1", memory="1Gi") for i in range(3)])
    wait_for(lambda: bound_count(control_plane, ns, 3), timeout=60, what="3 members bound")
    counts = {
        p["metadata"]["name"]: (
            p["metadata"]["annotations"].get("internal.scheduling.koordinator.sh/bind-gang-member-count"),
            p["metadata"]["annotations"].get("scheduling.koordinator.sh/bind-gang-member-count"),
        )
        for p in pods(control_plane, ns)
    }
    assert counts == {f"o{i}": ("2", "2") for i in range(3)}


def test_gang_group_of_master_and_workers_is_bound_together(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    ns = "gang-group"
    control_plane.create_namespace(ns)
    groups = json.dumps([f"{ns}/master", f"{ns}/worker"])
    group_annotation = {"gang.scheduling.koordinator.sh/groups": groups}
    apply(control_plane, [pod_group("master", ns, 1, annotations=group_annotation)])
    apply(control_plane, [member("master-0", ns, "master", cpu="1", memory="1Gi")])
    scheduler.wait_explained(ns, ["master-0"])
    assert bound(control_plane, ns) == {}, "the master must wait for the workers of its gang group"
    apply(control_plane, [pod_group("worker", ns, 2, annotations=group_annotation)])
    apply(control_plane, [member(f"worker-{i}", ns, "worker", cpu="1", memory="1Gi") for i in range(2)])
    placed: dict[str, str] = wait_for(lambda: bound_count(control_plane, ns, 3), timeout=60, what="3 bound")
    assert sorted(placed) == ["master-0", "worker-0", "worker-1"]


@pytest.mark.parametrize("mode", ["Strict", "NonStrict"])
def test_gang_that_cannot_fit_reserves_nothing(
    control_plane: ControlPlane, scheduler: Scheduler, small_nodes: None, mode: str
) -> None:
    """The group is placed as a whole: when 3 members do not fit, none is assumed or bound, in
    either mode (Koordinator's member-by-member plan would hold two nodes while it waits)."""
    ns = f"gang-{mode.lower()}"
    control_plane.create_namespace(ns)
    apply(control_plane, [pod_group("job", ns, 3, annotations={"gang.scheduling.koordinator.sh/mode": mode})])
    apply(
        control_plane,
        [member(f"m{i}", ns, "job", cpu="12", memory="1Gi", node_selector=SMALL) for i in range(3)],
    )

    # Every member's cycle ended unschedulable: nothing of the gang is reserved or binding.
    scheduler.wait_explained(ns, ["m0", "m1", "m2"], results=("unschedulable",))
    assert bound(control_plane, ns) == {}, "never a partial gang"

    # The first failure may name the first member alone ("no node ... has room for one"); once the
    # gang is tried as a whole the reason names what the nodes hold.
    def holds() -> dict[str, Any] | None:
        explained = scheduler.explanation(ns, "m0")
        return explained if explained and "hold 2" in explained["message"] else None

    reason = wait_for(holds, timeout=60, what="m0 explained with what the nodes hold")
    assert bound(control_plane, ns) == {}, "never a partial gang"
    assert f"gang {ns}/job needs 3 members" in reason["message"]
    assert "hold 2" in reason["message"]
    control_plane.kubectl("delete", "namespace", ns, "--wait=false")
