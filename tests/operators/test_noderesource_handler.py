"""koord-manager's node resource handler on watch events: config, nodes, NodeMetrics, damping."""

from __future__ import annotations

import logging
from typing import Any

import kopf
import pytest

from apis.core import Pod
from operators.handlers.noderesource import INVALID_CONFIG_REASON, NodeResourceController, pods_by_node
from tests.operators.logic.noderesource.builders import NOW, metric, node, pod
from tests.operators.pod_index import PodIndex

LOG: Any = logging.getLogger("test")
CM = {"metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"}}


class FakeClient:
    def __init__(self, pods: list[Pod]) -> None:
        self.pods = PodIndex(pods)
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def patch_node_status(self, name: str, patch: dict[str, Any]) -> None:
        self.patches.append((name, patch))


class Clock:
    def __init__(self) -> None:
        self.now = NOW.timestamp()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    posted: list[tuple[str, str]] = []
    monkeypatch.setattr(kopf, "warn", lambda body, *, reason, message: posted.append((reason, message)))
    return posted


def _config(text: str) -> dict[str, Any]:
    return {**CM, "data": {"colocation-config": text}}


async def _setup(clock: Clock, pods: list[Pod]) -> tuple[NodeResourceController, FakeClient]:
    client = FakeClient(pods)
    controller = NodeResourceController(client, clock=clock)
    await controller.on_node("ADDED", "n1", node().to_wire(), LOG, client.pods)  # type: ignore[arg-type]
    await controller.on_node_metric("ADDED", "n1", metric(pods={}).to_wire(), LOG, client.pods)  # type: ignore[arg-type]
    return controller, client


async def test_nothing_is_written_before_a_config_and_a_good_one_writes(
    warnings: list[tuple[str, str]],
) -> None:
    controller, client = await _setup(Clock(), [pod("a", "4", "10Gi")])
    assert client.patches == []
    await controller.on_config("ADDED", _config('{"enable": true}'), LOG, client.pods)  # type: ignore[arg-type]
    values = {
        "kubernetes.io/batch-cpu": "4600",
        "kubernetes.io/batch-memory": "53Gi",
        "kubernetes.io/mid-cpu": "0",
        "kubernetes.io/mid-memory": "0",
    }
    assert client.patches == [("n1", {"status": {"capacity": values, "allocatable": values}})]
    assert warnings == []


async def test_a_bad_key_at_start_leaves_nodes_alone_and_warns(warnings: list[tuple[str, str]]) -> None:
    controller, client = await _setup(Clock(), [])
    await controller.on_config("ADDED", _config('{"enable": "yes"}'), LOG, client.pods)  # type: ignore[arg-type]
    assert client.patches == []
    assert warnings[0][0] == INVALID_CONFIG_REASON
    assert warnings[0][1].startswith("colocation-config: enable")


async def test_a_bad_key_later_keeps_the_last_good_config(warnings: list[tuple[str, str]]) -> None:
    clock = Clock()
    controller, client = await _setup(clock, [])
    await controller.on_config("ADDED", _config('{"enable": true}'), LOG, client.pods)  # type: ignore[arg-type]
    written = len(client.patches)
    bad = _config('{"enable": false, "degradeTimeMinutes": -1}')
    await controller.on_config("MODIFIED", bad, LOG, client.pods)  # type: ignore[arg-type]
    assert len(client.patches) == written
    assert "degradeTimeMinutes" in warnings[-1][1]
    assert controller.config.value is not None
    assert controller.config.value.cluster.enable is True


async def test_disabling_removes_the_resources(warnings: list[tuple[str, str]]) -> None:
    controller, client = await _setup(Clock(), [])
    await controller.on_config("ADDED", _config('{"enable": true}'), LOG, client.pods)  # type: ignore[arg-type]
    await controller.on_node("MODIFIED", "n1", _node_with_resources(), LOG, client.pods)  # type: ignore[arg-type]
    await controller.on_config("MODIFIED", _config('{"enable": false}'), LOG, client.pods)  # type: ignore[arg-type]
    removed = dict.fromkeys(
        [
            "kubernetes.io/batch-cpu",
            "kubernetes.io/batch-memory",
            "kubernetes.io/mid-cpu",
            "kubernetes.io/mid-memory",
        ]
    )
    assert client.patches[-1] == ("n1", {"status": {"capacity": removed, "allocatable": removed}})


def _node_with_resources(batch_cpu: str = "8600", batch_memory: str = "63Gi") -> dict[str, Any]:
    extra = {
        "kubernetes.io/batch-cpu": batch_cpu,
        "kubernetes.io/batch-memory": batch_memory,
        "kubernetes.io/mid-cpu": "0",
        "kubernetes.io/mid-memory": "0",
    }
    return node(extra=extra).to_wire()


