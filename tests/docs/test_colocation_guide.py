"""docs/colocation.md: its example ConfigMap is accepted, and its worked example is what koord-manager
computes and what the e2e test expects."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from apis.slo.sloconfig.colocation import node_colocation_strategy, parse_colocation_config
from e2e.scenarios import test_colocation_resources as e2e_scenario
from operators.logic.noderesource.inputs import node_inputs
from operators.logic.noderesource.node_resources import compute
from tests.operators.logic.noderesource.builders import NOW, metric, node, pod

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "colocation.md"


def _config_map() -> dict[str, object]:
    blocks: list[str] = re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), flags=re.DOTALL)
    # The ConfigMap section's example (the quick start's comes first, with only `enable`); other
    # sections show other keys of it.
    block = next(b for b in blocks if "slo-controller-config" in b and "conservative-pool" in b)
    loaded: dict[str, object] = yaml.safe_load(block)
    return loaded


def test_the_guides_config_map_is_accepted_and_selects_per_pool() -> None:
    data = _config_map()["data"]
    assert isinstance(data, dict)
    config = parse_colocation_config(data["colocation-config"])
    assert config.cluster.enable is True
    pool = node_colocation_strategy(config, {"node-pool": "conservative"}, None).strategy
    assert (pool.cpu_calculate_policy, pool.batch_cpu_threshold_percent) == ("maxUsageRequest", 50)
    assert pool.mid_unallocated_percent == 50  # from the cluster strategy


def test_the_worked_example_is_what_koord_manager_computes() -> None:
    text = GUIDE.read_text()
    worked = node(cpu="16", memory="64Gi", alloc_cpu="15", alloc_memory="62Gi")
    pods = [pod("web", "4", "16Gi", priority_class="koord-prod")]
    reported = metric(
        node_usage=("2500m", "8Gi"),
        system=("500m", "2Gi"),
        pods={"web": ("2", "6Gi", "koord-prod")},
        reclaimable=("1250m", "7730941133"),
    )
    strategy = parse_colocation_config('{"enable": true, "midUnallocatedPercent": 50}').cluster
    outcome = compute(node_inputs(worked, pods, reported), strategy, NOW, None)
    figures = {name: str(q.value()) for name, q in outcome.desired.items() if q is not None}
    assert figures == {
        "kubernetes.io/batch-cpu": "6600",
        "kubernetes.io/batch-memory": "36077725287",
        "kubernetes.io/mid-cpu": "6750",
        "kubernetes.io/mid-memory": "32427003085",
    }
    for value in figures.values():
        assert value in text
    assert {k: str(v) for k, v in e2e_scenario._expected(e2e_scenario.BUSY).items()} == figures
