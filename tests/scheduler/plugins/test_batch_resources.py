"""Batch and mid resources are ordinary resources to NodeResourcesFit and ElasticQuota
(api-reference 2.10): ``kubernetes.io/batch-cpu`` counts whole milli-cores as written, and the
deprecated ``koordinator.sh/batch-*`` names, on a pod, a node or a quota, count as the new ones,
as Koordinator's informer transformers rename them."""

from __future__ import annotations

import pytest

from apis.extension.colocation import BATCH_CPU, BATCH_MEMORY, KOORD_BATCH_CPU, KOORD_BATCH_MEMORY, MID_CPU
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.status import Code
from scheduler.plugins import node_resources_fit as fit
from scheduler.plugins.node_resources_fit import NodeResourcesFitArgs
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import filter_reasons
from tests.scheduler.plugins.test_elastic_quota import World, pod, quota


def plugin() -> fit.NodeResourcesFit:
    return fit.new(NodeResourcesFitArgs(), handle=None)  # type: ignore[arg-type]


def batch_nodes(cpu_name: str = BATCH_CPU, memory_name: str = BATCH_MEMORY) -> list[object]:
    return [
        make_node("batch").alloc({cpu_name: "4000", memory_name: "8Gi"}, cpu="8", memory="16Gi").obj(),
        make_node("plain").alloc(cpu="8", memory="16Gi").obj(),
    ]


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        pytest.param(
            {BATCH_CPU: "4000", BATCH_MEMORY: "8Gi"},
            {"batch": [], "plain": [f"Insufficient {BATCH_CPU}", f"Insufficient {BATCH_MEMORY}"]},
            id="fits-the-batch-node-exactly",
        ),
        pytest.param(
            {BATCH_CPU: "4001"},
            {"batch": [f"Insufficient {BATCH_CPU}"], "plain": [f"Insufficient {BATCH_CPU}"]},
            id="one-milli-core-too-many",
        ),
        pytest.param(
            {BATCH_MEMORY: "9Gi"},
            {"batch": [f"Insufficient {BATCH_MEMORY}"], "plain": [f"Insufficient {BATCH_MEMORY}"]},
            id="batch-memory-no-node-holds",
        ),
        pytest.param(
            {KOORD_BATCH_CPU: "2000", KOORD_BATCH_MEMORY: "4Gi"},
            {"batch": [], "plain": [f"Insufficient {BATCH_CPU}", f"Insufficient {BATCH_MEMORY}"]},
            id="deprecated-names-on-the-pod",
        ),
        pytest.param(
            {MID_CPU: "1"},
            {"batch": [f"Insufficient {MID_CPU}"], "plain": [f"Insufficient {MID_CPU}"]},
            id="mid-cpu-the-nodes-lack",
        ),
    ],
)
def test_node_resources_fit_counts_batch_resources(
    requests: dict[str, str], expected: dict[str, list[str]]
) -> None:
    snapshot = make_snapshot(batch_nodes())  # type: ignore[arg-type]
    assert filter_reasons(plugin(), PodInfo.of(make_pod("p").req(requests).obj()), snapshot) == expected


def test_a_node_advertising_the_deprecated_names_holds_a_batch_pod() -> None:
    snapshot = make_snapshot(batch_nodes(KOORD_BATCH_CPU, KOORD_BATCH_MEMORY))  # type: ignore[arg-type]
    batch_pod = PodInfo.of(make_pod("p").req({BATCH_CPU: "3000", BATCH_MEMORY: "6Gi"}).obj())
    assert filter_reasons(plugin(), batch_pod, snapshot)["batch"] == []
    assert snapshot.table.column.get(KOORD_BATCH_CPU) is None  # read under the new name only


def test_batch_pods_on_a_node_use_up_its_batch_cpu() -> None:
    nodes = batch_nodes()
    held = make_pod("held").req({BATCH_CPU: "3000"}).on("batch").obj()
    snapshot = make_snapshot(nodes, [held])  # type: ignore[arg-type]
    more = PodInfo.of(make_pod("more").req({KOORD_BATCH_CPU: "1001"}).obj())
    assert filter_reasons(plugin(), more, snapshot)["batch"] == [f"Insufficient {BATCH_CPU}"]


@pytest.mark.parametrize("max_name", [BATCH_CPU, KOORD_BATCH_CPU], ids=["batch-cpu", "deprecated-name"])
def test_an_elastic_quota_with_batch_cpu_max_refuses_a_pod_over_it(max_name: str) -> None:
    world = World(nodes=[make_node("n1").alloc({BATCH_CPU: "30000"}, cpu="64", memory="256Gi").obj()])
    world.quotas(quota("team-b", "team-b", max={max_name: "3000", "cpu": "8"}))
    world.pod(pod("b1", "0", "team-b").req({BATCH_CPU: "2000"}).on("n1").obj())
    code, message, _ = world.pre_filter(world.pod(pod("b2", "0", "team-b").req({BATCH_CPU: "2000"}).obj()))
    assert code == Code.UNSCHEDULABLE
    assert message.startswith(
        f"Insufficient quotas: quota team-b {BATCH_CPU} used 2k + request 2k > runtime 3k"
    ), message
    small = world.pod(pod("b3", "0", "team-b").req({KOORD_BATCH_CPU: "1000"}).obj())
    assert world.pre_filter(small)[0] == Code.SUCCESS
