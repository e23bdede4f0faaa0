"""split_over_numa: water-filling a request over a NUMA hint by the real NUMA ids."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.node_numa_resource.numa_split import (
    split_over_numa,
    split_over_numa_detailed,
    trim_for_required_policy,
)
from tests.examples import examples
from tests.scheduler.node_numa_resource.topologies import two_sockets


def test_the_slice_position_counterexample_fits() -> None:
    # Koordinator compares NUMA 0 and 1 for the hint {2, 3}, fills NUMA 3 first (6 + 4) and fails
    free = {0: {"cpu": 100_000}, 1: {"cpu": 0}, 2: {"cpu": 4000}, 3: {"cpu": 10_000}}
    assert split_over_numa(free, {"cpu": 12_000}, [2, 3], cpuset_cpus=None, cpus_per_core=None) == {
        2: {"cpu": 4000},
        3: {"cpu": 8000},
    }


def test_an_even_split_when_both_have_room() -> None:
    free = {0: {"cpu": 8000, "memory": 64}, 1: {"cpu": 8000, "memory": 64}}
    assert split_over_numa(
        free, {"cpu": 3000, "memory": 10}, [0, 1], cpuset_cpus=None, cpus_per_core=None
    ) == {
        0: {"cpu": 1500, "memory": 5},
        1: {"cpu": 1500, "memory": 5},
    }


def test_cpuset_pods_split_whole_cpus_and_full_pcpus_whole_cores() -> None:
    free = {0: {"cpu": 16_000}, 1: {"cpu": 16_000}}
    assert split_over_numa(free, {"cpu": 6000}, [0, 1], cpuset_cpus=6, cpus_per_core=None) == {
        0: {"cpu": 3000},
        1: {"cpu": 3000},
    }
    assert split_over_numa(free, {"cpu": 6000}, [0, 1], cpuset_cpus=6, cpus_per_core=2) == {
        0: {"cpu": 2000},
        1: {"cpu": 4000},
    }
    # 3.5 free CPUs are 3 whole ones for a cpuset
    assert split_over_numa({0: {"cpu": 3500}}, {"cpu": 4000}, [0], cpuset_cpus=4, cpus_per_core=None) is None


def test_the_failing_resource_is_named_and_others_are_left_to_the_node() -> None:
    free = {0: {"cpu": 4000, "memory": 10}, 1: {"cpu": 4000, "memory": 10}}
    split = split_over_numa_detailed(
        free, {"cpu": 4000, "memory": 30, "nvidia.com/gpu": 1}, [0, 1], cpuset_cpus=None, cpus_per_core=None
    )
    assert split.allocation is None
    assert split.reasons == ["Insufficient NUMA memory"]
    ok = split_over_numa(
        free, {"cpu": 4000, "nvidia.com/gpu": 1}, [0, 1], cpuset_cpus=None, cpus_per_core=None
    )
    assert ok == {0: {"cpu": 2000}, 1: {"cpu": 2000}}


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=4), st.integers(1, 60))
def test_the_split_fits_exactly_when_the_hint_holds_the_request(frees: list[int], request: int) -> None:
    free = {node * 2: {"cpu": amount} for node, amount in enumerate(frees)}
    split = split_over_numa(free, {"cpu": request}, sorted(free), cpuset_cpus=None, cpus_per_core=None)
    if sum(frees) < request:
        assert split is None
        return
    assert split is not None
    assert sum(r["cpu"] for r in split.values()) == request
    assert all(split[n]["cpu"] <= free[n]["cpu"] for n in split)


def test_a_required_policy_caps_numa_cpu_at_the_cpus_it_may_use() -> None:
    topology = two_sockets()
    # NUMA 0: one thread of each of its 8 cores taken -> no whole core, 8 cores with a free CPU
    available = topology.all_cpus() - frozenset(range(0, 8))
    free = {0: {"cpu": 8000, "memory": 5}, 1: {"cpu": 16_000}, 2: {"cpu": 0}}
    full = trim_for_required_policy(topology, free, available, "FullPCPUs")
    assert full == {0: {"cpu": 0, "memory": 5}, 1: {"cpu": 16_000}, 2: {"cpu": 0}}
    spread = trim_for_required_policy(topology, free, available, "SpreadByPCPUs")
    assert spread[0]["cpu"] == 8000
    assert spread[1]["cpu"] == 8000
    assert free[1]["cpu"] == 16_000  # the input is not changed
