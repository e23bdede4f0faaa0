"""NodeCPUAllocation: reference counts, available CPUs, per-NUMA sums, NUMA status, exclusive holders."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.node_numa_resource.cpu_topology import CPUTopology
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from tests.examples import examples
from tests.scheduler.node_numa_resource.topologies import two_sockets

NUMA0 = frozenset(range(0, 8)) | frozenset(range(32, 40))
NUMA1 = frozenset(range(8, 16)) | frozenset(range(40, 48))


def test_added_cpus_are_not_available_and_come_back_on_release() -> None:
    topology = two_sockets()
    ledger = NodeCPUAllocation(topology)
    ledger.add("a", frozenset({0, 32}), {0: {"cpu": 2000, "memory": 1 << 30}}, "None")
    assert ledger.allocated_cpus() == {0, 32}
    assert ledger.available_cpus(topology, frozenset()) == topology.all_cpus() - {0, 32}
    assert ledger.numa_allocated(0) == {"cpu": 2000, "memory": 1 << 30}
    assert ledger.release("a") is not None
    assert ledger.allocated_cpus() == set()
    assert ledger.numa_allocated(0) == {}
    assert ledger.available_cpus(topology, frozenset()) == topology.all_cpus()
    assert ledger.release("a") is None


def test_reserved_cpus_are_never_available() -> None:
    topology = two_sockets()
    ledger = NodeCPUAllocation(topology)
    assert ledger.available_cpus(topology, frozenset({0, 1})) == topology.all_cpus() - {0, 1}


def test_adding_a_pod_twice_replaces_its_record() -> None:
    ledger = NodeCPUAllocation(two_sockets())
    ledger.add("a", frozenset({0}), {0: {"cpu": 1000}}, "None")
    ledger.add("a", frozenset({1}), {0: {"cpu": 1000}}, "None")
    assert ledger.allocated_cpus() == {1}
    assert ledger.ref_count(0) == 0
    assert ledger.numa_allocated(0) == {"cpu": 1000}


def test_max_ref_count_lets_cpus_be_shared_and_preferred_cpus_count_once_less() -> None:
    topology = two_sockets()
    ledger = NodeCPUAllocation(topology)
    ledger.add("reservation", frozenset({0, 1}), {}, "None")
    ledger.add("b", frozenset({1}), {}, "None")
    assert ledger.ref_count(1) == 2
    assert {0, 1}.isdisjoint(ledger.available_cpus(topology, frozenset()))
    shared = ledger.available_cpus(topology, frozenset(), max_ref_count=2)
    assert 0 in shared
    assert 1 not in shared
    # the owner of the reservation gets its CPUs back, CPU 1 still held by b
    owner = ledger.available_cpus(topology, frozenset(), preferred=frozenset({0, 1}))
    assert 0 in owner
    assert 1 not in owner
    both = ledger.available_cpus(topology, frozenset(), preferred=frozenset({1}), preemptible=frozenset({1}))
    assert 1 in both


def test_numa_status_is_keyed_by_the_real_numa_id() -> None:
    # NUMA ids 0 and 2 (no node 1): Koordinator's slice-by-position status would miss node 2
    topology = CPUTopology.build([(0, 0, 0, 0), (1, 1, 0, 0), (2, 2, 0, 2), (3, 3, 0, 2)])
    ledger = NodeCPUAllocation(topology)
    assert ledger.numa_status(2) == "idle"
    ledger.add("single", frozenset({2}), {2: {"cpu": 1000}}, "None")
    assert (ledger.numa_status(0), ledger.numa_status(2)) == ("idle", "single")
    ledger.add("wide", frozenset({0, 3}), {0: {"cpu": 1000}, 2: {"cpu": 1000}}, "None")
    assert (ledger.numa_status(0), ledger.numa_status(2)) == ("shared", "shared")
    ledger.release("wide")
    assert (ledger.numa_status(0), ledger.numa_status(2)) == ("idle", "single")


def test_numa_status_counts_cpu_share_pods_only_when_asked() -> None:
    ledger = NodeCPUAllocation(two_sockets())
    ledger.add("ls", frozenset(), {0: {"cpu": 500}, 1: {"cpu": 500}}, "None")
    assert ledger.numa_status(0) == "idle"
    assert ledger.numa_status(0, include_cpu_share=True) == "shared"


def test_exclusive_holders_per_core_and_per_numa_node() -> None:
    topology = two_sockets()
    ledger = NodeCPUAllocation(topology)
    ledger.add("p", frozenset({0}), {}, "PCPULevel")
    ledger.add("n", frozenset({8}), {}, "NUMANodeLevel")
    ledger.add("x", frozenset({16}), {}, "None")
    assert ledger.pcpu_exclusive_cores() == {topology.details[0].core_id}
    assert ledger.numa_exclusive_nodes() == {1}
    ledger.release("p")
    assert ledger.pcpu_exclusive_cores() == set()


_OPS = st.lists(
    st.tuples(st.sampled_from("abcde"), st.frozensets(st.integers(0, 63), max_size=6), st.booleans()),
    max_size=30,
)


@settings(max_examples=examples(60), deadline=None)
@given(_OPS)
def test_ref_counts_match_the_recorded_pods_after_any_sequence(
    ops: list[tuple[str, frozenset[int], bool]],
) -> None:
    topology = two_sockets()
    ledger = NodeCPUAllocation(topology)
    for uid, cpus, is_add in ops:
        if is_add:
            ledger.add(uid, cpus, {0: {"cpu": 1000 * len(cpus)}}, "None")
        else:
            ledger.release(uid)
    expected: dict[int, int] = {}
    for record in ledger.pods().values():
        for cpu in record.cpus:
            expected[cpu] = expected.get(cpu, 0) + 1
    assert dict(ledger.ref_counts()) == expected
    assert ledger.numa_allocated(0).get("cpu", 0) == sum(1000 * len(r.cpus) for r in ledger.pods().values())
    for uid in "abcde":
        ledger.release(uid)
    assert ledger.available_cpus(topology, frozenset()) == topology.all_cpus()
    assert ledger.numa_status(0) == ledger.numa_status(1) == "idle"
