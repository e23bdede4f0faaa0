"""NodeNUMAResource's scorers with hand-computed numbers, and its args at start-up."""

from __future__ import annotations

import textwrap

import pytest

from scheduler.config import ConfigError, load_config
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.node_numa_resource.args import NodeNUMAResourceArgs
from scheduler.plugins.node_numa_resource.scoring import resource_score

GIB = 2**30


def test_least_allocated_by_hand() -> None:
    """cpu: (16000 - 4000 - 4000) * 100 / 16000 = 50; memory: (64 - 1 - 15) * 100 / 64 = 75;
    weights 1 and 3: (50 + 225) / 4 = 68 (floored)."""
    score = resource_score(
        "LeastAllocated",
        {"cpu": 1, "memory": 3},
        {"cpu": 16000, "memory": 64 * GIB},
        {"cpu": 4000, "memory": 15 * GIB},
        {"cpu": 4000, "memory": 1 * GIB},
    )
    assert score == 68


def test_most_allocated_by_hand_and_capped_at_capacity() -> None:
    """cpu: 8000 of 16000 = 50; memory over capacity counts as full: 100; mean 75."""
    score = resource_score(
        "MostAllocated",
        {"cpu": 1, "memory": 1},
        {"cpu": 16000, "memory": GIB},
        {"cpu": 4000, "memory": GIB},
        {"cpu": 4000, "memory": GIB},
    )
    assert score == 75


def test_an_extended_resource_the_pod_does_not_ask_for_is_not_scored() -> None:
    weights = {"cpu": 1, "kubernetes.io/batch-cpu": 1}
    assert (
        resource_score("LeastAllocated", weights, {"cpu": 1000, "kubernetes.io/batch-cpu": 8000}, {}, {})
        == 100
    )


def test_defaults_are_koordinators() -> None:
    args = NodeNUMAResourceArgs()
    assert args.default_cpu_bind_policy == "FullPCPUs"
    for strategy in (args.scoring_strategy, args.numa_scoring_strategy):
        assert strategy.type == "LeastAllocated"
        assert strategy.weights() == {"cpu": 1, "memory": 1}


def load(args: str) -> None:
    body = f"""\
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    profiles:
    - schedulerName: koord-scheduler
      pluginConfig:
      - name: NodeNUMAResource
        args: {args}
    """
    load_config(textwrap.dedent(body), DEFAULT_PLUGINS, DEFAULT_REGISTRY)


def test_balanced_allocation_is_refused_at_start_up_naming_the_field() -> None:
    with pytest.raises(ConfigError) as caught:
        load("{numaScoringStrategy: {type: BalancedAllocation}}")
    problems = caught.value.problems
    assert len(problems) == 1, problems
    assert "numaScoringStrategy.type" in problems[0], problems
    assert "BalancedAllocation is not supported by NodeNUMAResource" in problems[0], problems


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ("{defaultCPUBindPolicy: ConstrainedBurst}", "defaultCPUBindPolicy"),
        (
            "{scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 101}]}}",
            "scoringStrategy.resources",
        ),
    ],
)
def test_invalid_args_are_refused_naming_the_field(args: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(args)
    assert field in caught.value.problems[0], caught.value.problems


def test_the_numa_strategy_has_its_own_weights() -> None:
    load("{numaScoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 3}]}}")
    args = NodeNUMAResourceArgs.model_validate(
        {"numaScoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 3}]}}
    )
    assert args.numa_scoring_strategy.weights() == {"cpu": 3}
    assert args.scoring_strategy.weights() == {"cpu": 1, "memory": 1}
