"""koord-manager's NodeSLO per node: rendered on node and ConfigMap events, written only when the
rendered spec differs, a refused key keeping its last good value with a Warning naming the key."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Mapping
from typing import Any, cast

import kopf
import pytest
from kubernetes_asyncio import client

from apis.slo.nodeslo import NodeSLO
from operators.handlers import errors
from operators.handlers.nodeslo import EVENT_REASON, NodeSLOs

LOG = logging.getLogger("test")


class FakeNodeSLOClient:
    def __init__(self, config_map: dict[str, Any] | None = None) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.config_map_body = config_map
        self.writes = 0
        self.failures = 0
        self.version = 0

    def _fail(self) -> None:
        if self.failures:
            self.failures -= 1
            raise client.ApiException(status=503, reason="Service Unavailable")

    async def get(self, name: str) -> dict[str, Any] | None:
        self._fail()
        found = self.objects.get(name)
        return copy.deepcopy(found) if found is not None else None

    async def create(self, slo: NodeSLO) -> bool:
        self._fail()
        name = slo.metadata.name or ""
        if name in self.objects:
            return False
        self.version += 1
        body = slo.to_wire()
        body["metadata"]["resourceVersion"] = str(self.version)
        self.objects[name] = body
        self.writes += 1
        return True

    async def replace(self, body: dict[str, Any]) -> None:
        self._fail()
        name = body["metadata"]["name"]
        if self.objects[name]["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
            raise client.ApiException(status=409, reason="Conflict")
        self.version += 1
        self.objects[name] = {
            **copy.deepcopy(body),
            "metadata": {**body["metadata"], "resourceVersion": str(self.version)},
        }
        self.writes += 1

    async def delete(self, name: str) -> bool:
        return self.objects.pop(name, None) is not None

    async def slo_config_map(self) -> dict[str, Any] | None:
        return self.config_map_body


def config_map(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system", "uid": "cm"},
        "data": {key: value if isinstance(value, str) else json.dumps(value) for key, value in data.items()},
    }


def as_body(raw: Mapping[str, Any]) -> kopf.Body:
    return kopf.Body(cast(kopf.RawBody, raw))


def node(
    name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> kopf.Body:
    raw = {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": labels or {},
            "annotations": annotations or {},
        }
    }
    return as_body(raw)


def threshold(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
        "nodeStrategies": [
            {
                "name": "pool-a",
                "nodeSelector": {"matchLabels": labels or {"pool": "a"}},
                "cpuSuppressThresholdPercent": 40,
            }
        ],
    }


class Warnings:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str]] = []

    def __call__(self, body: Mapping[str, Any], reason: str, message: str) -> None:
        self.posted.append((body["metadata"]["name"], reason, message))


def suppress(fake: FakeNodeSLOClient, name: str) -> int:
    spec = fake.objects[name]["spec"]["resourceUsedThresholdWithBE"]
    return int(spec["cpuSuppressThresholdPercent"])


@pytest.fixture
def fake() -> FakeNodeSLOClient:
    return FakeNodeSLOClient(config_map({"resource-threshold-config": threshold()}))


async def test_node_events_create_the_node_slo_from_the_config_map(fake: FakeNodeSLOClient) -> None:
    handlers = NodeSLOs(fake, Warnings())  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="a1", body=node("a1", {"pool": "a"}), logger=LOG)
    await handlers.on_node(type="ADDED", name="b1", body=node("b1", {"pool": "b"}), logger=LOG)
    assert (suppress(fake, "a1"), suppress(fake, "b1")) == (40, 60)
    [owner] = fake.objects["a1"]["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", "a1", "uid-a1")
    await handlers.on_node(type="DELETED", name="a1", body=node("a1"), logger=LOG)
    assert list(fake.objects) == ["b1"]


async def test_an_unchanged_rendering_writes_nothing(fake: FakeNodeSLOClient) -> None:
    handlers = NodeSLOs(fake, Warnings())  # type: ignore[arg-type]
    await handlers.on_node(type="ADDED", name="a1", body=node("a1", {"pool": "a"}), logger=LOG)
    writes = fake.writes
    await handlers.on_node(type="MODIFIED", name="a1", body=node("a1", {"pool": "a"}), logger=LOG)
    await handlers.on_config_map(
        type="MODIFIED", body=as_body(config_map({"resource-threshold-config": threshold()})), logger=LOG
    )
    assert fake.writes == writes
    # a label change moves the node to the cluster strategy: one update
    await handlers.on_node(type="MODIFIED", name="a1", body=node("a1", {"pool": "c"}), logger=LOG)
    assert suppress(fake, "a1") == 60
    assert fake.writes == writes + 1


async def test_a_config_map_change_renders_every_node_again(fake: FakeNodeSLOClient) -> None:
    handlers = NodeSLOs(fake, Warnings())  # type: ignore[arg-type]
    for name, pool in (("a1", "a"), ("b1", "b")):
        await handlers.on_node(type="ADDED", name=name, body=node(name, {"pool": pool}), logger=LOG)
    changed = config_map({"resource-threshold-config": threshold({"pool": "b"})})
    await handlers.on_config_map(type="MODIFIED", body=as_body(changed), logger=LOG)
    assert (suppress(fake, "a1"), suppress(fake, "b1")) == (60, 40)
    await handlers.on_config_map(type="DELETED", body=as_body(changed), logger=LOG)
    assert (suppress(fake, "a1"), suppress(fake, "b1")) == (65, 65)  # the defaults


async def test_a_bad_key_keeps_its_last_good_value_and_the_others_apply(fake: FakeNodeSLOClient) -> None:
    warnings = Warnings()
    handlers = NodeSLOs(fake, warnings)  # type: ignore[arg-type]
    await handlers.on_node(type="ADDED", name="a1", body=node("a1", {"pool": "a"}), logger=LOG)
    bad = config_map(
        {
            "resource-threshold-config": '{"clusterStrategy": {"enable": ',
            "cpu-burst-config": {"clusterStrategy": {"policy": "auto"}},
        }
    )
    await handlers.on_config_map(type="MODIFIED", body=as_body(bad), logger=LOG)
    assert suppress(fake, "a1") == 40  # the last good resource-threshold-config
    assert fake.objects["a1"]["spec"]["cpuBurstStrategy"]["policy"] == "auto"
    [(name, reason, message)] = warnings.posted
    assert (name, reason) == ("slo-controller-config", EVENT_REASON)
    assert message.startswith("slo-controller-config resource-threshold-config: malformed JSON")
    # the same refusal again is not reported twice; a fixed key clears it
    await handlers.on_config_map(type="MODIFIED", body=as_body(bad), logger=LOG)
    assert len(warnings.posted) == 1
    await handlers.on_config_map(type="MODIFIED", body=as_body(config_map({})), logger=LOG)
    assert suppress(fake, "a1") == 65


async def test_a_skipped_selector_is_reported_on_the_config_map(fake: FakeNodeSLOClient) -> None:
    warnings = Warnings()
    handlers = NodeSLOs(fake, warnings)  # type: ignore[arg-type]
    broken = {
        "nodeStrategies": [
            {
                "name": "x",
                "nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "In"}]},
                "policy": "auto",
            }
        ]
    }
    await handlers.on_config_map(
        type="ADDED", body=as_body(config_map({"cpu-burst-config": broken})), logger=LOG
    )
    [(_, _, message)] = warnings.posted
    assert message.startswith(
        "cpu-burst-config: nodeStrategies[0] (name 'x'): nodeSelector.matchExpressions[0].values"
    )
    await handlers.on_node(type="ADDED", name="a1", body=node("a1", {"pool": "a"}), logger=LOG)
    assert fake.objects["a1"]["spec"]["cpuBurstStrategy"]["policy"] == "none"


async def test_a_bad_bandwidth_annotation_is_reported_on_the_node(fake: FakeNodeSLOClient) -> None:
    warnings = Warnings()
    handlers = NodeSLOs(fake, warnings)  # type: ignore[arg-type]
    annotated = node("a1", {}, {"node.koordinator.sh/network-bandwidth": "fast"})
    await handlers.on_node(type="ADDED", name="a1", body=annotated, logger=LOG)
    assert fake.objects["a1"]["spec"]["systemStrategy"]["totalNetworkBandwidth"] == "0"
    [(name, reason, message)] = warnings.posted
    assert (name, reason) == ("a1", "InvalidAnnotation")
    assert "node.koordinator.sh/network-bandwidth" in message


async def test_a_node_slo_deleted_or_edited_while_its_node_exists_is_written_again(
    fake: FakeNodeSLOClient,
) -> None:
    handlers = NodeSLOs(fake, Warnings())  # type: ignore[arg-type]
    await handlers.on_node(type="ADDED", name="a1", body=node("a1", {"pool": "a"}), logger=LOG)
    own = fake.objects["a1"]
    await handlers.on_node_slo(type="MODIFIED", name="a1", body=as_body(own), logger=LOG)
    writes = fake.writes
    edited = copy.deepcopy(own)
    edited["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] = 99
    fake.objects["a1"] = edited
    await handlers.on_node_slo(type="MODIFIED", name="a1", body=as_body(edited), logger=LOG)
    assert suppress(fake, "a1") == 40
    assert fake.writes == writes + 1
    del fake.objects["a1"]
    await handlers.on_node_slo(type="DELETED", name="a1", body=as_body(edited), logger=LOG)
    assert suppress(fake, "a1") == 40
    await handlers.on_node_slo(type="DELETED", name="gone", body=as_body(edited), logger=LOG)
    assert list(fake.objects) == ["a1"]


async def test_an_unavailable_api_server_is_retried(
    fake: FakeNodeSLOClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(errors, "RETRY_DELAY_SECONDS", 0.0)
    handlers = NodeSLOs(fake, Warnings())  # type: ignore[arg-type]
    await handlers.on_node(type="ADDED", name="a1", body=node("a1"), logger=LOG)
    fake.failures = 2
    await handlers.on_node(type="ADDED", name="b1", body=node("b1"), logger=LOG)
    fake.failures = 100  # past the attempts: left for the next event
    await handlers.on_node(type="ADDED", name="c1", body=node("c1"), logger=LOG)
    fake.failures = 0
    await handlers.on_node(type="MODIFIED", name="c1", body=node("c1"), logger=LOG)
    assert sorted(fake.objects) == ["a1", "b1", "c1"]


async def test_a_node_seen_before_the_config_map_could_be_read_is_rendered_by_its_event() -> None:
    class Unreadable(FakeNodeSLOClient):
        async def slo_config_map(self) -> dict[str, Any] | None:
            raise client.ApiException(status=503, reason="Service Unavailable")

    fake = Unreadable()
    handlers = NodeSLOs(fake, Warnings())  # type: ignore[arg-type]
    with pytest.raises(kopf.TemporaryError):
        await handlers.on_node(type="ADDED", name="a1", body=node("a1", {"pool": "a"}), logger=LOG)
    assert fake.objects == {}  # nothing is written before the ConfigMap is known
    cm = config_map({"resource-threshold-config": threshold()})
    await handlers.on_config_map(type="ADDED", body=as_body(cm), logger=LOG)
    assert suppress(fake, "a1") == 40


async def test_the_first_events_of_many_nodes_share_one_config_map_read() -> None:
    class Counting(FakeNodeSLOClient):
        reads = 0

        async def slo_config_map(self) -> dict[str, Any] | None:
            Counting.reads += 1
            await asyncio.sleep(0.01)  # a read takes a round trip: other events come meanwhile
            return self.config_map_body

    fake = Counting(config_map({"resource-threshold-config": threshold()}))
    handlers = NodeSLOs(fake, Warnings())  # type: ignore[arg-type]
    names = [f"a{i}" for i in range(5)]
    await asyncio.gather(
        *(handlers.on_node(type="ADDED", name=n, body=node(n, {"pool": "a"}), logger=LOG) for n in names)
    )
    assert Counting.reads == 1
    assert [suppress(fake, n) for n in names] == [40] * 5
