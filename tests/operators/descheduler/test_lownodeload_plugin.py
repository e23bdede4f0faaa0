"""LowNodeLoad end to end through the framework contract, with an in-memory handle and evictor:
which pods it moves off hot nodes, in which order, within budgets, never making a target hot."""

from __future__ import annotations

from operators.descheduler.framework import BalancePlugin
from operators.descheduler.lownodeload import NAME, LowNodeLoadArgs, new
from operators.descheduler.lownodeload.plugin import DRY_RUN_EVENT_REASON, RBAC
from tests.operators.descheduler.cluster import NodeSpec, PodSpec, build
from tests.operators.descheduler.fakes import FakeEvictor

CONFIG: dict[str, object] = {
    "lowThresholds": {"cpu": 30},
    "highThresholds": {"cpu": 70},
    "anomalyCondition": {"consecutiveAbnormalities": 1},
}

HOT_A = NodeSpec(
    "hot-a",
    2.5,  # 2.5 + 7 = 9.5 cores: 2.5 over the 7-core high
    [PodSpec("a-big", 3), PodSpec("a-exact", 2.5), PodSpec("a-small", 1), PodSpec("a-tiny", 0.5)],
)
HOT_B = NodeSpec(
    "hot-b",
    5,  # 5 + 3.5 = 8.5 cores: 1.5 over
    [PodSpec("b-1", 1), PodSpec("b-2", 2), PodSpec("b-3", 0.5)],
)
COOL = [NodeSpec("cool-1", 1), NodeSpec("cool-2", 2), NodeSpec("middle", 5)]


async def test_two_hot_nodes_give_up_the_right_pods_in_the_right_order() -> None:
    plugin, handle = build([HOT_A, HOT_B, *COOL], CONFIG)
    await plugin.balance(handle.node_list)
    # the hottest node first; on each, the pod that just covers the excess (segmented score),
    # and nothing more once the node is under high
    assert handle.fake_evictor.names == ["a-exact", "b-2"]
    options = [o for _, o in handle.fake_evictor.evicted]
    assert {o.plugin_name for o in options} == {NAME}
    assert options[0].reason == "node is overutilized, node cpu usage(95.00%)>threshold(70.00%)"
    # first-fit by name, and each target stays under its high (7 cores): 1 + 2.5 + 2 = 5.5
    assert [(m.pod.metadata.name, m.target) for m in plugin.last_moves] == [
        ("a-exact", "cool-1"),
        ("b-2", "cool-1"),
    ]


async def test_a_target_is_never_made_hot() -> None:
    # one target (under a 50% low) with 2 cores of room under high; hot-a's best pod (2.5) would
    # make it hot
    config = {**CONFIG, "lowThresholds": {"cpu": 50}}
    plugin, handle = build([HOT_A, NodeSpec("cool-1", 2.9, [PodSpec("x", 2.1)])], config)
    await plugin.balance(handle.node_list)
    # a-exact (2.5) and a-big (3) do not fit under 7; a-small (1) then a-tiny (0.5) do
    assert handle.fake_evictor.names == ["a-small", "a-tiny"]
    assert all(m.target == "cool-1" for m in plugin.last_moves)


async def test_only_pods_actually_moved_hold_target_room() -> None:
    # "cool" has 5 cores of room. Koordinator placed candidates while filtering (x1, x2: 4
    # cores), found no room left for x3, the pod that covers the 2.5-core excess, and moved x1
    # and x2; here each candidate is checked alone and only x3 moves
    hot = NodeSpec("hot", 1.5, [PodSpec("x1", 2), PodSpec("x2", 2), PodSpec("x3", 2.5), PodSpec("x4", 1.5)])
    plugin, handle = build([hot, NodeSpec("cool", 2)], {**CONFIG, "lowThresholds": {"cpu": 40}})
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == ["x3"]


