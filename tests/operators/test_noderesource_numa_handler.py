"""koord-manager's node resource handler writing NUMA-level batch resources into the node's
NodeResourceTopology: on NRT events, alongside koordlet's writes (resourceVersion, conflicts).

The node (builders): 16 cores / 100Gi, allocatable 15 / 98Gi; systemUsage 500m / 1Gi; two zones of
8 cores / 50Gi; one prod pod bound to NUMA node 0 requests 4 / 10Gi and uses 2 / 6Gi. Per zone,
max(system, reserved) = 500m / 1Gi and the margin 3200m / 17.5Gi:
node-0 8000 - 3200 - 500 - 2000 = 2300, 50 - 17.5 - 1 - 6 = 25.5Gi; node-1 4300, 31.5Gi.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import kopf
import pytest

from apis.core import Pod
from operators.handlers.noderesource import INVALID_POD_REASON, NodeResourceController
from tests.operators.logic.noderesource.builders import NOW, metric, node, numa_pinned, pod, topology
from tests.operators.pod_index import PodIndex

LOG: Any = logging.getLogger("test")
CM = {"metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"}}
ZONES = {"node-0": ("8", "50Gi"), "node-1": ("8", "50Gi")}
BATCH = ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory")


class FakeClient:
    """Pods, node status patches and one NRT with resourceVersions, as the API server keeps them."""

    def __init__(self, pods: list[Pod], nrt: dict[str, Any]) -> None:
        self.pods = PodIndex(pods)
        self.nrt = nrt
        self.puts: list[dict[str, Any]] = []
        self.before_put: list[dict[str, Any]] = []
        """Writes that land (koordlet's) just before ours, one per PUT."""

    async def patch_node_status(self, name: str, patch: dict[str, Any]) -> None:
        pass

    def store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.nrt = copy.deepcopy(body)
        self.nrt["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(self.nrt)

    async def get_topology(self, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.nrt)

    async def replace_topology(self, body: dict[str, Any]) -> dict[str, Any] | None:
        self.puts.append(copy.deepcopy(body))
        if self.before_put:
            self.store(self.before_put.pop(0))
        if body["metadata"]["resourceVersion"] != self.nrt["metadata"]["resourceVersion"]:
            return None
        return self.store(body)


class Clock:
    def __init__(self) -> None:
        self.now = NOW.timestamp()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str, str]]:
    posted: list[tuple[Any, str, str]] = []
    monkeypatch.setattr(kopf, "warn", lambda body, *, reason, message: posted.append((body, reason, message)))
    return posted


