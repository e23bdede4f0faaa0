"""Reservation allocate policies and ownership on the real API server, case by case as
Koordinator's own e2e tests run them (``test/e2e/scheduling/reservation.go`` and
``deviceshare.go`` in its repository); each test is named after the case it translates.

Every case gets a fake node of its own in a tainted pool (a label names the case), so the cases
leave nothing in each other's way. koordlet (``--simulate-devices``) writes the GPU nodes' Devices
and koord-manager syncs them into their allocatable (``koordinator.sh/gpu`` included), as on a
cluster. What is checked is what Koordinator's e2e checks: which pods bind, which fail to
(``PodScheduled=False``), the ``reservation-allocated`` annotation of each, that an owner's cards
are cards of its reservation no larger than reserved, and the Reservation's
``status.currentOwners`` (koord-manager's).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED
from e2e.cluster.controlplane import ControlPlane
from e2e.devices import Pool
from e2e.devices import reported_devices as reported_devices_of
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, get_object, pods, wait_for

NAMESPACE = "reservation-policies"
POOL = Pool("reservation-policies")
CASE = "koord-e2e/reservation-policy-case"
OWNER = "test-reserve-policy"
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
CORE = "koordinator.sh/gpu-core"
GPU = "koordinator.sh/gpu"

CPU_CASES = ("alloc-once", "alloc-twice", "cpu-restricted", "cpu-aligned")
FAKE_CASES = ("fake-all", "fake-after", "fake-aligned")
FAKE = "koordinator.sh/fake-resource"
GPU_CASES = {
    "gpu-one-owner": 2,
    "gpu-unmatched": 2,
    "gpu-restricted-half": 2,
    "gpu-restricted-two": 4,
    "gpu-aligned-40": 2,
    "gpu-aligned-strangers": 2,
    "gpu-aligned-four": 2,
}


# The fast tier keeps one case per policy (allocateOnce, Restricted and Aligned on cpu, one owner of
# a GPU share, Restricted and Aligned on GPUs); the other translated cases are variations of those
# and run in `make test-full` (about a minute of fake nodes and pods).
FULL = pytest.mark.full


def _node_name(case: str) -> str:
    return f"respol-{case}"


def _node(case: str, resources: dict[str, str]) -> dict[str, Any]:
    node = POOL.node(_node_name(case), {"cpu": "32", "memory": "64Gi", "pods": "110", **resources})
    node["metadata"]["labels"][CASE] = case
    return node


@pytest.fixture(scope="module")
def pool(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    nodes = [_node(case, {}) for case in CPU_CASES]
    nodes += [_node(case, {FAKE: "1000"}) for case in FAKE_CASES]
    nodes += [_node(case, {}) for case in GPU_CASES]
    devices = {
        "reportIntervalSeconds": 5,
        "nodes": [
            {"name": _node_name(case), "gpus": {"count": cards, "model": "NVIDIA L40S", "memory": "80Gi"}}
            for case, cards in GPU_CASES.items()
        ],
    }
    control_plane.create_namespace(NAMESPACE)
    try:
        with reported_devices_of(
            control_plane,
            nodes,
            devices,
            tmp_path_factory.mktemp("reservation-policies"),
            koordlet="koordlet-respol",
            synced={_node_name(case): {GPU: str(100 * cards)} for case, cards in GPU_CASES.items()},
        ):
            yield
    finally:
        control_plane.kubectl(
            "delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--force", check=False
        )
        control_plane.kubectl("delete", "reservations", "-l", CASE, "--ignore-not-found", check=False)
        control_plane.delete_namespace(NAMESPACE)


def _reservation(name: str, case: str, requests: dict[str, str], policy: str | None = None) -> dict[str, Any]:
    """Koordinator's ``simple-reservation.yaml`` with its test's changes: allocateOnce false,
    owners by label, one container ``main`` with ``requests``."""
    spec: dict[str, Any] = {
        "allocateOnce": False,
        "template": {
            "metadata": {"namespace": NAMESPACE},
            "spec": {
                "schedulerName": "koord-scheduler",
                "nodeSelector": {**POOL.selector, CASE: case},
                "tolerations": [POOL.taint],
                "containers": [{"name": "main", "resources": {"requests": requests}}],
            },
        },
        "owners": [{"labelSelector": {"matchLabels": {OWNER: "true"}}}],
        "ttl": "1h",
    }
    if policy is not None:
        spec["allocatePolicy"] = policy
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "labels": {CASE: case}},
        "spec": spec,
    }


def _pod(name: str, case: str, requests: dict[str, str], *, owner: bool = True) -> dict[str, Any]:
    """A pause pod of Koordinator's e2e (requests equal to limits), on the case's node."""
    labels = {OWNER: "true"} if owner else {f"{OWNER}-unmatched": "true"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "schedulerName": "koord-scheduler",
            "nodeSelector": {**POOL.selector, CASE: case},
            "tolerations": [POOL.taint],
            "containers": [
                {"name": "pause", "image": "pause", "resources": {"requests": requests, "limits": requests}}
            ],
        },
    }


def _placed(cp: ControlPlane, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        found = get_object(cp, "reservation", name)
        return found if (found.get("status") or {}).get("phase") == "Available" else None

    return wait_for(check, timeout=60, what=f"reservation {name} Available")


def _by_name(cp: ControlPlane) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in pods(cp, NAMESPACE)}


def _run(cp: ControlPlane, objects: list[dict[str, Any]]) -> None:
    """Create the pods and wait until every one is bound (Koordinator's runPauseRS)."""
    apply(cp, objects)
    names = {o["metadata"]["name"] for o in objects}

    def check() -> bool:
        found = _by_name(cp)
        return all(found.get(n, {}).get("spec", {}).get("nodeName") for n in names)

    wait_for(check, timeout=90, what=f"{sorted(names)} bound")


def _fails(cp: ControlPlane, obj: dict[str, Any]) -> None:
    """Create the pod and wait for ``PodScheduled=False`` (Koordinator's WaitForPodCondition)."""
    apply(cp, [obj])
    name = obj["metadata"]["name"]

    def unschedulable() -> bool:
        pod = _by_name(cp).get(name) or {}
        conditions = (pod.get("status") or {}).get("conditions") or []
        return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)

    wait_for(unschedulable, timeout=60, what=f"{name} PodScheduled=False")
    assert not _by_name(cp)[name]["spec"].get("nodeName")