async def test_eviction_stops_at_the_budget() -> None:
    # without nodeFit there is no per-target check: only the pooled budget (4.5 cores) limits
    hot_b = NodeSpec("hot-b", 7, [PodSpec("b-big", 2), PodSpec("b-1", 1)])  # 10 cores: 3 over
    hot_c = NodeSpec("hot-c", 5.9, [PodSpec("c-1", 2), PodSpec("c-2", 2)])  # 9.9 cores: 2.9 over
    plugin, handle = build([hot_b, hot_c, NodeSpec("cool-1", 2.5)], {**CONFIG, "nodeFit": False})
    await plugin.balance(handle.node_list)
    # hot-b (the hotter) gives up 3 cores, leaving 1.5 of the budget; c-1 crosses it, and c-2
    # stays although hot-c is still over its high
    assert handle.fake_evictor.names == ["b-big", "b-1", "c-1"]
    moved = 2 + 1 + 2
    assert moved <= 4.5 + 2  # never more than the budget plus the pod that crossed it


async def test_evictor_refusals_and_limits_move_on_to_the_next_pod() -> None:
    plugin, handle = build([HOT_A, HOT_B, *COOL], CONFIG, FakeEvictor(refuse={"a-exact"}, limit=2))
    await plugin.balance(handle.node_list)
    # a-exact refused: a-big next (it alone covers the excess); hot-b then gets b-2; the limit
    # of 2 refuses everything after
    assert handle.fake_evictor.names == ["a-big", "b-2"]


async def test_unmovable_pods_and_pod_selectors_and_namespaces() -> None:
    config = {**CONFIG, "podSelectors": [{"name": "none", "selector": {"matchLabels": {"app": "x"}}}]}
    plugin, handle = build([HOT_A, *COOL], config)
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == []  # no pod carries app=x
    plugin, handle = build([HOT_A, *COOL], {**CONFIG, "evictableNamespaces": {"exclude": ["default"]}})
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == []
    plugin, handle = build([HOT_A, *COOL], CONFIG, FakeEvictor(unmovable={"a-exact", "a-big"}))
    await plugin.balance(handle.node_list)
    # the two best candidates are not movable: the next two, and hot-a stays over (8 cores)
    assert handle.fake_evictor.names == ["a-small", "a-tiny"]


async def test_dry_run_evicts_nothing_and_reports_on_the_node() -> None:
    plugin, handle = build([HOT_A, HOT_B, *COOL], {**CONFIG, "dryRun": True})
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.evicted == []
    assert [(node, reason) for node, reason, _, _ in handle.events] == [
        ("hot-a", DRY_RUN_EVENT_REASON),
        ("hot-b", DRY_RUN_EVENT_REASON),
    ]
    assert "would move pod default/a-exact off node hot-a" in handle.events[0][2]
    # the same plan as a real run: usage is simulated as if the pods had moved
    assert [m.pod.metadata.name for m in plugin.last_moves] == ["a-exact", "b-2"]


async def test_paused_does_nothing() -> None:
    plugin, handle = build([HOT_A, *COOL], {**CONFIG, "paused": True})
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == []


async def test_waits_for_consecutive_hot_rounds() -> None:
    config = {**CONFIG, "anomalyCondition": {"consecutiveAbnormalities": 3}}
    plugin, handle = build([HOT_A, *COOL], config)
    for _ in range(2):
        await plugin.balance(handle.node_list)
        assert handle.fake_evictor.names == []
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == ["a-exact"]


async def test_number_of_nodes_needs_more_targets() -> None:
    plugin, handle = build([HOT_A, *COOL], {**CONFIG, "numberOfNodes": 3})
    await plugin.balance(handle.node_list)  # 3 targets (cool-1, cool-2 and middle as prodLow)
    assert handle.fake_evictor.names == []
    plugin, handle = build([HOT_A, *COOL], {**CONFIG, "numberOfNodes": 2})
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == ["a-exact"]


async def test_a_node_without_metrics_is_neither_source_nor_target() -> None:
    plugin, handle = build([HOT_A, NodeSpec("cool-1", 1)], CONFIG)
    del handle.metrics["cool-1"]
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == []


