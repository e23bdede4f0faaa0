"""What a replay reports at a mark (``e2e.bench.openb_run.StrategyRun.allocation_at``): the curve's
point, the end of a complete replay for the target it stopped just short of, nothing past a cut."""

from __future__ import annotations

from e2e.bench.openb_run import CurvePoint, Profile, StrategyRun, scheduler_config
from scheduler.config import load_config
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.node_resources_fit import NodeResourcesFitArgs


def _run(complete: bool) -> StrategyRun:
    return StrategyRun(
        strategy="MostAllocated",
        capacity_milli=10_000,
        target_percent=130.0,
        pods=4,
        arrived_milli=12_950,
        allocated_milli=9_100,
        curve=[
            CurvePoint(mark=0, arrived_percent=1.0, allocated_percent=1.0),
            CurvePoint(mark=100, arrived_percent=100.5, allocated_percent=90.0),
        ],
        complete=complete,
        seconds=2.0,
        cpu_seconds=0.5,
    )


def test_a_mark_the_curve_reached_is_its_point() -> None:
    run = _run(complete=True)

    assert run.allocation_at(100) == 90.0
    assert run.allocation_at(0) == 1.0
    assert (run.arrived_percent, run.allocated_percent, run.pods_per_second) == (129.5, 91.0, 2.0)
    assert run.cpu_ms_per_pod == 125.0


def test_a_complete_replay_ends_at_its_target() -> None:
    assert _run(complete=True).allocation_at(130) == 91.0
    assert _run(complete=True).allocation_at(131) is None


def test_a_replay_cut_short_has_nothing_past_its_curve() -> None:
    assert _run(complete=False).allocation_at(130) is None
    assert _run(complete=False).allocation_at(100) == 90.0


def test_the_gpu_cluster_profile_packs_cpu_and_memory_and_the_default_spreads_them() -> None:
    def node_fit(profile: Profile) -> NodeResourcesFitArgs:
        (resolved,) = load_config(
            scheduler_config("Fragmentation", profile), DEFAULT_PLUGINS, DEFAULT_REGISTRY
        ).profiles
        return NodeResourcesFitArgs.model_validate(resolved.plugin_args.get("NodeResourcesFit", {}))

    packed, spread = node_fit("gpu-cluster"), node_fit("default")

    assert packed.scoring_strategy.type == "MostAllocated"
    assert [(r.name, r.weight) for r in packed.scoring_strategy.resources] == [("cpu", 1), ("memory", 1)]
    assert spread.scoring_strategy.type == "LeastAllocated"
