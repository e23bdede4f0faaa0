"""Koordinator's orderings, computed by hand on the 2x2x8x2 topology (NUMA n = cores 8n..8n+7,
siblings c and c+32) and the 1x1x4x2 one (siblings c and c+4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.plugins.node_numa_resource.cpu_accumulator import (
    REASON_NOT_ENOUGH,
    allocate_cpuset,
    filter_for_required_policy,
    reason_for_required_policy,
    take_cpus,
    verify_required_policy,
)
from scheduler.plugins.node_numa_resource.cpu_topology import CPUTopology
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from tests.scheduler.node_numa_resource.topologies import small, two_sockets

Held = Mapping[str, tuple[set[int], str]]


def take(topology: CPUTopology, held: Held, need: int, **options: Any) -> tuple[int, ...] | None:
    ledger = NodeCPUAllocation(topology)
    for uid, (cpus, exclusive) in held.items():
        ledger.add(uid, frozenset(cpus), {}, exclusive)
    args: dict[str, Any] = {
        "bind_policy": "FullPCPUs",
        "required": False,
        "exclusive_policy": "None",
        "numa_strategy": "MostAllocated",
        "ledger": ledger,
    }
    args.update(options)
    return take_cpus(topology, ledger.available_cpus(topology, frozenset()), need, **args)


def span(first: int, last: int) -> tuple[int, ...]:
    return tuple(range(first, last + 1))


@pytest.mark.parametrize(
    ("topology", "held", "need", "options", "expected"),
    [
        # MostAllocated packs: NUMA 1 has two CPUs taken, so it is the fullest and gets the pod
        (two_sockets(), {"a": ({8, 40}, "None")}, 4, {"required": True}, (9, 10, 41, 42)),
        # LeastAllocated spreads: NUMA 1..3 tie on 16 free, socket 1 (32 free) beats socket 0 (30)
        (
            two_sockets(),
            {"a": ({0, 32}, "None")},
            4,
            {"required": True, "numa_strategy": "LeastAllocated"},
            (16, 17, 48, 49),
        ),
        # spreadCPUs: the first thread of every core, then the second
        (small(), {}, 6, {"bind_policy": "SpreadByPCPUs"}, (0, 1, 2, 3, 4, 5)),
        # spread with a half-used core: 0, 2, 3, 5 (first of each core in id order), then 4
        (small(), {"a": ({1}, "None")}, 5, {"bind_policy": "SpreadByPCPUs"}, (0, 2, 3, 4, 5)),
        # preferred FullPCPUs with an odd request splits a core (the first NUMA node with enough)
        (small(), {"a": ({1}, "None")}, 3, {}, (0, 2, 4)),
        # spill: socket 0 whole, then one core of socket 1 less than needed -> fallback takes CPU 16
        (two_sockets(), {}, 33, {}, span(0, 16) + span(32, 47)),
        # fallback, LeastAllocated: socket 1 first, then NUMA 1, then the half-used core 0, then NUMA 0
        (
            two_sockets(),
            {"a": ({0}, "None")},
            34,
            {"bind_policy": "SpreadByPCPUs", "numa_strategy": "LeastAllocated"},
            (*span(1, 32), 48, 49),
        ),
        # fallback, MostAllocated: the half-used core 0 first, then NUMA 0, 1, socket 1; then seconds
        (two_sockets(), {"a": ({0}, "None")}, 34, {"bind_policy": "SpreadByPCPUs"}, span(1, 34)),
        # PCPULevel repels a core held by another PCPULevel pod: NUMA 0 without core 0 has 7 cores
        (
            two_sockets(),
            {"a": ({0}, "PCPULevel")},
            8,
            {"bind_policy": "SpreadByPCPUs", "exclusive_policy": "PCPULevel"},
            span(8, 15),
        ),
        (two_sockets(), {"a": ({0}, "PCPULevel")}, 8, {"bind_policy": "SpreadByPCPUs"}, (*span(1, 7), 32)),
        # NUMANodeLevel repels a NUMA node held by another NUMANodeLevel pod
        (
            two_sockets(),
            {"a": ({0, 32}, "NUMANodeLevel")},
            2,
            {"required": True, "exclusive_policy": "NUMANodeLevel"},
            (8, 40),
        ),
        (two_sockets(), {"a": ({0, 32}, "NUMANodeLevel")}, 2, {"required": True}, (1, 33)),
    ],
    ids=[
        "most-allocated",
        "least-allocated",
        "spread",
        "spread-half-used",
        "odd-preferred-full-pcpus",
        "spill",
        "fallback-least",
        "fallback-most",
        "pcpu-level",
        "pcpu-level-off",
        "numa-node-level",
        "numa-node-level-off",
    ],
)
def test_koordinator_orderings(
    topology: CPUTopology, held: Held, need: int, options: dict[str, Any], expected: tuple[int, ...]
) -> None:
    assert take(topology, held, need, **options) == expected


def test_preferred_cpus_are_taken_first() -> None:
    topology = two_sockets()
    reservation = frozenset({20, 21, 52, 53})
    result = take(topology, {}, 6, required=True, preferred=reservation)
    assert result is not None
    assert reservation <= set(result)


def test_shared_cpus_rank_by_reference_count_when_sharing_is_allowed() -> None:
    topology = small()
    ledger = NodeCPUAllocation(topology)
    ledger.add("a", frozenset({0, 4}), {}, "None")
    available = ledger.available_cpus(topology, frozenset(), max_ref_count=2)
    result = take_cpus(
        topology,
        available,
        2,
        bind_policy="FullPCPUs",
        required=True,
        exclusive_policy="None",
        numa_strategy="MostAllocated",
        ledger=ledger,
        max_ref_count=2,
    )
    assert result == (1, 5)  # the unshared core 1 before core 0, which pod a holds


def test_required_policies_filter_and_verify() -> None:
    topology = small()
    free = frozenset({0, 1, 2, 4, 6})  # cores 0 and 2 whole, core 1 half
    assert filter_for_required_policy(topology, free, "FullPCPUs") == {0, 4, 2, 6}
    assert filter_for_required_policy(topology, free, "SpreadByPCPUs") == {0, 1, 2}
    assert filter_for_required_policy(topology, free, "") == free
    assert verify_required_policy(topology, (0, 4), "FullPCPUs")
    assert not verify_required_policy(topology, (0, 1), "FullPCPUs")
    assert verify_required_policy(topology, (0, 1), "SpreadByPCPUs")
    assert not verify_required_policy(topology, (0, 4), "SpreadByPCPUs")


def test_required_full_pcpus_with_an_odd_request_fails_with_koordinator_reason() -> None:
    topology = small()
    result = allocate_cpuset(
        topology,
        topology.all_cpus(),
        3,
        bind_policy="FullPCPUs",
        required=True,
        exclusive_policy="None",
        numa_strategy="MostAllocated",
        ledger=None,
    )
    assert result.cpus is None
    assert result.reason == reason_for_required_policy("FullPCPUs")


def test_a_numa_split_takes_each_share_on_its_numa_node() -> None:
    topology = two_sockets()
    common: dict[str, Any] = {
        "bind_policy": "FullPCPUs",
        "required": True,
        "exclusive_policy": "None",
        "numa_strategy": "MostAllocated",
        "ledger": None,
    }
    result = allocate_cpuset(topology, topology.all_cpus(), 8, numa_split={1: 4, 3: 4}, **common)
    assert result.cpus is not None
    chosen = frozenset(result.cpus)
    assert len(chosen & topology.cpus_in_nodes([1])) == 4
    assert len(chosen & topology.cpus_in_nodes([3])) == 4
    short = allocate_cpuset(
        topology, topology.all_cpus() - topology.cpus_in_nodes([3]), 8, numa_split={1: 4, 3: 4}, **common
    )
    assert short.cpus is None
    assert short.reason == REASON_NOT_ENOUGH
