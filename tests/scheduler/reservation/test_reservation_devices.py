"""Reservations of GPUs through the whole scheduler on the in-memory backend: a reservation gets
specific cards (``device-allocated`` on the Reservation), other pods never get them, its owners
get them first (Restricted: only them), and a restarted scheduler holds them again."""

from __future__ import annotations

import json
from typing import Any

from apis.client.backend import DEVICES, NODES, PODGROUPS, PODS, RESERVATIONS
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED
from scheduler.backend.memory import MemoryBackend
from tests.scheduler.plugins.device_share_fixtures import device, gpu
from tests.scheduler.reservation.harness import (
    BASE_CONFIG,
    bound,
    get_reservation,
    node,
    placed,
    pod,
    reservation,
    settle,
    start,
    stop_app,
    until,
)

JOB = [{"labelSelector": {"matchLabels": {"app": "job"}}}]
JOB_PREEMPTION = (
    BASE_CONFIG
    + """  pluginConfig:
  - name: Coscheduling
    args:
      enablePreemption: true
"""
)


def gpu_node(backend: MemoryBackend, name: str, cards: int) -> None:
    obj = node(name, cpu="32", memory="64Gi")
    obj["status"]["allocatable"].update(
        {
            "nvidia.com/gpu": str(cards),
            "koordinator.sh/gpu-core": str(100 * cards),
            "koordinator.sh/gpu-memory-ratio": str(100 * cards),
            "koordinator.sh/gpu-memory": f"{80 * cards}Gi",
        }
    )
    backend.apply(NODES, obj)
    backend.apply(DEVICES, device(name, *(gpu(m) for m in range(cards))))


def with_gpus(obj: dict[str, Any], gpus: int) -> dict[str, Any]:
    """A pod (or a reservation's template) that also asks for whole GPUs."""
    spec = obj["spec"]["template"]["spec"] if "template" in obj["spec"] else obj["spec"]
    spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = str(gpus)
    return obj


def minors_of(annotations: dict[str, str] | None) -> list[int]:
    assert annotations is not None
    assert ANNOTATION_DEVICE_ALLOCATED in annotations, annotations
    return [e["minor"] for e in json.loads(annotations[ANNOTATION_DEVICE_ALLOCATED])["gpu"]]


def pod_minors(backend: MemoryBackend, name: str) -> list[int]:
    found = backend.get(PODS, "default", name)
    assert found is not None
    return minors_of(found.metadata.annotations)


def reserved_minors(backend: MemoryBackend, name: str) -> list[int]:
    return minors_of(get_reservation(backend, name).metadata.annotations)


async def test_a_reserved_card_is_kept_from_strangers_and_given_to_the_owner() -> None:
    backend = MemoryBackend()
    gpu_node(backend, "g1", 2)
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, with_gpus(reservation("r1", cpu="1", owners=JOB), 1))
        await until(lambda: placed(backend, "r1") == "g1")
        assert reserved_minors(backend, "r1") == [0]
        backend.apply(PODS, with_gpus(pod("filler"), 1))
        await until(lambda: "filler" in bound(backend))
        assert pod_minors(backend, "filler") == [1]
        # The node's GPUs are otherwise full: a stranger waits, it never gets the reserved card.
        backend.apply(PODS, with_gpus(pod("stranger"), 1))
        await settle()
        assert "stranger" not in bound(backend)
        backend.apply(PODS, with_gpus(pod("owner", labels={"app": "job"}), 1))
        await until(lambda: bound(backend).get("owner") == "g1")
        assert pod_minors(backend, "owner") == [0]
        await settle()
        assert "stranger" not in bound(backend)
    finally:
        await stop_app(stop, task)


async def test_a_restarted_scheduler_holds_the_reserved_cards_again() -> None:
    backend = MemoryBackend()
    gpu_node(backend, "g1", 2)
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, with_gpus(reservation("r1", cpu="1", owners=JOB), 1))
        await until(lambda: placed(backend, "r1") == "g1")
    finally:
        await stop_app(stop, task)
    reserved = reserved_minors(backend, "r1")
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, with_gpus(pod("filler"), 1))
        await until(lambda: "filler" in bound(backend))
        assert pod_minors(backend, "filler") != reserved
        backend.apply(PODS, with_gpus(pod("stranger"), 1))
        await settle()
        assert "stranger" not in bound(backend)
        backend.apply(PODS, with_gpus(pod("owner", labels={"app": "job"}), 1))
        await until(lambda: bound(backend).get("owner") == "g1")
        assert pod_minors(backend, "owner") == reserved
    finally:
        await stop_app(stop, task)


def with_share(obj: dict[str, Any], percent: int) -> dict[str, Any]:
    """A pod (or a reservation's template) that also asks for a share of one GPU."""
    spec = obj["spec"]["template"]["spec"] if "template" in obj["spec"] else obj["spec"]
    spec["containers"][0]["resources"]["requests"].update(
        {"koordinator.sh/gpu-core": str(percent), "koordinator.sh/gpu-memory-ratio": str(percent)}
    )
    return obj


