"""A reservation charges its ElasticQuota from its creation, and its owner is not charged twice."""

from __future__ import annotations

from typing import Any

from apis.client.backend import ELASTICQUOTAS, NODES, PODS, RESERVATIONS
from scheduler.backend.memory import MemoryBackend
from scheduler.plugins.elastic_quota import ElasticQuota
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


def quota(cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "default", "namespace": "default"},
        "spec": {"min": {"cpu": cpu, "memory": "64Gi"}, "max": {"cpu": cpu, "memory": "64Gi"}},
    }


def used_cpu(plugin: ElasticQuota) -> int:
    return plugin.quota_figures()["default"].used.get("cpu", 0)


async def test_a_reservation_uses_its_quota_and_its_owner_is_not_counted_twice() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="8"))
    backend.apply(ELASTICQUOTAS, quota("4"))
    app, stop, task = await start(backend)
    plugin = app.frameworks["koord-scheduler"].plugin("ElasticQuota")
    assert isinstance(plugin, ElasticQuota)
    try:
        backend.apply(RESERVATIONS, reservation("r1", cpu="3"))
        await until(lambda: placed(backend, "r1") == "n1")
        await until(lambda: used_cpu(plugin) == 3000)

        # The node has room (8 - 3), the quota does not (4 - 3 < 2).
        backend.apply(PODS, pod("stranger", cpu="2"))
        await settle()
        assert "stranger" not in bound(backend)
        explanation = app.explanations.get("default", "stranger")
        assert explanation is not None
        assert "quota default cpu used 3 + request 2 > runtime 4" in explanation.message

        # The owner's 3 CPUs are already charged by its reservation: admitted, and used stays 3.
        backend.apply(PODS, pod("owner", cpu="3", labels={"app": "r1"}))
        await until(lambda: bound(backend).get("owner") == "n1")
        await settle(0.2)
        assert used_cpu(plugin) == 3000

        # The reservation gone, the owner alone is charged.
        backend.delete(RESERVATIONS, None, "r1")
        await settle(0.2)
        assert used_cpu(plugin) == 3000
        assert "stranger" not in bound(backend)
    finally:
        await stop_app(stop, task)


async def test_a_pending_reservation_asks_its_quota_and_is_refused_beyond_it() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="8"))
    backend.apply(ELASTICQUOTAS, quota("2"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("too-big", cpu="3"))
        await settle()
        assert placed(backend, "too-big") is None
        status = backend.get(RESERVATIONS, None, "too-big")
        assert status is not None
        assert status.status is not None
        message = next(c.message for c in status.status.conditions or () if c.type == "Scheduled")
        assert message is not None
        assert "quota default cpu used 0 + request 3 > runtime 2" in message, message
    finally:
        await stop_app(stop, task)
