"""The topology manager's merge and policies (algorithms 11.3), cases worked out by hand on 2 and 4
NUMA nodes; masks are ints, bit i = NUMA node i."""

from __future__ import annotations

from scheduler.framework.extensions import NUMAHint
from scheduler.plugins.node_numa_resource.topology_manager import admit, exclusive_ok

N01, N0, N1, N2 = 0b11, 0b01, 0b10, 0b100


def test_none_admits_without_a_mask() -> None:
    got = admit("", [0, 1], [{"cpu": []}])
    assert got.admitted
    assert got.mask is None


def test_the_narrowest_preferred_mask_wins_and_ties_go_to_the_lowest_numa() -> None:
    cpu = [NUMAHint(N0, True), NUMAHint(N1, True), NUMAHint(N01, False)]
    got = admit("Restricted", [0, 1], [{"cpu": cpu}])
    assert (got.admitted, got.mask) == (True, N0)


def test_a_higher_score_wins_among_masks_of_one_width() -> None:
    cpu = [NUMAHint(N0, True, 10), NUMAHint(N1, True, 30)]
    assert admit("Restricted", [0, 1], [{"cpu": cpu}]).mask == N1


def test_two_providers_agree_on_the_common_numa_node() -> None:
    """CPUs fit either NUMA node, the GPU only NUMA 1: the merge gives NUMA 1."""
    cpu = [NUMAHint(N0, True), NUMAHint(N1, True)]
    gpu = [NUMAHint(N1, True)]
    got = admit("SingleNUMANode", [0, 1], [{"cpu": cpu}, {"gpu": gpu}])
    assert (got.admitted, got.mask) == (True, N1)


def test_an_empty_hint_list_rejects_under_restricted_with_the_resource_named() -> None:
    got = admit("Restricted", [0, 1], [{"cpu": [], "memory": [NUMAHint(N0, True)]}])
    assert not got.admitted
    assert got.reasons == ("Unsatisfied NUMA cpu",)


def test_single_numa_node_keeps_only_single_numa_preferred_hints() -> None:
    """cpu fits only across both NUMA nodes (preferred at width 2): SingleNUMANode finds nothing."""
    got = admit("SingleNUMANode", [0, 1], [{"cpu": [NUMAHint(N01, True)]}])
    assert not got.admitted
    assert got.reasons == ("Unsatisfied NUMA cpu",)
    assert admit("Restricted", [0, 1], [{"cpu": [NUMAHint(N01, True)]}]).admitted


def test_single_numa_node_on_a_one_numa_machine_gets_no_mask() -> None:
    got = admit("SingleNUMANode", [0], [{"cpu": [NUMAHint(N0, True)]}])
    assert (got.admitted, got.mask) == (True, None)


def test_best_effort_always_admits_and_falls_back_to_every_numa_node() -> None:
    got = admit("BestEffort", [0, 1], [{"cpu": []}])
    assert (got.admitted, got.mask, got.preferred) == (True, N01, False)
    assert admit("BestEffort", [0, 1], [{"cpu": [NUMAHint(N1, True)]}]).mask == N1


def test_restricted_refuses_a_best_hint_that_is_not_preferred() -> None:
    """cpu prefers NUMA 0, the GPU NUMA 1: no mask is preferred by both."""
    got = admit("Restricted", [0, 1], [{"cpu": [NUMAHint(N0, True)]}, {"gpu": [NUMAHint(N1, True)]}])
    assert not got.admitted


def test_no_preference_from_a_provider_is_a_preferred_any() -> None:
    got = admit("Restricted", [0, 1], [{"cpu": [NUMAHint(N1, True)]}, None, {"gpu": None}])
    assert (got.admitted, got.mask) == (True, N1)


def test_required_exclusivity_clears_masks_that_mix_single_and_shared_numa_nodes() -> None:
    status = {0: "shared", 1: "idle", 2: "single"}
    assert not exclusive_ok(N0, status)  # a single-NUMA pod on a shared node
    assert exclusive_ok(N1, status)
    assert not exclusive_ok(N1 | N2, status)  # a multi-NUMA pod touching a single node
    cpu = [NUMAHint(N0, True), NUMAHint(N1, True)]
    got = admit("Restricted", [0, 1, 2], [{"cpu": cpu}], exclusive_status=status)  # type: ignore[arg-type]
    assert (got.admitted, got.mask) == (True, N1)
