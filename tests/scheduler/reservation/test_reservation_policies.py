"""Reservation allocate policies and ownership, as Koordinator's own e2e tests expect
(``test/e2e/scheduling/reservation.go`` and ``deviceshare.go`` in its repository): each test is
named after the case it translates, on the in-memory backend.

- ``Restricted``: what a pod asks of the resources the reservation reserves comes from the
  reservation only; on the reservation's node the pod never falls back to the node's free room.
- Ownership: a pod becomes an owner only while the reservation still holds something it asks for;
  once the first owners have filled it, later pods take the node's free room and are not owners.
- ``Aligned``: one reservation per pod, plus the node's free room; among several, the one the pod
  fits in and fills most (Koordinator's reservation score gives 0 to a resource the pod would
  overflow), so interchangeable reservations get one owner each.
"""

from __future__ import annotations

import json
from typing import Any

from apis.client.backend import DEVICES, NODES, PODS, RESERVATIONS
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED
from apis.extension.reservation import ANNOTATION_RESERVATION_ALLOCATED
from scheduler.backend.memory import MemoryBackend
from tests.scheduler.plugins.device_share_fixtures import device, gpu
from tests.scheduler.reservation.harness import (
    bound,
    get_reservation,
    node,
    placed,
    reservation,
    settle,
    start,
    stop_app,
    until,
)

LABEL = "test-reserve-policy"
OWNERS = [{"labelSelector": {"matchLabels": {LABEL: "true"}}}]


def requesting(
    name: str, requests: dict[str, str], *, owner: bool = True, pin: str | None = None
) -> dict[str, Any]:
    """A pause pod of Koordinator's e2e: ``requests`` only; ``pin``: node affinity to that node
    (its ``pausePodConfig.NodeName``)."""
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "containers": [{"name": "pause", "resources": {"requests": requests, "limits": requests}}],
    }
    if pin is not None:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pin]}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    labels = {LABEL: "true"} if owner else {"unmatched": "true"}
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels}
    return {"metadata": meta, "spec": spec}


def reserving(name: str, requests: dict[str, str], policy: str | None = None) -> dict[str, Any]:
    obj = reservation(name, owners=OWNERS, allocateOnce=False)
    obj["spec"]["template"]["spec"]["containers"] = [{"name": "main", "resources": {"requests": requests}}]
    if policy is not None:
        obj["spec"]["allocatePolicy"] = policy
    return obj


def gpu_node(backend: MemoryBackend, name: str, cards: int) -> None:
    obj = node(name, cpu="32", memory="64Gi")
    obj["status"]["allocatable"].update(
        {
            "koordinator.sh/gpu": str(100 * cards),
            "koordinator.sh/gpu-core": str(100 * cards),
            "koordinator.sh/gpu-memory-ratio": str(100 * cards),
            "koordinator.sh/gpu-memory": f"{80 * cards}Gi",
        }
    )
    backend.apply(NODES, obj)
    backend.apply(DEVICES, device(name, *(gpu(m) for m in range(cards))))


def allocated_from(backend: MemoryBackend) -> dict[str, str]:
    """Bound pod -> the reservation its ``reservation-allocated`` names."""
    found: dict[str, str] = {}
    for p in backend.list(PODS):
        annotations = p.metadata.annotations or {}
        if p.spec.node_name and ANNOTATION_RESERVATION_ALLOCATED in annotations:
            found[p.metadata.name or ""] = json.loads(annotations[ANNOTATION_RESERVATION_ALLOCATED])["name"]
    return found


def gpus_of(annotations: dict[str, str] | None) -> dict[int, int]:
    """Minor -> gpu-core of a ``device-allocated`` annotation."""
    assert annotations is not None
    assert ANNOTATION_DEVICE_ALLOCATED in annotations, annotations
    entries = json.loads(annotations[ANNOTATION_DEVICE_ALLOCATED])["gpu"]
    return {e["minor"]: int(e["resources"]["koordinator.sh/gpu-core"]) for e in entries}


