"""docs/descheduler.md's LowNodeLoad section works as written: its DeschedulerConfiguration's
LowNodeLoad args load, and with them a node over 70% CPU gives up a pod on the third hot round
(the dry-run message has the documented shape)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from operators.descheduler.lownodeload import LowNodeLoadArgs
from operators.descheduler.lownodeload.plugin import DRY_RUN_EVENT_REASON
from tests.operators.descheduler.cluster import NodeSpec, PodSpec, build

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "descheduler.md"


def _configuration() -> dict[str, Any]:
    section = GUIDE.read_text().split("## LowNodeLoad", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    loaded: dict[str, Any] = yaml.safe_load(block)
    return loaded


def _lownodeload_args() -> dict[str, Any]:
    (profile,) = _configuration()["profiles"]
    assert profile["plugins"]["balance"]["enabled"] == [{"name": "LowNodeLoad"}]
    (entry,) = [c for c in profile["pluginConfig"] if c["name"] == "LowNodeLoad"]
    args: dict[str, Any] = entry["args"]
    return args


def test_the_documented_args_load() -> None:
    args = LowNodeLoadArgs.model_validate(_lownodeload_args())
    (pool,) = args.pools()
    assert pool.high_thresholds == {"cpu": 70, "memory": 80}
    assert pool.anomaly_condition.consecutive_abnormalities == 3


async def test_a_node_over_70_percent_gives_up_a_pod_on_the_third_hot_round() -> None:
    hot = NodeSpec("hot", 5.5, [PodSpec("web", 2, qos="BestEffort"), PodSpec("db", 0.2, qos="BestEffort")])
    nodes = [hot, NodeSpec("cool", 1)]
    plugin, handle = build(nodes, _lownodeload_args())
    for _ in range(2):
        await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == []
    await plugin.balance(handle.node_list)
    assert handle.fake_evictor.names == ["web"]

    dry, dry_handle = build(
        nodes, {**_lownodeload_args(), "dryRun": True, "anomalyCondition": {"consecutiveAbnormalities": 1}}
    )
    await dry.balance(dry_handle.node_list)
    assert dry_handle.fake_evictor.evicted == []
    ((node, reason, message, _),) = dry_handle.events
    assert (node, reason) == ("hot", DRY_RUN_EVENT_REASON)
    assert message == (
        "dry run: would move pod default/web off node hot: "
        "node is overutilized, node cpu usage(77.00%)>threshold(70.00%)"
    )
