"""koord-manager's NodeMetric per node: created on the node's events, deleted with it, recreated if lost."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import kopf
import pytest
from kubernetes_asyncio import client

from apis.slo.nodemetric import NodeMetric
from operators.handlers import nodemetric
from operators.handlers.nodemetric import NodeMetrics

LOG = logging.getLogger("test")


class FakeNodeMetricClient:
    def __init__(self, failures: int = 0, config_map: dict[str, Any] | None = None) -> None:
        self.objects: dict[str, NodeMetric] = {}
        self.failures = failures
        self.patches: list[str] = []
        self.config_map = config_map
        self.config_reads = 0
        self.config_unreadable = False

    async def slo_config_map(self) -> dict[str, Any] | None:
        self.config_reads += 1
        await asyncio.sleep(0.01)  # a read takes a round trip: other events come meanwhile
        if self.config_unreadable:
            raise client.ApiException(status=503, reason="Service Unavailable")
        return self.config_map

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

    async def patch(self, name: str, patch: dict[str, Any]) -> None:
        if self.failures:
            self.failures -= 1
            raise client.ApiException(status=503, reason="Service Unavailable")
        self.patches.append(name)
        wire = self.objects[name].to_wire()
        wire["spec"] = {**wire.get("spec", {}), **patch["spec"]}
        self.objects[name] = NodeMetric.model_validate(wire)


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


def _node(name: str, labels: dict[str, str] | None = None) -> kopf.Body:
    raw: Any = {"metadata": {"name": name, "uid": f"u-{name}", "labels": labels or {}}}
    return kopf.Body(raw)


def _config_map(config: dict[str, Any] | str) -> kopf.Body:
    text = config if isinstance(config, str) else json.dumps(config)
    raw: Any = {"metadata": {"name": "slo-controller-config"}, "data": {"colocation-config": text}}
    return kopf.Body(raw)


def _report_interval(fake: FakeNodeMetricClient, name: str) -> int | None:
    policy = fake.objects[name].spec.metric_collect_policy  # type: ignore[union-attr]
    return policy.report_interval_seconds if policy else None


async def test_the_collect_policy_follows_slo_controller_config_and_the_nodes_labels() -> None:
    fake = FakeNodeMetricClient()
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="n1", uid="u-n1", logger=LOG, body=_node("n1"))
    await handlers.on_node(type=None, name="n2", uid="u-n2", logger=LOG, body=_node("n2"))
    assert _report_interval(fake, "n1") == 60  # no config read yet: the defaults
    config = {
        "metricReportIntervalSeconds": 30,
        "nodeConfigs": [
            {"nodeSelector": {"matchLabels": {"pool": "slow"}}, "metricReportIntervalSeconds": 120}
        ],
    }
    await handlers.on_config(type="ADDED", body=_config_map(config), logger=LOG)
    assert (_report_interval(fake, "n1"), _report_interval(fake, "n2")) == (30, 30)
    assert fake.patches == ["n1", "n2"]

    # heartbeats and events that change nothing write nothing
    await handlers.on_node(type="MODIFIED", name="n1", uid="u-n1", logger=LOG, body=_node("n1"))
    await handlers.on_node_metric(
        type="MODIFIED", name="n1", logger=LOG, body=kopf.Body(fake.objects["n1"].to_wire())
    )
    assert fake.patches == ["n1", "n2"]

    # a node relabelled into a nodeConfigs entry gets that entry's policy
    await handlers.on_node(
        type="MODIFIED", name="n2", uid="u-n2", logger=LOG, body=_node("n2", {"pool": "slow"})
    )
    assert _report_interval(fake, "n2") == 120

    # a new node is created with the policy in force
    await handlers.on_node(type="ADDED", name="n3", uid="u-n3", logger=LOG, body=_node("n3"))
    assert _report_interval(fake, "n3") == 30
    assert "n3" not in fake.patches


async def test_a_hand_edited_spec_is_written_back() -> None:
    fake = FakeNodeMetricClient()
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await handlers.on_config(type=None, body=_config_map({"metricReportIntervalSeconds": 30}), logger=LOG)
    await handlers.on_node(type=None, name="n1", uid="u-n1", logger=LOG, body=_node("n1"))
    assert _report_interval(fake, "n1") == 30
    edited = fake.objects["n1"].to_wire()
    edited["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] = 600
    fake.objects["n1"] = NodeMetric.model_validate(edited)
    await handlers.on_node_metric(type="MODIFIED", name="n1", logger=LOG, body=kopf.Body(edited))
    assert _report_interval(fake, "n1") == 30


async def test_a_refused_key_keeps_the_last_good_policy(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNodeMetricClient()
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="n1", uid="u-n1", logger=LOG, body=_node("n1"))
    await handlers.on_config(type=None, body=_config_map({"metricReportIntervalSeconds": 30}), logger=LOG)
    with caplog.at_level(logging.WARNING):
        await handlers.on_config(
            type="MODIFIED", body=_config_map({"metricReportIntervalSeconds": -1}), logger=LOG
        )
        await handlers.on_config(type="MODIFIED", body=_config_map("{not json"), logger=LOG)
    assert _report_interval(fake, "n1") == 30
    messages = [r.getMessage() for r in caplog.records]
    assert any("colocation-config" in m and "metricReportIntervalSeconds=-1" in m for m in messages), messages
    # the ConfigMap deleted: Koordinator's defaults again
    await handlers.on_config(type="DELETED", body=_config_map("{}"), logger=LOG)
    assert _report_interval(fake, "n1") == 60


async def test_a_failed_patch_is_retried_on_the_next_event() -> None:
    fake = FakeNodeMetricClient()
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="n1", uid="u-n1", logger=LOG, body=_node("n1"))
    fake.failures = 1
    await handlers.on_config(type=None, body=_config_map({"metricReportIntervalSeconds": 30}), logger=LOG)
    assert _report_interval(fake, "n1") == 60
    await handlers.on_node(type="MODIFIED", name="n1", uid="u-n1", logger=LOG, body=_node("n1"))
    assert _report_interval(fake, "n1") == 30


def _metric(name: str, report_interval: int) -> NodeMetric:
    return NodeMetric.model_validate(
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": name},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": report_interval}},
        }
    )


async def test_a_policy_left_by_a_deleted_config_map_goes_back_to_the_defaults_at_start_up() -> None:
    fake = FakeNodeMetricClient(config_map=None)  # no slo-controller-config in the cluster
    fake.objects["n1"] = _metric("n1", 30)  # written from a ConfigMap deleted while koord-manager was down
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="n1", uid="u-n1", logger=LOG, body=_node("n1"))
    assert _report_interval(fake, "n1") == 60
    await handlers.on_node(type=None, name="n2", uid="u-n2", logger=LOG, body=_node("n2"))
    assert fake.config_reads == 1  # read once, not per node


async def test_a_config_map_there_at_start_up_gives_new_node_metrics_their_policy_at_creation() -> None:
    cm: Any = _config_map({"metricReportIntervalSeconds": 30})
    fake = FakeNodeMetricClient(config_map=dict(cm))
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="n1", uid="u-n1", logger=LOG, body=_node("n1"))
    assert _report_interval(fake, "n1") == 30
    assert fake.patches == []


async def test_an_unreadable_config_map_leaves_existing_policies_until_its_event() -> None:
    fake = FakeNodeMetricClient()
    fake.config_unreadable = True
    fake.objects["n1"] = _metric("n1", 30)
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="n1", uid="u-n1", logger=LOG, body=_node("n1"))
    await handlers.on_node(type=None, name="n2", uid="u-n2", logger=LOG, body=_node("n2"))
    assert (_report_interval(fake, "n1"), _report_interval(fake, "n2")) == (30, 60)
    await handlers.on_config(type=None, body=_config_map({"metricReportIntervalSeconds": 45}), logger=LOG)
    assert (_report_interval(fake, "n1"), _report_interval(fake, "n2")) == (45, 45)


async def test_the_first_events_of_many_nodes_share_one_config_map_read() -> None:
    fake = FakeNodeMetricClient(config_map=None)
    handlers = NodeMetrics(fake)  # type: ignore[arg-type]
    await asyncio.gather(
        *(
            handlers.on_node(type=None, name=f"n{i}", uid=f"u-n{i}", logger=LOG, body=_node(f"n{i}"))
            for i in range(5)
        )
    )
    assert fake.config_reads == 1
    assert sorted(fake.objects) == [f"n{i}" for i in range(5)]