def _owners(cp: ControlPlane, case: str) -> dict[str, str]:
    """Bound pods of the case -> the reservation their ``reservation-allocated`` names."""
    found: dict[str, str] = {}
    for name, p in _by_name(cp).items():
        raw = (p["metadata"].get("annotations") or {}).get(ALLOCATED)
        if name.startswith(case) and p["spec"].get("nodeName") and raw:
            found[name] = json.loads(raw)["name"]
    return found


def _gpus(annotations: dict[str, str] | None) -> dict[int, int]:
    raw = (annotations or {}).get(ANNOTATION_DEVICE_ALLOCATED)
    assert raw is not None, annotations
    return {e["minor"]: int(e["resources"][CORE]) for e in json.loads(raw)["gpu"]}


def _check_owners(cp: ControlPlane, owners: dict[str, str], *, devices: bool) -> None:
    """Koordinator's checks on the owners: their cards are cards of their reservation, each no
    larger than reserved; the reservation's ``status.currentOwners`` are exactly them."""
    found = _by_name(cp)
    for reservation in set(owners.values()):
        mine = sorted(n for n, r in owners.items() if r == reservation)

        def current(reservation: str = reservation, mine: list[str] = mine) -> bool:
            obj = get_object(cp, "reservation", reservation)
            listed = sorted(o["name"] for o in (obj.get("status") or {}).get("currentOwners") or [])
            return listed == mine

        wait_for(current, timeout=60, what=f"{reservation} currentOwners {mine}")
        if not devices:
            continue
        obj = get_object(cp, "reservation", reservation)
        reserved = _gpus(obj["metadata"].get("annotations"))
        for name in mine:
            for minor, core in _gpus(found[name]["metadata"].get("annotations")).items():
                assert minor in reserved, (name, minor, reserved)
                assert core <= reserved[minor], (name, minor, core, reserved)


@pytest.fixture
def cp(control_plane: ControlPlane, scheduler: Scheduler, pool: None) -> ControlPlane:
    return control_plane


def _reservation_of(cp: ControlPlane, name: str) -> dict[str, Any]:
    found = get_object(cp, "reservation", name)
    return found


def _with_fake(obj: dict[str, Any], amount: str, case: str) -> dict[str, Any]:
    """Pinned to the case's node (``template.spec.nodeName``) with a second container asking for
    ``amount`` of the fake resource, as Koordinator's fake-resource cases build it."""
    spec = obj["spec"]["template"]["spec"]
    spec["nodeName"] = _node_name(case)
    fake = {FAKE: amount}
    spec["containers"].append(
        {"name": "fake-resource-container", "resources": {"requests": fake, "limits": fake}}
    )
    return obj