def assert_within_reservation(backend: MemoryBackend, owners: dict[str, str]) -> None:
    """Koordinator's check: every owner's cards are cards of its reservation, each no larger."""
    for name, reservation_name in owners.items():
        p = backend.get(PODS, "default", name)
        assert p is not None
        reserved = gpus_of(get_reservation(backend, reservation_name).metadata.annotations)
        for minor, core in gpus_of(p.metadata.annotations).items():
            assert minor in reserved, (name, minor, reserved)
            assert core <= reserved[minor], (name, minor, core, reserved)


# ---- reservation.go: cpu and memory --------------------------------------------------------


async def test_allocate_once_reservation_reserves_cpu_and_memory_for_a_pod() -> None:
    """ "Create Reservation enables AllocateOnce and reserves CPU and Memory for Pod" (the phase
    Succeeded, status.allocated and currentOwners are koord-manager's: the e2e test checks them)."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="32", memory="64Gi"))
    _app, stop, task = await start(backend)
    try:
        obj = reserving("simple-reservation", {"cpu": "1", "memory": "1Gi"})
        obj["spec"]["allocateOnce"] = True
        backend.apply(RESERVATIONS, obj)
        await until(lambda: placed(backend, "simple-reservation") == "n1")
        backend.apply(PODS, requesting("simple-pod-with-reservation", {"cpu": "1", "memory": "1Gi"}))
        await until(lambda: bound(backend).get("simple-pod-with-reservation") == "n1")
        backend.apply(PODS, requesting("second", {"cpu": "1", "memory": "1Gi"}))
        await until(lambda: "second" in bound(backend))
        assert allocated_from(backend) == {"simple-pod-with-reservation": "simple-reservation"}
    finally:
        await stop_app(stop, task)


async def test_allocate_once_false_reservation_reserves_cpu_and_memory_for_two_pods() -> None:
    """ "Create Reservation disables AllocateOnce and reserves CPU and Memory for tow Pods"."""
    backend = MemoryBackend()
    for name in ("n1", "n2"):
        backend.apply(NODES, node(name, cpu="32", memory="64Gi"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reserving("simple-reservation", {"cpu": "2", "memory": "2Gi"}))
        await until(lambda: placed(backend, "simple-reservation") is not None)
        target = placed(backend, "simple-reservation")
        names = [f"simple-pod-with-reservation-{i}" for i in range(2)]
        for name in names:
            backend.apply(PODS, requesting(name, {"cpu": "1", "memory": "1Gi"}))
        await until(lambda: set(names) <= set(bound(backend)))
        assert {bound(backend)[n] for n in names} == {target}
        assert allocated_from(backend) == dict.fromkeys(names, "simple-reservation")
    finally:
        await stop_app(stop, task)


def fake_node(backend: MemoryBackend, name: str) -> None:
    obj = node(name, cpu="32", memory="64Gi")
    obj["status"]["allocatable"]["koordinator.sh/fake-resource"] = "1000"
    backend.apply(NODES, obj)


def with_fake(obj: dict[str, Any], amount: str, pin: str) -> dict[str, Any]:
    """Koordinator's simple reservation pinned to ``pin`` with a second container asking for
    ``amount`` of the fake resource."""
    spec = obj["spec"]["template"]["spec"]
    spec["nodeName"] = pin
    fake = {"koordinator.sh/fake-resource": amount}
    spec["containers"].append(
        {"name": "fake-resource-container", "resources": {"requests": fake, "limits": fake}}
    )
    return obj


async def test_reserve_all_remaining_resources_to_prevent_other_pods_from_being_scheduled() -> None:
    """ "reserve all remaining resources to prevent other pods from being scheduled"."""
    backend = MemoryBackend()
    fake_node(backend, "n1")
    _app, stop, task = await start(backend)
    try:
        obj = with_fake(reserving("simple-reservation", {"cpu": "1", "memory": "1Gi"}), "1000", "n1")
        backend.apply(RESERVATIONS, obj)
        await until(lambda: placed(backend, "simple-reservation") == "n1")
        backend.apply(
            PODS, requesting("other", {"koordinator.sh/fake-resource": "1000"}, owner=False, pin="n1")
        )
        await settle()
        assert "other" not in bound(backend)
    finally:
        await stop_app(stop, task)


async def test_after_a_pod_uses_a_reservation_the_remaining_resources_can_be_reserved_by_another() -> None:
    """ "after a Pod uses a Reservation, the remaining resources of the node can be reserved by
    another reservation"."""
    backend = MemoryBackend()
    fake_node(backend, "n1")
    _app, stop, task = await start(backend)
    try:
        obj = with_fake(reserving("simple-reservation", {"cpu": "1", "memory": "1Gi"}), "500", "n1")
        backend.apply(RESERVATIONS, obj)
        await until(lambda: placed(backend, "simple-reservation") == "n1")
        backend.apply(PODS, requesting("owner", {"koordinator.sh/fake-resource": "500"}, pin="n1"))
        await until(lambda: "owner" in bound(backend))
        other = with_fake(reserving("e2e-other-reservation", {"cpu": "1", "memory": "1Gi"}), "500", "n1")
        other["spec"]["owners"] = [{"labelSelector": {"matchLabels": {"e2e-reserve-resource": "false"}}}]
        backend.apply(RESERVATIONS, other)
        await until(lambda: placed(backend, "e2e-other-reservation") == "n1")
        assert allocated_from(backend) == {"owner": "simple-reservation"}
    finally:
        await stop_app(stop, task)


