"""koord-manager's NodeMetric per node: created on the node's events, deleted with it, recreated if lost."""

from __future__ import annotations

import logging

import pytest
from kubernetes_asyncio import client

from apis.slo.nodemetric import NodeMetric
from operators.handlers import nodemetric
from operators.handlers.nodemetric import NodeMetrics

LOG = logging.getLogger("test")


class FakeNodeMetricClient:
    def __init__(self, failures: int = 0) -> None:
        self.objects: dict[str, NodeMetric] = {}
        self.failures = failures

    async def create(self, metric: NodeMetric) -> bool:
        if self.failures:
            self.failures -= 1
            raise client.ApiException(status=503, reason="Service Unavailable")
        name = metric.metadata.name or ""
        if name in self.objects:
            return False
        self.objects[name] = metric
        return True

    async def delete(self, name: str) -> bool:
        return self.objects.pop(name, None) is not None


async def test_node_events_create_and_delete_the_node_metric() -> None:
    fake = FakeNodeMetricClient()
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="n1", uid="u1", logger=LOG)  # initial listing
    await handlers.on_node(type="ADDED", name="n2", uid="u2", logger=LOG)
    await handlers.on_node(type="MODIFIED", name="n1", uid="u1", logger=LOG)
    assert sorted(fake.objects) == ["n1", "n2"]
    policy = fake.objects["n1"].spec.metric_collect_policy  # type: ignore[union-attr]
    assert policy is not None
    assert policy.report_interval_seconds == 60
    await handlers.on_node(type="DELETED", name="n1", uid="u1", logger=LOG)
    assert sorted(fake.objects) == ["n2"]
    await handlers.on_node_metric(type="DELETED", name="n1", logger=LOG)  # its node is gone: stays gone
    assert sorted(fake.objects) == ["n2"]


async def test_a_node_metric_deleted_while_its_node_exists_comes_back() -> None:
    fake = FakeNodeMetricClient()
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await handlers.on_node(type="ADDED", name="n1", uid="u1", logger=LOG)
    del fake.objects["n1"]
    await handlers.on_node_metric(type="DELETED", name="n1", logger=LOG)
    assert list(fake.objects) == ["n1"]


async def test_an_unavailable_api_server_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodemetric.errors, "RETRY_DELAY_SECONDS", 0.0)
    fake = FakeNodeMetricClient(failures=2)
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await handlers.on_node(type="ADDED", name="n1", uid="u1", logger=LOG)
    assert list(fake.objects) == ["n1"]
    fake.failures = 10  # past the attempts: left for the node's next event
    await handlers.on_node(type="ADDED", name="n2", uid="u2", logger=LOG)
    assert "n2" not in handlers.ensured
    fake.failures = 0
    await handlers.on_node(type="MODIFIED", name="n2", uid="u2", logger=LOG)
    assert sorted(fake.objects) == ["n1", "n2"]