# ---- reservation.go ------------------------------------------------------------------------


def test_allocate_once_reservation_reserves_cpu_and_memory_for_a_pod(cp: ControlPlane) -> None:
    """ "Create Reservation enables AllocateOnce and reserves CPU and Memory for Pod"."""
    case = "alloc-once"
    obj = _reservation(case, case, {"cpu": "1", "memory": "1Gi"})
    obj["spec"]["allocateOnce"] = True
    apply(cp, [obj])
    _placed(cp, case)
    _run(cp, [_pod(f"{case}-simple-pod-with-reservation", case, {"cpu": "1", "memory": "1Gi"})])
    assert _owners(cp, case) == {f"{case}-simple-pod-with-reservation": case}

    def succeeded() -> dict[str, Any] | None:
        found = _reservation_of(cp, case)
        return found if found["status"].get("phase") == "Succeeded" else None

    status = wait_for(succeeded, timeout=60, what=f"{case} Succeeded")["status"]
    assert status["allocatable"] == {"cpu": "1", "memory": "1Gi"}
    assert status["allocated"] == {"cpu": "1", "memory": "1Gi"}
    assert [o["name"] for o in status["currentOwners"]] == [f"{case}-simple-pod-with-reservation"]


@FULL
def test_allocate_once_false_reservation_reserves_cpu_and_memory_for_two_pods(cp: ControlPlane) -> None:
    """ "Create Reservation disables AllocateOnce and reserves CPU and Memory for tow Pods"."""
    case = "alloc-twice"
    apply(cp, [_reservation(case, case, {"cpu": "2", "memory": "2Gi"})])
    node = _placed(cp, case)["status"]["nodeName"]
    names = [f"{case}-simple-pod-with-reservation-{i}" for i in range(2)]
    _run(cp, [_pod(name, case, {"cpu": "1", "memory": "1Gi"}) for name in names])
    assert {_by_name(cp)[name]["spec"]["nodeName"] for name in names} == {node}
    owners = _owners(cp, case)
    assert owners == dict.fromkeys(names, case)
    _check_owners(cp, owners, devices=False)
    assert _reservation_of(cp, case)["status"]["allocated"] == {"cpu": "2", "memory": "2Gi"}


@FULL
def test_reserve_all_remaining_resources_to_prevent_other_pods_from_being_scheduled(cp: ControlPlane) -> None:
    """ "reserve all remaining resources to prevent other pods from being scheduled"."""
    case = "fake-all"
    apply(cp, [_with_fake(_reservation(case, case, {"cpu": "1", "memory": "1Gi"}), "1000", case)])
    _placed(cp, case)
    _fails(cp, _pod(f"{case}-other", case, {FAKE: "1000"}, owner=False))


@FULL
def test_after_a_pod_uses_a_reservation_the_remaining_resources_can_be_reserved_by_another(
    cp: ControlPlane,
) -> None:
    """ "after a Pod uses a Reservation, the remaining resources of the node can be reserved by
    another reservation"."""
    case = "fake-after"
    apply(cp, [_with_fake(_reservation(case, case, {"cpu": "1", "memory": "1Gi"}), "500", case)])
    _placed(cp, case)
    _run(cp, [_pod(f"{case}-owner", case, {FAKE: "500"})])
    other = _with_fake(
        _reservation(f"{case}-other-reservation", case, {"cpu": "1", "memory": "1Gi"}), "500", case
    )
    other["spec"]["owners"] = [{"labelSelector": {"matchLabels": {"e2e-reserve-resource": "false"}}}]
    apply(cp, [other])
    assert _placed(cp, f"{case}-other-reservation")["status"]["nodeName"] == _node_name(case)
    assert _owners(cp, case) == {f"{case}-owner": case}