async def test_restricted_reserves_4c8gi_2_pods_allocate_2c2gi_1_pod_3gi_1_pod_fails_with_2gi() -> None:
    """ "Create reservation with Restricted policy, reserves 4Core8Gi, and create 4 Pods try to
    allocate from reservation, but 2 Pods can allocate 2Core2Gi 1 Pod can allocate 3Gi, 1 Pod
    failed with 2Gi"."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="32", memory="64Gi"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reserving("r", {"cpu": "4", "memory": "8Gi"}, "Restricted"))
        await until(lambda: placed(backend, "r") == "n1")
        for i in range(2):
            backend.apply(PODS, requesting(f"rs-{i}", {"cpu": "2", "memory": "2Gi"}))
        await until(lambda: {"rs-0", "rs-1"} <= set(bound(backend)))
        backend.apply(PODS, requesting("third", {"memory": "3Gi"}, pin="n1"))
        await until(lambda: "third" in bound(backend))
        backend.apply(PODS, requesting("fourth", {"memory": "2Gi"}, pin="n1"))
        await settle()
        # 1Gi is left in the reservation: the 56Gi the node has free are not the fourth's to take.
        assert "fourth" not in bound(backend)
        assert allocated_from(backend) == {"rs-0": "r", "rs-1": "r", "third": "r"}
    finally:
        await stop_app(stop, task)


async def test_aligned_reserves_4c8gi_2_pods_2c2gi_1_pod_3gi_1_pod_2gi_from_reservation_and_node() -> None:
    """ "Create reservation with Aligned policy, reserves 4Core8Gi, and create 4 Pods try to allocate
    from reservation, but 2 Pods allocate 2Core2Gi from reservation 1 Pod allocates 3Gi from
    reservation, 1 Pod allocates 2Gi from reservation and node"."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="32", memory="64Gi"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reserving("r", {"cpu": "4", "memory": "8Gi"}, "Aligned"))
        await until(lambda: placed(backend, "r") == "n1")
        for i in range(2):
            backend.apply(PODS, requesting(f"rs-{i}", {"cpu": "2", "memory": "2Gi"}))
        await until(lambda: {"rs-0", "rs-1"} <= set(bound(backend)))
        backend.apply(PODS, requesting("third", {"memory": "3Gi"}, pin="n1"))
        await until(lambda: "third" in bound(backend))
        backend.apply(PODS, requesting("fourth", {"memory": "2Gi"}, pin="n1"))
        await until(lambda: "fourth" in bound(backend))
        assert allocated_from(backend) == {"rs-0": "r", "rs-1": "r", "third": "r", "fourth": "r"}
    finally:
        await stop_app(stop, task)