async def test_small_changes_wait_for_the_update_interval(warnings: list[tuple[str, str]]) -> None:
    clock = Clock()
    pods = [pod("a", "500m", "1Gi")]  # batch 8100 / 62Gi: within 10 % of the node's 8600 / 63Gi
    controller, client = await _setup(clock, [])
    await controller.on_config("ADDED", _config('{"enable": true}'), LOG, client.pods)  # type: ignore[arg-type]
    await controller.on_node("MODIFIED", "n1", _node_with_resources(), LOG, client.pods)  # type: ignore[arg-type]
    written = len(client.patches)
    client.pods.pods = pods
    clock.now += 100
    reported = metric(pods={}, age_minutes=0.5).to_wire()
    await controller.on_node_metric("MODIFIED", "n1", reported, LOG, client.pods)  # type: ignore[arg-type]
    assert len(client.patches) == written
    clock.now += 201  # 301 s after the last write
    reported = metric(pods={}, age_minutes=0.2).to_wire()
    await controller.on_node_metric("MODIFIED", "n1", reported, LOG, client.pods)  # type: ignore[arg-type]
    assert client.patches[-1][1]["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "8100"


async def test_a_malformed_node_annotation_is_reported_once(warnings: list[tuple[str, str]]) -> None:
    controller, client = await _setup(Clock(), [])
    await controller.on_config("ADDED", _config('{"enable": true}'), LOG, client.pods)  # type: ignore[arg-type]
    bad = node(annotations={"node.koordinator.sh/colocation-strategy": "{oops"}).to_wire()
    await controller.on_node("MODIFIED", "n1", bad, LOG, client.pods)  # type: ignore[arg-type]
    reported = metric(pods={}, age_minutes=0.5).to_wire()
    await controller.on_node_metric("MODIFIED", "n1", reported, LOG, client.pods)  # type: ignore[arg-type]
    assert len(warnings) == 1
    assert "node.koordinator.sh/colocation-strategy" in warnings[0][1]


async def test_node_configs_cannot_enable_a_disabled_cluster(warnings: list[tuple[str, str]]) -> None:
    controller, client = await _setup(Clock(), [])
    text = '{"enable": false, "nodeConfigs": [{"nodeSelector": {"matchLabels": {}}, "enable": true}]}'
    await controller.on_config("ADDED", _config(text), LOG, client.pods)  # type: ignore[arg-type]
    assert client.patches == []


async def test_pods_come_from_the_index_and_a_burst_of_pod_events_reconciles_once(
    warnings: list[tuple[str, str]],
) -> None:
    client = FakeClient([])
    controller = NodeResourceController(client, clock=Clock(), debounce_seconds=0)
    reconciles: list[str] = []
    reconcile = controller.reconcile

    async def counted(name: str, logger: Any, pods: Any) -> None:
        reconciles.append(name)
        await reconcile(name, logger, pods)

    controller.reconcile = counted  # type: ignore[method-assign]
    await controller.on_config("ADDED", _config('{"enable": true}'), LOG, client.pods)  # type: ignore[arg-type]
    await controller.on_node("ADDED", "n1", node().to_wire(), LOG, client.pods)  # type: ignore[arg-type]
    await controller.on_node_metric("ADDED", "n1", metric(pods={}).to_wire(), LOG, client.pods)  # type: ignore[arg-type]
    assert client.patches[-1][1]["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "8600"
    reconciles.clear()

    web = pod("a", "4", "10Gi", phase="Pending")
    client.pods.pods = [web]
    for _ in range(3):  # created, bound, started: one reconcile for the burst
        await controller.on_pod(web.to_wire(), LOG, client.pods)  # type: ignore[arg-type]
    await controller.pending["n1"]
    assert reconciles == ["n1"]
    assert client.patches[-1][1]["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "4600"

    running = pod("a", "4", "10Gi", phase="Running")  # what the formulas read did not change
    client.pods.pods = [running]
    await controller.on_pod(running.to_wire(), LOG, client.pods)  # type: ignore[arg-type]
    assert "n1" not in controller.pending

    done = pod("a", "4", "10Gi", phase="Succeeded")  # no longer counted: the node gets its room back
    client.pods.pods = [done]
    await controller.on_pod(done.to_wire(), LOG, client.pods)  # type: ignore[arg-type]
    await controller.pending["n1"]
    assert reconciles == ["n1", "n1"]
    assert client.patches[-1][1]["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "8600"


def test_the_index_holds_only_bound_running_or_pending_pods() -> None:
    def indexed(p: Pod) -> dict[str, Any]:
        raw: Any = p.to_wire()
        return pods_by_node(kopf.Body(raw), LOG)

    assert list(indexed(pod("a", "1", "1Gi", node_name="n2"))) == ["n2"]
    assert indexed(pod("a", "1", "1Gi", node_name="")) == {}
    assert indexed(pod("a", "1", "1Gi", phase="Failed")) == {}
    entry = indexed(pod("a", "1", "1Gi", priority_class="koord-prod"))["n1"]
    assert (entry.key, entry.request.cpu, entry.request.memory) == ("default/a", 1000, 1 << 30)