def test_restricted_reserves_4c8gi_2_pods_2c2gi_1_pod_3gi_1_pod_fails_with_2gi(cp: ControlPlane) -> None:
    """ "Create reservation with Restricted policy, reserves 4Core8Gi, and create 4 Pods try to
    allocate from reservation, but 2 Pods can allocate 2Core2Gi 1 Pod can allocate 3Gi, 1 Pod
    failed with 2Gi"."""
    case = "cpu-restricted"
    apply(cp, [_reservation(case, case, {"cpu": "4", "memory": "8Gi"}, "Restricted")])
    _placed(cp, case)
    _run(cp, [_pod(f"{case}-rs-{i}", case, {"cpu": "2", "memory": "2Gi"}) for i in range(2)])
    _run(cp, [_pod(f"{case}-third", case, {"memory": "3Gi"})])
    _fails(cp, _pod(f"{case}-fourth", case, {"memory": "2Gi"}))  # 1Gi left, 56Gi free beside it
    owners = _owners(cp, case)
    assert owners == {f"{case}-rs-0": case, f"{case}-rs-1": case, f"{case}-third": case}
    _check_owners(cp, owners, devices=False)


def test_aligned_reserves_4c8gi_2_pods_2c2gi_1_pod_3gi_1_pod_2gi_from_reservation_and_node(
    cp: ControlPlane,
) -> None:
    """ "Create reservation with Aligned policy, reserves 4Core8Gi, and create 4 Pods try to allocate
    from reservation, but 2 Pods allocate 2Core2Gi from reservation 1 Pod allocates 3Gi from
    reservation, 1 Pod allocates 2Gi from reservation and node"."""
    case = "cpu-aligned"
    apply(cp, [_reservation(case, case, {"cpu": "4", "memory": "8Gi"}, "Aligned")])
    _placed(cp, case)
    _run(cp, [_pod(f"{case}-rs-{i}", case, {"cpu": "2", "memory": "2Gi"}) for i in range(2)])
    _run(cp, [_pod(f"{case}-third", case, {"memory": "3Gi"})])
    _run(cp, [_pod(f"{case}-fourth", case, {"memory": "2Gi"})])
    owners = _owners(cp, case)
    assert sorted(owners) == sorted(f"{case}-{n}" for n in ("rs-0", "rs-1", "third", "fourth"))
    _check_owners(cp, owners, devices=False)


@FULL
def test_aligned_small_reservations_fill_up_the_machine_and_a_larger_pod_fails(cp: ControlPlane) -> None:
    """ "Create a batch of small-sized Reservations that use the Aligned policy to fill up the
    machine. Pods that match the Reservation, but whose size is larger than the Reservation,
    expect allocation to fail"."""
    case = "fake-aligned"
    for i in range(5):
        apply(cp, [_reservation(f"{case}-{i}", case, {FAKE: "200"}, "Aligned")])
        _placed(cp, f"{case}-{i}")
    _fails(cp, _pod(f"{case}-larger", case, {FAKE: "300"}))


# ---- deviceshare.go: Reserve GPU -----------------------------------------------------------


def test_reserves_50_percent_of_a_gpu_only_one_pod_of_all_matched_is_using_the_reservation(
    cp: ControlPlane,
) -> None:
    """ "Create Reservation disables AllocateOnce, reserves 50% resource of a GPU instance, only one
    Pod of all matched reservation that is using reservation"."""
    case = "gpu-one-owner"
    apply(cp, [_reservation(case, case, {GPU: "50"})])
    _placed(cp, case)
    _run(cp, [_pod(f"{case}-rs-{i}", case, {GPU: "50"}) for i in range(2 * GPU_CASES[case])])
    owners = _owners(cp, case)
    assert list(owners.values()) == [case], owners
    _check_owners(cp, owners, devices=True)


@FULL
def test_reserves_50_percent_of_a_gpu_one_pod_matched_other_pods_unmatched(cp: ControlPlane) -> None:
    """ "Create Reservation disables AllocateOnce, reserves 50% resource of a GPU instance, and one
    Pod matched reservation, other pods unmatched reservation"."""
    case = "gpu-unmatched"
    apply(cp, [_reservation(case, case, {GPU: "50"})])
    _placed(cp, case)
    _run(cp, [_pod(f"{case}-rs-0", case, {GPU: "50"})])
    others = 2 * GPU_CASES[case] - 1
    _run(cp, [_pod(f"{case}-unmatched-{i}", case, {GPU: "50"}, owner=False) for i in range(others)])
    owners = _owners(cp, case)
    assert owners == {f"{case}-rs-0": case}
    _check_owners(cp, owners, devices=True)