async def test_aligned_small_reservations_fill_up_the_machine_and_a_larger_pod_fails() -> None:
    """ "Create a batch of small-sized Reservations that use the Aligned policy to fill up the
    machine. Pods that match the Reservation, but whose size is larger than the Reservation,
    expect allocation to fail"."""
    backend = MemoryBackend()
    obj = node("n1", cpu="32", memory="64Gi")
    obj["status"]["allocatable"]["koordinator.sh/fake-resource"] = "1000"
    backend.apply(NODES, obj)
    _app, stop, task = await start(backend)
    try:
        for i in range(5):
            backend.apply(
                RESERVATIONS,
                reserving(f"reservation-{i}", {"koordinator.sh/fake-resource": "200"}, "Aligned"),
            )
            await until(lambda i=i: placed(backend, f"reservation-{i}") == "n1")  # type: ignore[misc]
        backend.apply(PODS, requesting("larger", {"koordinator.sh/fake-resource": "300"}, pin="n1"))
        await settle()
        assert "larger" not in bound(backend)
    finally:
        await stop_app(stop, task)


# ---- deviceshare.go: Reserve GPU -----------------------------------------------------------


async def test_reserves_50_percent_of_a_gpu_only_one_pod_of_all_matched_is_using_the_reservation() -> None:
    """ "Create Reservation disables AllocateOnce, reserves 50% resource of a GPU instance, only one
    Pod of all matched reservation that is using reservation"."""
    backend = MemoryBackend()
    gpu_node(backend, "g1", 2)
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reserving("r", {"koordinator.sh/gpu": "50"}))
        await until(lambda: placed(backend, "r") == "g1")
        names = [f"rs-{i}" for i in range(4)]  # the node's 200% in halves
        for name in names:
            backend.apply(PODS, requesting(name, {"koordinator.sh/gpu": "50"}))
        await until(lambda: set(names) <= set(bound(backend)))
        owners = allocated_from(backend)
        assert list(owners.values()) == ["r"], owners
        assert_within_reservation(backend, owners)
    finally:
        await stop_app(stop, task)


async def test_reserves_50_percent_of_a_gpu_one_pod_matched_other_pods_unmatched() -> None:
    """ "Create Reservation disables AllocateOnce, reserves 50% resource of a GPU instance, and one
    Pod matched reservation, other pods unmatched reservation"."""
    backend = MemoryBackend()
    gpu_node(backend, "g1", 2)
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reserving("r", {"koordinator.sh/gpu": "50"}))
        await until(lambda: placed(backend, "r") == "g1")
        backend.apply(PODS, requesting("owner", {"koordinator.sh/gpu": "50"}))
        await until(lambda: "owner" in bound(backend))
        others = [f"unmatched-{i}" for i in range(3)]
        for name in others:
            backend.apply(PODS, requesting(name, {"koordinator.sh/gpu": "50"}, owner=False))
        await until(lambda: set(others) <= set(bound(backend)))
        assert allocated_from(backend) == {"owner": "r"}
        assert_within_reservation(backend, {"owner": "r"})
    finally:
        await stop_app(stop, task)


