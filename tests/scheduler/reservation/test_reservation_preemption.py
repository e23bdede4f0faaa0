"""ReservationArgs.enablePreemption: a reservation that fits nowhere evicts lower-priority pods."""

from __future__ import annotations

from apis.client.backend import NODES, PODS, RESERVATIONS
from scheduler.backend.memory import MemoryBackend
from tests.scheduler.reservation.harness import (
    BASE_CONFIG,
    node,
    placed,
    pod,
    reservation,
    settle,
    start,
    stop_app,
    until,
)

PREEMPTING = (
    BASE_CONFIG
    + """  pluginConfig:
  - name: Reservation
    args:
      enablePreemption: true
"""
)


def full_node() -> MemoryBackend:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="4"))
    for i in range(4):
        backend.apply(PODS, pod(f"low-{i}", cpu="1", priority=100, node_name="n1"))
    return backend


def names(backend: MemoryBackend) -> set[str]:
    return {p.metadata.name or "" for p in backend.list(PODS)}


async def test_a_reservation_preempts_just_enough_lower_priority_pods_when_enabled() -> None:
    backend = full_node()
    _app, stop, task = await start(backend, PREEMPTING)
    try:
        backend.apply(RESERVATIONS, reservation("urgent", cpu="2"))  # priority: int32 max
        await until(lambda: len(names(backend)) == 2)  # two of the four 1-CPU pods
        await until(lambda: placed(backend, "urgent") == "n1")
    finally:
        await stop_app(stop, task)


async def test_a_reservation_does_not_preempt_by_default() -> None:
    backend = full_node()
    _app, stop, task = await start(backend, BASE_CONFIG)
    try:
        backend.apply(RESERVATIONS, reservation("urgent", cpu="2"))
        await settle(0.6)
        assert placed(backend, "urgent") is None
        assert names(backend) == {f"low-{i}" for i in range(4)}
    finally:
        await stop_app(stop, task)