async def test_an_owner_prefers_the_reserved_card_to_the_one_bin_packing_would_pick() -> None:
    backend = MemoryBackend()
    gpu_node(backend, "g1", 2)
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, with_share(pod("first"), 60))
        await until(lambda: "first" in bound(backend))
        assert pod_minors(backend, "first") == [0]
        backend.apply(RESERVATIONS, with_share(reservation("r1", cpu="1", owners=JOB), 50))
        await until(lambda: placed(backend, "r1") == "g1")
        assert reserved_minors(backend, "r1") == [1]  # card 0 has only 40 left
        # Bin-packing alone would put 30 onto card 0 (60 used); the reservation's card comes first.
        backend.apply(PODS, with_share(pod("owner", labels={"app": "job"}), 30))
        await until(lambda: bound(backend).get("owner") == "g1")
        assert pod_minors(backend, "owner") == [1]
        # What the owner left of the reservation (20 on card 1) is still held: a stranger asking
        # 60 finds no card (card 0: 40 free; card 1: 30 owner + 20 reserved, 50 free).
        backend.apply(PODS, with_share(pod("stranger"), 60))
        await settle()
        assert "stranger" not in bound(backend)
        backend.apply(PODS, with_share(pod("stranger-50"), 50))
        await until(lambda: "stranger-50" in bound(backend))
        assert pod_minors(backend, "stranger-50") == [1]
    finally:
        await stop_app(stop, task)


async def test_an_owner_asking_more_than_its_reservation_spills_onto_free_cards() -> None:
    backend = MemoryBackend()
    gpu_node(backend, "g1", 3)
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, with_gpus(pod("first"), 1))
        await until(lambda: "first" in bound(backend))
        backend.apply(RESERVATIONS, with_gpus(reservation("r1", cpu="1", owners=JOB), 1))
        await until(lambda: placed(backend, "r1") == "g1")
        assert reserved_minors(backend, "r1") == [1]
        backend.apply(PODS, with_gpus(pod("owner", labels={"app": "job"}), 2))
        await until(lambda: bound(backend).get("owner") == "g1")
        assert sorted(pod_minors(backend, "owner")) == [1, 2]
    finally:
        await stop_app(stop, task)


async def test_backfill_uses_a_reservations_unused_card_until_the_owner_comes() -> None:
    """A reservation-ignored pod may take the card a reservation holds for owners to come (as it
    takes the reservation's cpu); the owner that arrives evicts it and gets the card."""
    backend = MemoryBackend()
    gpu_node(backend, "g1", 1)
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, with_gpus(reservation("r1", cpu="1", owners=JOB), 1))
        await until(lambda: placed(backend, "r1") == "g1")
        backfill = with_gpus(
            pod("backfill", labels={"scheduling.koordinator.sh/reservation-ignored": "true"}), 1
        )
        backend.apply(PODS, backfill)
        await until(lambda: "backfill" in bound(backend))
        assert pod_minors(backend, "backfill") == [0]
        backend.apply(PODS, with_gpus(pod("owner", labels={"app": "job"}), 1))
        await until(lambda: "owner" in bound(backend))
        assert pod_minors(backend, "owner") == [0]
        assert "backfill" not in bound(backend)
    finally:
        await stop_app(stop, task)


async def test_an_owner_gang_is_planned_onto_the_cards_its_reservations_hold() -> None:
    """Every card of the cluster is held by a reservation of the gang: the gang's planner counts
    those cards as the members' (as the reservations' cpu is), instead of finding no room."""
    backend = MemoryBackend()
    gpu_node(backend, "g1", 1)
    gpu_node(backend, "g2", 1)
    _app, stop, task = await start(backend)
    try:
        for name in ("r1", "r2"):
            backend.apply(RESERVATIONS, with_gpus(reservation(name, cpu="1", owners=JOB), 1))
        await until(lambda: placed(backend, "r1") is not None and placed(backend, "r2") is not None)
        backend.apply(
            PODGROUPS, {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 2}}
        )
        labels = {"app": "job", "pod-group.scheduling.sigs.k8s.io": "job"}
        for i in range(2):
            backend.apply(PODS, with_gpus(pod(f"w{i}", labels=labels), 1))
        await until(lambda: {"w0", "w1"} <= set(bound(backend)))
        assert {bound(backend)["w0"], bound(backend)["w1"]} == {"g1", "g2"}
        assert pod_minors(backend, "w0") == pod_minors(backend, "w1") == [0]
    finally:
        await stop_app(stop, task)


async def test_a_reservation_ignored_pod_preempts_for_the_cards_beside_a_reservations() -> None:
    """Two cards: one a reservation holds for owners to come, one a low-priority pod's. A
    reservation-ignored pod that needs both preempts the low pod: in the what-if of its preemption it
    sees the reserved card as free, as its Filter does."""
    backend = MemoryBackend()
    gpu_node(backend, "g1", 2)
    _app, stop, task = await start(backend, JOB_PREEMPTION)
    try:
        backend.apply(RESERVATIONS, with_gpus(reservation("r1", cpu="1", owners=JOB), 1))
        await until(lambda: placed(backend, "r1") == "g1")
        backend.apply(PODS, with_gpus(pod("low", priority=0), 1))
        await until(lambda: "low" in bound(backend))
        ignored = {"scheduling.koordinator.sh/reservation-ignored": "true"}
        backend.apply(PODS, with_gpus(pod("high", labels=ignored, priority=1000), 2))
        await until(lambda: "high" in bound(backend))
        assert sorted(pod_minors(backend, "high")) == [0, 1]
        assert "low" not in bound(backend)
    finally:
        await stop_app(stop, task)