async def test_restricted_reserves_50_percent_of_a_gpu_2_pods_matched_only_1_scheduled() -> None:
    """ "Create Reservation disables AllocateOnce with Restricted Policy, reserves 50% resource of a
    GPU instance, and 2 Pods matched reservation but only 1 Pod scheduled, other 1 Pod failed
    scheduling"."""
    backend = MemoryBackend()
    gpu_node(backend, "g1", 2)
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reserving("r", {"koordinator.sh/gpu": "50"}, "Restricted"))
        await until(lambda: placed(backend, "r") == "g1")
        backend.apply(PODS, requesting("rs-0", {"koordinator.sh/gpu": "50"}))
        await until(lambda: "rs-0" in bound(backend))
        backend.apply(PODS, requesting("other", {"koordinator.sh/gpu": "50"}, pin="g1"))
        await settle()
        assert "other" not in bound(backend)  # 150% of the node's cards are free, none of them its
        owners = allocated_from(backend)
        assert owners == {"rs-0": "r"}
        p = backend.get(PODS, "default", "rs-0")
        assert p is not None
        assert gpus_of(p.metadata.annotations) == gpus_of(get_reservation(backend, "r").metadata.annotations)
    finally:
        await stop_app(stop, task)


async def test_restricted_reserves_2_gpu_instances_3_pods_with_60_percent_one_fails() -> None:
    """ "Create Reservation disables AllocateOnce with Restricted Policy, reserves 2 GPU instances,
    and creates 3 Pods with 60% GPU, but one pod failed"."""
    backend = MemoryBackend()
    gpu_node(backend, "g1", 4)
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reserving("r", {"koordinator.sh/gpu": "200"}, "Restricted"))
        await until(lambda: placed(backend, "r") == "g1")
        for i in range(2):
            backend.apply(PODS, requesting(f"rs-{i}", {"koordinator.sh/gpu": "60"}))
        await until(lambda: {"rs-0", "rs-1"} <= set(bound(backend)))
        backend.apply(PODS, requesting("third", {"koordinator.sh/gpu": "60"}, pin="g1"))
        await settle()
        # 40% is left on each reserved card and two cards are free: Restricted keeps the third out.
        assert "third" not in bound(backend)
        owners = allocated_from(backend)
        assert owners == {"rs-0": "r", "rs-1": "r"}
        assert_within_reservation(backend, owners)
    finally:
        await stop_app(stop, task)


async def test_aligned_reserves_50_percent_of_a_gpu_3_pods_40_percent_2_from_reservation_1_from_node() -> (
    None
):
    """ "Create Reservation disables AllocateOnce with Aligned Policy, reserves 50% resource of a GPU
    instance, and 3 Pods with 40% matched reservation, 2 Pods can allocate from reservation, 1 Pod
    allocates from node"."""
    backend = MemoryBackend()
    gpu_node(backend, "g1", 2)
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reserving("r", {"koordinator.sh/gpu": "50"}, "Aligned"))
        await until(lambda: placed(backend, "r") == "g1")
        names = [f"rs-{i}" for i in range(3)]
        for name in names:
            backend.apply(PODS, requesting(name, {"koordinator.sh/gpu": "40"}))
            await until(lambda name=name: name in bound(backend))  # type: ignore[misc]
        owners = allocated_from(backend)
        assert owners == {"rs-0": "r", "rs-1": "r"}, owners
        assert_within_reservation(backend, owners)
        status = get_reservation(backend, "r").status
        assert status is not None
    finally:
        await stop_app(stop, task)


async def test_aligned_reserves_50_percent_3_pods_40_percent_from_node_1_owner_allocates_1_fails() -> None:
    """ "Create Reservation disables AllocateOnce with Aligned Policy, reserves 50% resource of a GPU
    instance, create 3 Pods to allocate 40% per GPU from node, and 2 Pods with 40% matched
    reservation, 1 Pod can allocate from reservation, the other 1 Pod failed"."""
    backend = MemoryBackend()
    gpu_node(backend, "g1", 2)
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reserving("r", {"koordinator.sh/gpu": "50"}, "Aligned"))
        await until(lambda: placed(backend, "r") == "g1")
        strangers = [f"test-pod-{i}" for i in range(3)]
        for name in strangers:
            backend.apply(PODS, requesting(name, {"koordinator.sh/gpu": "40"}, owner=False))
        await until(lambda: set(strangers) <= set(bound(backend)))
        backend.apply(PODS, requesting("owner", {"koordinator.sh/gpu": "40"}))
        await until(lambda: "owner" in bound(backend))
        backend.apply(PODS, requesting("late", {"koordinator.sh/gpu": "40"}, pin="g1"))
        await settle()
        assert "late" not in bound(backend)
        owners = allocated_from(backend)
        assert owners == {"owner": "r"}
        assert_within_reservation(backend, owners)
    finally:
        await stop_app(stop, task)


