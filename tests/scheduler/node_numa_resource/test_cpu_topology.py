"""CPUTopology from the cpu-topology annotation, and the Linux cpuset list format."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.extension.numa import ANNOTATION_NODE_CPU_TOPOLOGY, get_cpu_topology
from scheduler.plugins.node_numa_resource.cpu_topology import CPUSet, CPUTopology
from tests.scheduler.node_numa_resource.topologies import no_smt, small, two_sockets

ANNOTATION = (
    '{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":1,"core":0,"socket":0,"node":0},'
    '{"id":2,"core":0,"socket":1,"node":1},{"id":3,"core":0,"socket":1,"node":1}]}'
)


def test_topology_from_the_annotation_makes_core_ids_unique_across_sockets() -> None:
    topology = CPUTopology.from_annotation(get_cpu_topology({ANNOTATION_NODE_CPU_TOPOLOGY: ANNOTATION}))
    assert topology.details[2].core_id == 1 << 16
    assert topology.details[0].core_id == 0
    assert topology.details[2].node_id == 1  # the real NUMA id, matching zone node-1
    assert (topology.num_cpus, topology.num_cores, topology.num_sockets, topology.num_nodes) == (4, 2, 2, 2)
    assert (topology.cpus_per_core, topology.cpus_per_node, topology.cpus_per_socket) == (2, 2, 2)
    assert topology.is_valid
    assert topology.cpus_in_nodes([1]) == {2, 3}
    assert topology.cpus_in_sockets([0]) == {0, 1}
    assert topology.cores_of([0, 1, 3]) == {0, 1 << 16}


def test_an_empty_annotation_is_an_invalid_topology() -> None:
    topology = CPUTopology.from_annotation(get_cpu_topology({}))
    assert not topology.is_valid
    assert topology.cpus_per_core == topology.cpus_per_node == topology.cpus_per_socket == 0


@pytest.mark.parametrize(
    ("make", "counts", "per"),
    [
        (two_sockets, (64, 32, 2, 4), (2, 16, 32)),
        (small, (8, 4, 1, 1), (2, 8, 8)),
        (no_smt, (8, 8, 2, 2), (1, 4, 4)),
    ],
    ids=["2x2x8x2", "1x1x4x2", "no-smt"],
)
def test_counts_of_the_test_topologies(
    make: Callable[[], CPUTopology], counts: tuple[int, ...], per: tuple[int, ...]
) -> None:
    t = make()
    assert (t.num_cpus, t.num_cores, t.num_sockets, t.num_nodes) == counts
    assert (t.cpus_per_core, t.cpus_per_node, t.cpus_per_socket) == per


def test_siblings_share_a_core_in_the_two_socket_topology() -> None:
    t = two_sockets()
    assert t.details[0].core_id == t.details[32].core_id
    assert t.cpus_in_cores([t.details[8].core_id]) == {8, 40}
    assert t.cpus_in_nodes([1]) == set(range(8, 16)) | set(range(40, 48))


@pytest.mark.parametrize(
    ("text", "cpus", "canonical"),
    [("", set(), ""), ("0-3,8-11", {0, 1, 2, 3, 8, 9, 10, 11}, "0-3,8-11"), ("5, 1-2", {1, 2, 5}, "1-2,5")],
)
def test_cpuset_parses_and_formats_the_linux_list(text: str, cpus: set[int], canonical: str) -> None:
    parsed = CPUSet.parse(text)
    assert parsed == cpus
    assert str(parsed) == canonical


@pytest.mark.parametrize("text", ["3-1", "a", "1,,2", "-1", "0-99999999", "1-"])
def test_a_malformed_cpuset_names_the_bad_part(text: str) -> None:
    with pytest.raises(ValueError, match="invalid cpuset"):
        CPUSet.parse(text)


@given(st.frozensets(st.integers(0, 300)))
def test_cpuset_format_round_trips(cpus: frozenset[int]) -> None:
    assert CPUSet.parse(CPUSet(cpus).format()) == cpus


def test_topologies_compare_and_hash_by_their_cpus() -> None:
    assert two_sockets() == two_sockets()
    assert two_sockets() != small()
    assert len({two_sockets(), two_sockets(), small()}) == 2
