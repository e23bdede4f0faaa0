"""Sequences of takes, adds and releases on one node: no CPU is given twice, released CPUs come
back, exclusive policies are honoured whenever the request fits without the CPUs they repel."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.node_numa_resource.cpu_accumulator import take_cpus
from scheduler.plugins.node_numa_resource.cpu_topology import CPUTopology
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from tests.examples import examples
from tests.scheduler.node_numa_resource.topologies import two_sockets

POLICIES = ["FullPCPUs", "SpreadByPCPUs", ""]
EXCLUSIVE = ["None", "PCPULevel", "NUMANodeLevel"]


@st.composite
def pod_ops(draw: st.DrawFn) -> list[tuple[str, int, str, bool, str, str]]:
    ops = []
    for i in range(draw(st.integers(1, 25))):
        if draw(st.integers(0, 3)) == 0:
            ops.append((f"p{draw(st.integers(0, i))}", 0, "", False, "", "release"))
            continue
        ops.append(
            (
                f"p{i}",
                draw(st.integers(1, 20)),
                draw(st.sampled_from(POLICIES)),
                draw(st.booleans()),
                draw(st.sampled_from(EXCLUSIVE)),
                draw(st.sampled_from(["MostAllocated", "LeastAllocated"])),
            )
        )
    return ops


def repelled(topology: CPUTopology, ledger: NodeCPUAllocation, exclusive: str) -> frozenset[int]:
    if exclusive == "PCPULevel":
        return topology.cpus_in_cores(ledger.pcpu_exclusive_cores())
    if exclusive == "NUMANodeLevel":
        return topology.cpus_in_nodes(ledger.numa_exclusive_nodes())
    return frozenset()


@settings(max_examples=examples(150), deadline=None)
@given(pod_ops())
def test_no_cpu_given_twice_and_released_cpus_come_back(
    ops: list[tuple[str, int, str, bool, str, str]],
) -> None:
    topology = two_sockets()
    ledger = NodeCPUAllocation(topology)
    reserved = frozenset({0, 32})
    for uid, need, policy, required, exclusive, strategy in ops:
        if strategy == "release":
            ledger.release(uid)
            continue
        if policy == "FullPCPUs" and required:
            need += need % 2
        available = ledger.available_cpus(topology, reserved)
        avoid = repelled(topology, ledger, exclusive)
        result = take_cpus(
            topology,
            available,
            need,
            bind_policy=policy,
            required=required,
            exclusive_policy=exclusive,
            numa_strategy=strategy,
            ledger=ledger,
        )
        if result is None:
            assert need > len(available) or required
            continue
        chosen = frozenset(result)
        assert len(chosen) == len(result) == need
        assert chosen <= available
        assert chosen.isdisjoint(ledger.allocated_cpus() | reserved)
        # exclusivity: a stage-B take fits in one NUMA node away from the repelled CPUs
        if policy == "SpreadByPCPUs" and not required and exclusive != "None":
            room = [
                topology.cores_of((available - avoid) & topology.cpus_in_nodes([n]))
                for n in topology.node_ids()
            ]
            if any(len(cores) >= need for cores in room):
                assert chosen.isdisjoint(avoid)
        ledger.add(uid, chosen, {}, exclusive)
    for uid in {op[0] for op in ops}:
        ledger.release(uid)
    assert ledger.available_cpus(topology, reserved) == topology.all_cpus() - reserved


@settings(max_examples=examples(100), deadline=None)
@given(
    st.integers(1, 8), st.sampled_from(["MostAllocated", "LeastAllocated"]), st.frozensets(st.integers(0, 63))
)
def test_numa_node_level_full_pcpus_avoids_held_numa_nodes_when_another_fits(
    cores: int, strategy: str, taken: frozenset[int]
) -> None:
    topology = two_sockets()
    ledger = NodeCPUAllocation(topology)
    ledger.add("holder", frozenset({1}), {}, "NUMANodeLevel")
    if taken - {1}:
        ledger.add("other", taken - {1}, {}, "None")
    available = ledger.available_cpus(topology, frozenset())
    need = cores * 2
    result = take_cpus(
        topology,
        available,
        need,
        bind_policy="FullPCPUs",
        required=True,
        exclusive_policy="NUMANodeLevel",
        numa_strategy=strategy,
        ledger=ledger,
    )
    elsewhere = [
        n
        for n in (1, 2, 3)
        if sum(
            topology.cpus_in_cores([c]) <= available for c in topology.cores_of(topology.cpus_in_nodes([n]))
        )
        >= cores
    ]
    if elsewhere:
        assert result is not None
        assert 0 not in topology.nodes_of(result)
