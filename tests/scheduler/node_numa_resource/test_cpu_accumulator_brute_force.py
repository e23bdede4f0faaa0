"""take_cpus against brute force on small topologies: required FullPCPUs gives whole cores, within
one NUMA node whenever one can hold the request, and fails exactly when no whole-core set exists;
required SpreadByPCPUs gives one CPU per core."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.node_numa_resource.cpu_accumulator import take_cpus
from scheduler.plugins.node_numa_resource.cpu_topology import CPUTopology
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from tests.examples import examples
from tests.scheduler.node_numa_resource.topologies import no_smt, small, two_sockets

TOPOLOGIES: dict[str, Callable[[], CPUTopology]] = {
    "2x2x8x2": two_sockets,
    "1x1x4x2": small,
    "no-smt": no_smt,
}
STRATEGIES = ["MostAllocated", "LeastAllocated"]


def siblings(topology: CPUTopology, cpu: int) -> frozenset[int]:
    core = topology.details[cpu].core_id
    return frozenset(c for c, d in topology.details.items() if d.core_id == core)


def whole_core_set_exists(
    topology: CPUTopology, free: frozenset[int], cores_needed: int, within: frozenset[int]
) -> bool:
    """Enumerate sets of ``cores_needed`` cores lying inside ``within`` whose CPUs are all free."""
    cores = sorted({topology.details[c].core_id for c in within})
    usable = [core for core in cores if topology.cpus_in_cores([core]) <= free & within]
    return next(itertools.combinations(usable, cores_needed), None) is not None


def node_state(topology: CPUTopology, taken: frozenset[int]) -> tuple[NodeCPUAllocation, frozenset[int]]:
    ledger = NodeCPUAllocation(topology)
    if taken:
        ledger.add("other", taken, {}, "None")
    return ledger, ledger.available_cpus(topology, frozenset())


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[str, frozenset[int], int, str]:
    name = draw(st.sampled_from(sorted(TOPOLOGIES)))
    topology = TOPOLOGIES[name]()
    taken = draw(st.frozensets(st.sampled_from(sorted(topology.details)), max_size=topology.num_cpus))
    cores = draw(st.integers(1, topology.num_cores))
    return name, taken, cores * topology.cpus_per_core, draw(st.sampled_from(STRATEGIES))


@settings(max_examples=examples(300), deadline=None)
@given(scenarios())
def test_required_full_pcpus_matches_brute_force(scenario: tuple[str, frozenset[int], int, str]) -> None:
    name, taken, need, strategy = scenario
    topology = TOPOLOGIES[name]()
    ledger, available = node_state(topology, taken)
    result = take_cpus(
        topology,
        available,
        need,
        bind_policy="FullPCPUs",
        required=True,
        exclusive_policy="None",
        numa_strategy=strategy,
        ledger=ledger,
    )
    cores_needed = need // topology.cpus_per_core
    exists = whole_core_set_exists(topology, available, cores_needed, topology.all_cpus())
    assert (result is not None) == exists
    if result is None:
        return
    chosen = frozenset(result)
    assert len(result) == len(chosen) == need
    assert chosen <= available
    for cpu in chosen:
        assert siblings(topology, cpu) <= chosen
    if need <= topology.cpus_per_node:
        one_node_fits = any(
            whole_core_set_exists(topology, available, cores_needed, topology.cpus_in_nodes([n]))
            for n in topology.node_ids()
        )
        if one_node_fits:
            assert len(topology.nodes_of(chosen)) == 1


@settings(max_examples=examples(200), deadline=None)
@given(scenarios())
def test_required_spread_by_pcpus_gives_one_cpu_per_core(
    scenario: tuple[str, frozenset[int], int, str],
) -> None:
    name, taken, _, strategy = scenario
    topology = TOPOLOGIES[name]()
    ledger, available = node_state(topology, taken)
    cores_with_a_free_cpu = len(topology.cores_of(available))
    for need in range(1, topology.num_cores + 1):
        result = take_cpus(
            topology,
            available,
            need,
            bind_policy="SpreadByPCPUs",
            required=True,
            exclusive_policy="None",
            numa_strategy=strategy,
            ledger=ledger,
        )
        assert (result is not None) == (need <= cores_with_a_free_cpu)
        if result is not None:
            assert set(result) <= available
            assert len(topology.cores_of(result)) == len(result) == need


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_every_request_on_an_empty_node_is_whole_cores_on_the_fewest_numa_nodes(name: str) -> None:
    topology = TOPOLOGIES[name]()
    ledger, available = node_state(topology, frozenset())
    for cores in range(1, topology.num_cores + 1):
        need = cores * topology.cpus_per_core
        result = take_cpus(
            topology,
            available,
            need,
            bind_policy="FullPCPUs",
            required=True,
            exclusive_policy="None",
            numa_strategy="MostAllocated",
            ledger=ledger,
        )
        assert result is not None
        nodes_needed = -(-need // topology.cpus_per_node)
        assert len(topology.nodes_of(result)) == nodes_needed