def _nrt(extra: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    return topology(ZONES, extra=extra).to_wire()


def _zone_batch(nrt: dict[str, Any]) -> dict[str, dict[str, tuple[str, str, str]]]:
    return {
        zone["name"]: {
            r["name"]: (r["capacity"], r["allocatable"], r["available"])
            for r in zone.get("resources") or ()
            if r["name"] in BATCH
        }
        for zone in nrt["zones"]
    }


def _names(nrt: dict[str, Any]) -> dict[str, list[str]]:
    return {zone["name"]: [r["name"] for r in zone.get("resources") or ()] for zone in nrt["zones"]}


EXPECTED = {
    "node-0": {
        "kubernetes.io/batch-cpu": ("2300", "2300", "2300"),
        "kubernetes.io/batch-memory": ("26112Mi",) * 3,  # 25.5Gi
    },
    "node-1": {
        "kubernetes.io/batch-cpu": ("4300", "4300", "4300"),
        "kubernetes.io/batch-memory": ("32256Mi",) * 3,  # 31.5Gi
    },
}


async def _controller(
    pods: list[Pod] | None = None, nrt: dict[str, Any] | None = None
) -> tuple[NodeResourceController, FakeClient]:
    if pods is None:
        pods = [pod("web", "4", "10Gi", priority_class="koord-prod", annotations=numa_pinned(0))]
    client = FakeClient(pods, nrt or _nrt({"node-0": {"hugepages-2Mi": "1Gi"}}))
    controller = NodeResourceController(client, clock=Clock())
    enabled = {**CM, "data": {"colocation-config": '{"enable": true}'}}
    await controller.on_config("ADDED", enabled, LOG, client.pods)  # type: ignore[arg-type]
    await controller.on_node("ADDED", "n1", node().to_wire(), LOG, client.pods)  # type: ignore[arg-type]
    usage = metric(pods={"web": ("2", "6Gi", "koord-prod")})
    await controller.on_node_metric("ADDED", "n1", usage.to_wire(), LOG, client.pods)  # type: ignore[arg-type]
    return controller, client


async def test_an_nrt_event_writes_each_zones_batch_resources_and_keeps_koordlets(
    warnings: list[tuple[Any, str, str]],
) -> None:
    controller, client = await _controller()
    assert client.puts == []  # no NRT seen yet
    await controller.on_topology("ADDED", "n1", client.nrt, LOG, client.pods)  # type: ignore[arg-type]
    assert len(client.puts) == 1
    assert client.puts[0]["metadata"]["resourceVersion"] == "1"
    assert _zone_batch(client.nrt) == EXPECTED
    assert _names(client.nrt)["node-0"] == [
        "cpu",
        "hugepages-2Mi",
        "kubernetes.io/batch-cpu",
        "kubernetes.io/batch-memory",
        "memory",
    ]
    assert client.nrt["topologyPolicies"] == ["None"]
    assert warnings == []


async def test_a_conflict_with_koordlet_rereads_and_retries() -> None:
    controller, client = await _controller()
    koordlet = _nrt({"node-0": {"hugepages-2Mi": "2Gi"}, "node-1": {"hugepages-2Mi": "2Gi"}})
    koordlet["metadata"]["resourceVersion"] = "1"
    client.before_put.append(koordlet)
    await controller.on_topology("ADDED", "n1", client.nrt, LOG, client.pods)  # type: ignore[arg-type]
    assert [p["metadata"]["resourceVersion"] for p in client.puts] == ["1", "2"]
    assert _zone_batch(client.nrt) == EXPECTED
    hugepages = {
        zone["name"]: [r["capacity"] for r in zone["resources"] if r["name"] == "hugepages-2Mi"]
        for zone in client.nrt["zones"]
    }
    assert hugepages == {"node-0": ["2Gi"], "node-1": ["2Gi"]}  # koordlet's write is not lost


async def test_zones_follow_koordlets_cpu_and_memory_but_not_their_own_writes() -> None:
    controller, client = await _controller()
    await controller.on_topology("ADDED", "n1", client.nrt, LOG, client.pods)  # type: ignore[arg-type]
    listed = client.pods.reads
    await controller.on_topology("MODIFIED", "n1", client.nrt, LOG, client.pods)  # type: ignore[arg-type]
    assert client.pods.reads == listed  # our own write: nothing recomputed
    grown = copy.deepcopy(client.nrt)
    for zone in grown["zones"]:
        for r in zone["resources"]:
            if r["name"] == "cpu":
                r.update(capacity="10", allocatable="10", available="10")
    client.nrt = grown
    await controller.on_topology("MODIFIED", "n1", grown, LOG, client.pods)  # type: ignore[arg-type]
    assert client.pods.reads == listed + 1
    # 10-core zones, margin 4000: 10000 - 4000 - 500 - 2000 on node-0 (more than 10 % above 2300)
    assert _zone_batch(client.nrt)["node-0"]["kubernetes.io/batch-cpu"] == ("3500", "3500", "3500")
    assert _zone_batch(client.nrt)["node-1"]["kubernetes.io/batch-cpu"] == ("5500", "5500", "5500")


async def test_disabling_colocation_removes_them_from_every_zone() -> None:
    controller, client = await _controller()
    await controller.on_topology("ADDED", "n1", client.nrt, LOG, client.pods)  # type: ignore[arg-type]
    await controller.on_topology("MODIFIED", "n1", client.nrt, LOG, client.pods)  # type: ignore[arg-type]
    disabled = {**CM, "data": {"colocation-config": '{"enable": false}'}}
    await controller.on_config("MODIFIED", disabled, LOG, client.pods)  # type: ignore[arg-type]
    assert _zone_batch(client.nrt) == {"node-0": {}, "node-1": {}}
    assert _names(client.nrt)["node-0"] == ["cpu", "hugepages-2Mi", "memory"]


async def test_an_nrt_without_cpu_or_memory_is_left_alone() -> None:
    bare = _nrt()
    for zone in bare["zones"]:
        zone["resources"] = [r for r in zone["resources"] if r["name"] not in ("cpu", "memory")] or None
    controller, client = await _controller(nrt=bare)
    await controller.on_topology("ADDED", "n1", client.nrt, LOG, client.pods)  # type: ignore[arg-type]
    assert client.puts == []


async def test_a_malformed_resource_status_is_reported_once_on_the_pod(
    warnings: list[tuple[Any, str, str]],
) -> None:
    bad = pod("web", "4", "10Gi", priority_class="koord-prod")
    bad.metadata.annotations = {"scheduling.koordinator.sh/resource-status": '{"numaNodeResources": 0}'}
    controller, client = await _controller(pods=[bad])
    await controller.on_topology("ADDED", "n1", client.nrt, LOG, client.pods)  # type: ignore[arg-type]
    reported = metric(pods={"web": ("2", "6Gi", "koord-prod")}, age_minutes=0.5).to_wire()
    await controller.on_node_metric("MODIFIED", "n1", reported, LOG, client.pods)  # type: ignore[arg-type]
    assert len(warnings) == 1
    body, reason, message = warnings[0]
    assert reason == INVALID_POD_REASON
    assert body["kind"] == "Pod"
    assert body["metadata"]["name"] == "web"
    assert "scheduling.koordinator.sh/resource-status" in message
    # counted on both zones: 1000m / 3Gi used on each
    assert _zone_batch(client.nrt)["node-0"]["kubernetes.io/batch-cpu"][0] == "3300"
    assert _zone_batch(client.nrt)["node-1"]["kubernetes.io/batch-cpu"][0] == "3300"
