"""Gangs and reservations: a gang whose members own reservations is placed on the reserved room."""

from __future__ import annotations

from scheduler.backend.base import NODES, PODGROUPS, PODS, RESERVATIONS
from scheduler.backend.memory import MemoryBackend
from tests.scheduler.reservation.harness import bound, node, placed, pod, reservation, start, stop_app, until


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
