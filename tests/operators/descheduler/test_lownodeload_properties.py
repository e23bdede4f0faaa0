"""Properties of LowNodeLoad's plan over random clusters: after the planned moves no target is over
its high threshold, and no source gives up more than it needed plus one pod."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.examples import examples
from tests.operators.descheduler.cluster import NodeSpec, PodSpec, build

HIGH = 7000  # millicores: 70% of 10 cores
CONFIG: dict[str, object] = {
    "lowThresholds": {"cpu": 30},
    "highThresholds": {"cpu": 70},
    "anomalyCondition": {"consecutiveAbnormalities": 1},
}

_millis = st.integers(min_value=50, max_value=4000)


@st.composite
def clusters(draw: st.DrawFn) -> list[NodeSpec]:
    nodes: list[NodeSpec] = []
    for i in range(draw(st.integers(1, 3))):
        pods = [
            PodSpec(f"s{i}-p{j}", m / 1000)
            for j, m in enumerate(draw(st.lists(_millis, min_size=1, max_size=6)))
        ]
        nodes.append(NodeSpec(f"source-{i}", draw(st.integers(3000, 7000)) / 1000, pods))
    for i in range(draw(st.integers(1, 3))):
        nodes.append(NodeSpec(f"target-{i}", draw(st.integers(0, 3000)) / 1000))
    return nodes


def _used(node: NodeSpec) -> int:
    return round(node.system_cpu * 1000) + sum(round(p.cpu_used * 1000) for p in node.pods)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_targets_stay_under_high_and_sources_give_up_at_most_one_pod_too_many(nodes: list[NodeSpec]) -> None:
    plugin, handle = build(nodes, CONFIG)
    asyncio.run(plugin.balance(handle.node_list))
    by_name = {n.name: n for n in nodes}
    pod_millis = {p.name: round(p.cpu_used * 1000) for n in nodes for p in n.pods}
    assert [m.pod.metadata.name for m in plugin.last_moves] == handle.fake_evictor.names

    received: dict[str, int] = {}
    given_up: dict[str, list[int]] = {}
    for move in plugin.last_moves:
        assert move.target is not None
        received[move.target] = received.get(move.target, 0) + pod_millis[move.pod.metadata.name or ""]
        given_up.setdefault(move.source, []).append(pod_millis[move.pod.metadata.name or ""])
    for target, amount in received.items():
        assert _used(by_name[target]) <= 3000, "only nodes under low receive pods"
        assert _used(by_name[target]) + amount <= HIGH
    for source, amounts in given_up.items():
        # before its last pod left, the source was still over high
        assert _used(by_name[source]) - sum(amounts[:-1]) > HIGH


PROD_HIGH = 4000  # millicores: 40% of 10 cores
PROD_CONFIG: dict[str, object] = {
    **CONFIG,
    "prodLowThresholds": {"cpu": 20},
    "prodHighThresholds": {"cpu": 40},
}
_qos = st.sampled_from(["BestEffort", "Guaranteed", "Guaranteed"])  # Batch or (twice as often) Prod


@st.composite
def mixed_clusters(draw: st.DrawFn) -> list[NodeSpec]:
    nodes: list[NodeSpec] = []
    for i in range(draw(st.integers(2, 6))):
        loads = draw(st.lists(st.tuples(_millis, _qos), min_size=0, max_size=5))
        pods = [PodSpec(f"n{i}-p{j}", m / 1000, qos=q) for j, (m, q) in enumerate(loads)]
        nodes.append(NodeSpec(f"node-{i}", draw(st.integers(0, 3000)) / 1000, pods))
    return nodes


def _prod_used(node: NodeSpec) -> int:
    return sum(round(p.cpu_used * 1000) for p in node.pods if p.qos == "Guaranteed")


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_clusters())
def test_with_prod_thresholds_targets_stay_under_high_and_prod_high(nodes: list[NodeSpec]) -> None:
    plugin, handle = build(nodes, PROD_CONFIG)
    asyncio.run(plugin.balance(handle.node_list))
    by_name = {n.name: n for n in nodes}
    pods = {p.name: p for n in nodes for p in n.pods}
    received: dict[str, list[PodSpec]] = {}
    given_up: dict[tuple[str, bool], list[PodSpec]] = {}
    for move in plugin.last_moves:
        assert move.target is not None
        pod = pods[move.pod.metadata.name or ""]
        received.setdefault(move.target, []).append(pod)
        prod_pass = move.reason.startswith("node is overutilized, prod ")
        assert not prod_pass or pod.qos == "Guaranteed", "the prod pass moves only Prod pods"
        given_up.setdefault((move.source, prod_pass), []).append(pod)
    for target, moved in received.items():
        node = by_name[target]
        assert _used(node) + sum(round(p.cpu_used * 1000) for p in moved) <= HIGH
        assert (
            _prod_used(node) + sum(round(p.cpu_used * 1000) for p in moved if p.qos == "Guaranteed")
            <= PROD_HIGH
        )
    for (source, prod_pass), moved in given_up.items():
        before_last = [round(p.cpu_used * 1000) for p in moved[:-1]]
        if prod_pass:
            assert _prod_used(by_name[source]) - sum(before_last) > PROD_HIGH
        else:
            assert _used(by_name[source]) - sum(before_last) > HIGH