async def test_pools_run_in_order_and_skip_nodes_earlier_pools_found_hot() -> None:
    gpu = {"pool": "gpu"}
    nodes = [
        NodeSpec("hot-a", HOT_A.system_cpu, HOT_A.pods, labels=gpu),
        NodeSpec("cool-gpu", 1, labels=gpu),
        NodeSpec("cool-cpu", 1),
    ]
    config = {
        "anomalyCondition": {"consecutiveAbnormalities": 1},
        "nodePools": [
            {
                "name": "gpu",
                "nodeSelector": {"matchLabels": gpu},
                "lowThresholds": {"cpu": 30},
                "highThresholds": {"cpu": 70},
            },
            {"name": "all", "lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 50}},
        ],
    }
    plugin, handle = build(nodes, config)
    await plugin.balance(handle.node_list)
    # the gpu pool moves a-exact onto cool-gpu; the second pool (no selector) must not take hot-a again
    assert [(m.pod.metadata.name, m.target) for m in plugin.last_moves] == [("a-exact", "cool-gpu")]


PROD_CONFIG: dict[str, object] = {
    "lowThresholds": {"cpu": 30},
    "highThresholds": {"cpu": 70},
    "prodLowThresholds": {"cpu": 20},
    "prodHighThresholds": {"cpu": 40},
    "anomalyCondition": {"consecutiveAbnormalities": 1},
}
# 6 cores used (between low and high), 5 of them by Prod pods: 1 core over the 4-core prodHigh
PROD_HOT = NodeSpec(
    "prod-hot",
    0.5,
    [
        PodSpec("prod-a", 3, qos="Guaranteed"),
        PodSpec("prod-b", 2, qos="Burstable"),
        PodSpec("batch-c", 0.5, qos="BestEffort"),
    ],
)


async def test_prod_thresholds_move_prod_pods_off_a_node_hot_only_in_prod_usage() -> None:
    # prod-cool: 4 cores used (band), 1 of them Prod (under prodLow 2): a prod-pass target
    prod_cool = NodeSpec("prod-cool", 3, [PodSpec("p", 1, qos="Guaranteed")])
    plugin, handle = build([PROD_HOT, prod_cool], PROD_CONFIG)
    await plugin.balance(handle.node_list)
    # prod-b (x = 2, score 1.5) beats prod-a (x = 3, 1.33); batch pods are never prod candidates
    assert handle.fake_evictor.names == ["prod-b"]
    assert [m.target for m in plugin.last_moves] == ["prod-cool"]
    assert handle.fake_evictor.evicted[0][1].reason == (
        "node is overutilized, prod cpu usage(50.00%)>threshold(40.00%)"
    )


async def test_prod_pass_respects_the_targets_node_level_high() -> None:
    # prod-cool has prod room (1 + 2 <= 4) but 5.5 + 2 would put it over the 7-core high
    prod_cool = NodeSpec("prod-cool", 4.5, [PodSpec("p", 1, qos="Guaranteed")])
    plugin, handle = build([PROD_HOT, prod_cool], PROD_CONFIG)
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == []


async def test_both_passes_share_a_both_low_target() -> None:
    # cool: 1 core used, none Prod: a bothLow target of the node pass and the prod pass
    plugin, handle = build([HOT_A, PROD_HOT, NodeSpec("cool", 1)], PROD_CONFIG)
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == ["a-exact", "prod-b"]
    assert {m.target for m in plugin.last_moves} == {"cool"}


def test_it_is_a_balance_plugin_built_by_its_factory() -> None:
    _, handle = build([], CONFIG)
    plugin: BalancePlugin = new(LowNodeLoadArgs.model_validate(CONFIG), handle)  # mypy checks the protocol
    assert plugin.name == "LowNodeLoad"
    assert any(rule.grants("slo.koordinator.sh", "nodemetrics", "watch") for rule in RBAC)