def test_restricted_reserves_50_percent_of_a_gpu_2_pods_matched_only_1_scheduled(cp: ControlPlane) -> None:
    """ "Create Reservation disables AllocateOnce with Restricted Policy, reserves 50% resource of a
    GPU instance, and 2 Pods matched reservation but only 1 Pod scheduled, other 1 Pod failed
    scheduling"."""
    case = "gpu-restricted-half"
    apply(cp, [_reservation(case, case, {GPU: "50"}, "Restricted")])
    reservation = _placed(cp, case)
    _run(cp, [_pod(f"{case}-rs-0", case, {GPU: "50"})])
    _fails(cp, _pod(f"{case}-other", case, {GPU: "50"}))  # 150% free on the node, none of it its
    owners = _owners(cp, case)
    assert owners == {f"{case}-rs-0": case}
    owner = _by_name(cp)[f"{case}-rs-0"]
    assert _gpus(owner["metadata"]["annotations"]) == _gpus(reservation["metadata"]["annotations"])
    _check_owners(cp, owners, devices=True)


@FULL
def test_restricted_reserves_2_gpu_instances_3_pods_with_60_percent_one_fails(cp: ControlPlane) -> None:
    """ "Create Reservation disables AllocateOnce with Restricted Policy, reserves 2 GPU instances,
    and creates 3 Pods with 60% GPU, but one pod failed"."""
    case = "gpu-restricted-two"
    apply(cp, [_reservation(case, case, {GPU: "200"}, "Restricted")])
    _placed(cp, case)
    _run(cp, [_pod(f"{case}-rs-{i}", case, {GPU: "60"}) for i in range(2)])
    _fails(cp, _pod(f"{case}-third", case, {GPU: "60"}))  # 40% left on each reserved card
    owners = _owners(cp, case)
    assert owners == {f"{case}-rs-0": case, f"{case}-rs-1": case}
    _check_owners(cp, owners, devices=True)


@FULL
def test_aligned_reserves_50_percent_of_a_gpu_3_pods_40_percent_2_from_reservation_1_from_node(
    cp: ControlPlane,
) -> None:
    """ "Create Reservation disables AllocateOnce with Aligned Policy, reserves 50% resource of a GPU
    instance, and 3 Pods with 40% matched reservation, 2 Pods can allocate from reservation, 1 Pod
    allocates from node"."""
    case = "gpu-aligned-40"
    apply(cp, [_reservation(case, case, {GPU: "50"}, "Aligned")])
    _placed(cp, case)
    for i in range(3):  # the replica set's pods, one after the other as its controller creates them
        _run(cp, [_pod(f"{case}-rs-{i}", case, {GPU: "40"})])
    owners = _owners(cp, case)
    assert len(owners) == 2, owners
    _check_owners(cp, owners, devices=True)


@FULL
def test_aligned_reserves_50_percent_3_pods_40_percent_from_node_1_owner_allocates_1_fails(
    cp: ControlPlane,
) -> None:
    """ "Create Reservation disables AllocateOnce with Aligned Policy, reserves 50% resource of a GPU
    instance, create 3 Pods to allocate 40% per GPU from node, and 2 Pods with 40% matched
    reservation, 1 Pod can allocate from reservation, the other 1 Pod failed"."""
    case = "gpu-aligned-strangers"
    apply(cp, [_reservation(case, case, {GPU: "50"}, "Aligned")])
    _placed(cp, case)
    _run(cp, [_pod(f"{case}-test-pod-{i}", case, {GPU: "40"}, owner=False) for i in range(3)])
    _run(cp, [_pod(f"{case}-rs-0", case, {GPU: "40"})])
    _fails(cp, _pod(f"{case}-late", case, {GPU: "40"}))
    owners = _owners(cp, case)
    assert owners == {f"{case}-rs-0": case}
    _check_owners(cp, owners, devices=True)


def test_4_aligned_reservations_of_50_percent_5_pods_with_30_percent_4_allocate_1_fails(
    cp: ControlPlane,
) -> None:
    """ "Create 4 Reservations disables AllocateOnce with Aligned Policy, reserves 50% resource of a
    GPU instance, create 5 Pods to allocate 30% per GPU from reservations, and 4 Pods can allocate
    from reservation, and 1 Pod failed"."""
    case = "gpu-aligned-four"
    names = [f"{case}-algned-reservation-{i}" for i in range(4)]
    for name in names:
        apply(cp, [_reservation(name, case, {GPU: "50"}, "Aligned")])
        _placed(cp, name)
    _run(cp, [_pod(f"{case}-rs-{i}", case, {GPU: "30"}) for i in range(4)])
    _fails(cp, _pod(f"{case}-fifth", case, {GPU: "30"}))
    owners = _owners(cp, case)
    assert sorted(owners.values()) == names, owners
    _check_owners(cp, owners, devices=True)
