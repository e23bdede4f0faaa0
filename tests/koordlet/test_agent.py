"""The agent's report round: the NodeMetric's policy and the node's pods from the watched states, the
status written; a missing NodeMetric is waited for, a write conflict retried next round."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from apis.meta import ObjectMeta
from apis.slo.nodemetric import (
    AggregatePolicy,
    NodeMetric,
    NodeMetricCollectPolicy,
    NodeMetricSpec,
    NodeMetricStatus,
)
from koordlet.agent import Agent
from koordlet.config import KoordletConfig
from koordlet.metrics import KoordletMetrics
from koordlet.states.resources import Kind
from koordlet.states.store import States
from tests.koordlet.fake_host import FakeHost
from tests.koordlet.qos.podfactory import pod

UID = "7712555c-ce62-454a-9e18-9ff0217b8941"
GI = 1 << 30


def _states(metric: NodeMetric | None) -> States:
    """The node's watched states: its NodeMetric, one LS pod on it, one on another node; no Node
    (so no Prod prediction: tests/koordlet/test_prediction.py has it)."""
    states = States()
    states.replace(Kind.NODE_METRIC, [metric] if metric else [])
    states.replace(
        Kind.POD,
        [
            pod("web-0", qos="LS", uid=UID, node="n1", priority=9500, namespace="shop"),
            pod("elsewhere", qos="LS", node="n2"),
        ],
    )
    states.replace(Kind.NODE, [])
    return states


class FakeClient:
    def __init__(self, conflict: bool = False) -> None:
        self.conflict = conflict
        self.written: list[NodeMetricStatus] = []

    async def update_status(self, metric: NodeMetric, status: NodeMetricStatus) -> None:
        if self.conflict:
            raise client.ApiException(status=409, reason="Conflict")
        self.written.append(status)


def _agent(tmp_path: Path) -> Agent:
    host = FakeHost(tmp_path, 2)
    host.add_pod("systemd", UID, 10**9, 2 * GI)
    agent = Agent(KoordletConfig(node_name="n1", host_root=tmp_path, metrics_port=0), KoordletMetrics())
    for now in (100.0, 101.0, 102.0):
        agent.collect_once(now)
    return agent


def _metric() -> NodeMetric:
    policy = NodeMetricCollectPolicy(
        node_aggregate_policy=AggregatePolicy(durations=["1m"]), report_interval_seconds=45
    )
    return NodeMetric(metadata=ObjectMeta(name="n1"), spec=NodeMetricSpec(metric_collect_policy=policy))


async def test_a_round_writes_the_status_on_the_node_metrics_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _agent(tmp_path)
    monkeypatch.setattr("koordlet.agent.time.time", lambda: 102.0)
    fake = FakeClient()
    assert await agent.report_once(fake, _states(_metric())) == 45  # type: ignore[arg-type]
    [status] = fake.written
    wire = status.to_wire()
    assert [w["duration"] for w in wire["nodeMetric"]["aggregatedNodeUsages"]] == ["1m"]
    assert wire["podsMetric"] == [
        {
            "name": "web-0",
            "namespace": "shop",
            "podUsage": {"resources": {"cpu": "0", "memory": "2Gi"}},
            "priority": "koord-prod",
            "qos": "LS",
        }
    ]
    exposition = agent.metrics.exposition().decode()
    assert 'koordlet_node_metric_node_usage{node="n1",resource="memory",unit="byte"}' in exposition


async def test_a_missing_node_metric_is_waited_for_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent = _agent(tmp_path)
    fake = FakeClient()
    states = _states(None)
    with caplog.at_level(logging.WARNING, logger="koordlet"):
        assert await agent.report_once(fake, states) == 60  # type: ignore[arg-type]
        assert await agent.report_once(fake, states) == 60  # type: ignore[arg-type]
    assert fake.written == []
    assert len([r for r in caplog.records if "NodeMetric n1 not found" in r.getMessage()]) == 1


async def test_a_write_conflict_is_left_for_the_next_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _agent(tmp_path)
    monkeypatch.setattr("koordlet.agent.time.time", lambda: 102.0)
    fake = FakeClient(conflict=True)
    assert await agent.report_once(fake, _states(_metric())) == 45  # type: ignore[arg-type]
