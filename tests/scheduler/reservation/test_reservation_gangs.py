"""Gangs and reservations: a gang whose members own reservations is placed on the reserved room."""

from __future__ import annotations

from apis.client.backend import NODES, PODGROUPS, PODS, RESERVATIONS
from scheduler.backend.memory import MemoryBackend
from tests.scheduler.reservation.harness import (
    bound,
    node,
    placed,
    pod,
    reservation,
    settle,
    start,
    stop_app,
    until,
)


def pod_group(name: str, min_member: int) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": min_member}}


async def test_an_owner_gang_lands_on_its_reserved_nodes() -> None:
    backend = MemoryBackend()
    for i in range(4):
        backend.apply(NODES, node(f"n{i}", cpu="8"))
    app, stop, task = await start(backend)
    try:
        for name in ("r0", "r1"):
            backend.apply(
                RESERVATIONS,
                reservation(name, cpu="6", owners=[{"labelSelector": {"matchLabels": {"app": "train"}}}]),
            )
        await until(lambda: placed(backend, "r0") is not None and placed(backend, "r1") is not None)
        reserved = {placed(backend, "r0"), placed(backend, "r1")}
        backend.apply(PODGROUPS, pod_group("train", 2))
        labels = {"app": "train", "pod-group.scheduling.sigs.k8s.io": "train"}
        for i in range(2):
            backend.apply(PODS, pod(f"w{i}", cpu="6", labels=labels))
        await until(lambda: {"w0", "w1"} <= set(bound(backend)))
        assert {bound(backend)["w0"], bound(backend)["w1"]} == reserved
        for name in ("w0", "w1"):
            explanation = app.explanations.get("default", name)
            assert explanation is not None
            assert any(note.startswith("allocated from reservation r") for note in explanation.notes), (
                explanation
            )
    finally:
        await stop_app(stop, task)


def gang_reservation(name: str, gang: str, size: int, cpu: str) -> dict[str, object]:
    """A reservation per member of a lightweight gang: the template carries the gang's annotations."""
    body = reservation(name, cpu=cpu, owners=[{"labelSelector": {"matchLabels": {"app": "train"}}}])
    body["spec"]["template"]["metadata"] = {  # type: ignore[index]
        "annotations": {
            "gang.scheduling.koordinator.sh/name": gang,
            "gang.scheduling.koordinator.sh/min-available": str(size),
        }
    }
    return body


async def test_a_gang_of_reservations_is_placed_all_or_nothing() -> None:
    backend = MemoryBackend()
    for i in range(2):
        backend.apply(NODES, node(f"n{i}", cpu="8"))
    app, stop, task = await start(backend)
    try:
        # Three members of 6 CPUs on two 8-CPU nodes: none may be placed.
        for i in range(3):
            backend.apply(RESERVATIONS, gang_reservation(f"hold-{i}", "hold", 3, "6"))
        await settle(0.6)
        assert [placed(backend, f"hold-{i}") for i in range(3)] == [None, None, None]
        # A third node: the whole gang is placed, one member per node.
        backend.apply(NODES, node("n2", cpu="8"))
        await until(lambda: all(placed(backend, f"hold-{i}") for i in range(3)))
        assert {placed(backend, f"hold-{i}") for i in range(3)} == {"n0", "n1", "n2"}
        # The job's pods then land on the held nodes.
        backend.apply(PODGROUPS, pod_group("train", 3))
        labels = {"app": "train", "pod-group.scheduling.sigs.k8s.io": "train"}
        for i in range(3):
            backend.apply(PODS, pod(f"w{i}", cpu="6", labels=labels))
        await until(lambda: {"w0", "w1", "w2"} <= set(bound(backend)))
        explanation = app.explanations.get("default", "w0")
        assert explanation is not None
        assert any(note.startswith("allocated from reservation hold-") for note in explanation.notes)
    finally:
        await stop_app(stop, task)