async def test_4_aligned_reservations_of_50_percent_5_pods_with_30_percent_4_allocate_1_fails() -> None:
    """ "Create 4 Reservations disables AllocateOnce with Aligned Policy, reserves 50% resource of a
    GPU instance, create 5 Pods to allocate 30% per GPU from reservations, and 4 Pods can allocate
    from reservation, and 1 Pod failed"."""
    backend = MemoryBackend()
    gpu_node(backend, "g1", 2)
    _app, stop, task = await start(backend)
    try:
        for i in range(4):
            backend.apply(
                RESERVATIONS, reserving(f"algned-reservation-{i}", {"koordinator.sh/gpu": "50"}, "Aligned")
            )
            await until(lambda i=i: placed(backend, f"algned-reservation-{i}") == "g1")  # type: ignore[misc]
        names = [f"rs-{i}" for i in range(4)]
        for name in names:
            backend.apply(PODS, requesting(name, {"koordinator.sh/gpu": "30"}))
        await until(lambda: set(names) <= set(bound(backend)))
        backend.apply(PODS, requesting("fifth", {"koordinator.sh/gpu": "30"}, pin="g1"))
        await settle()
        assert "fifth" not in bound(backend)
        owners = allocated_from(backend)
        assert sorted(owners.values()) == [f"algned-reservation-{i}" for i in range(4)], owners
        assert_within_reservation(backend, owners)
    finally:
        await stop_app(stop, task)


async def test_4_aligned_reservations_of_2_cpus_4_pods_with_1500m_take_one_each() -> None:
    """The case above on cpu, where no card decides: the second pod would overflow the first
    reservation, so it takes the next one instead of topping the first up from the node."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="32", memory="64Gi"))
    _app, stop, task = await start(backend)
    try:
        for i in range(4):
            backend.apply(RESERVATIONS, reserving(f"algned-reservation-{i}", {"cpu": "2"}, "Aligned"))
            await until(lambda i=i: placed(backend, f"algned-reservation-{i}") == "n1")  # type: ignore[misc]
        for i in range(4):
            backend.apply(PODS, requesting(f"rs-{i}", {"cpu": "1500m"}))
            await until(lambda i=i: f"rs-{i}" in bound(backend))  # type: ignore[misc]
        owners = allocated_from(backend)
        assert sorted(owners.values()) == [f"algned-reservation-{i}" for i in range(4)], owners
    finally:
        await stop_app(stop, task)


async def test_restricted_options_on_the_reservation_restrict_only_the_resources_they_list() -> None:
    """``scheduling.koordinator.sh/reservation-restricted-options`` is read on the Reservation (as
    Koordinator's NewReservationInfo does): cpu is restricted, memory is taken from the node too."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="32", memory="64Gi"))
    _app, stop, task = await start(backend)
    try:
        obj = reserving("r", {"cpu": "4", "memory": "4Gi"}, "Restricted")
        options = {"scheduling.koordinator.sh/reservation-restricted-options": '{"resources": ["cpu"]}'}
        obj["metadata"]["annotations"] = options
        backend.apply(RESERVATIONS, obj)
        await until(lambda: placed(backend, "r") == "n1")
        backend.apply(PODS, requesting("more-memory", {"cpu": "2", "memory": "8Gi"}))
        await until(lambda: "more-memory" in bound(backend))
        backend.apply(PODS, requesting("more-cpu", {"cpu": "3", "memory": "1Gi"}, pin="n1"))
        await settle()
        assert "more-cpu" not in bound(backend)
        assert allocated_from(backend) == {"more-memory": "r"}
    finally:
        await stop_app(stop, task)
