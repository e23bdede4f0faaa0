"""Arbitrary quantities on pods and nodes never wrap the node table nor make the cache raise, and a
pod never fits a node whose free room is smaller than its request."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.core import Node, Pod
from apis.quantity import Quantity
from apis.resources import to_int_units
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.quantity_range import MAX_UNITS, REQUESTED_CAP
from tests.examples import examples

RESOURCES = ("cpu", "memory", "example.com/dev")

# Quantities from tiny to far beyond int64, negative included, in every notation
# (the parser itself refuses 1e1000 and more).
quantities = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.builds(
        lambda m, s: f"{m}{s}",
        st.integers(min_value=-999, max_value=999),
        st.sampled_from(["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]),
    ),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(min_value=0, max_value=99), st.integers(-20, 997)),
)
resource_lists = st.dictionaries(st.sampled_from(RESOURCES), quantities, max_size=3)


def make_node(name: str, allocatable: dict[str, str]) -> Node:
    allocatable = {"pods": "110", **allocatable}
    return Node.model_validate({"metadata": {"name": name}, "status": {"allocatable": allocatable}})


def make_pod(uid: str, containers: list[dict[str, str]], node: str | None) -> PodInfo:
    spec = {
        "nodeName": node,
        "containers": [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(containers)],
    }
    return PodInfo.of(
        Pod.model_validate({"metadata": {"name": uid, "namespace": "d", "uid": uid}, "spec": spec})
    )


pods = st.lists(st.lists(resource_lists, min_size=1, max_size=3), max_size=8)


def exact_sum(cache: Cache, node: str, resource: str) -> int:
    return cache.table.requested_exact(cache.table.row[node], resource)


@settings(max_examples=examples(150), deadline=None)
@given(allocatable=resource_lists, bound=pods, pending=st.lists(resource_lists, min_size=1, max_size=3))
def test_hostile_quantities_never_wrap_and_never_fit_where_they_do_not(
    allocatable: dict[str, str], bound: list[list[dict[str, str]]], pending: list[dict[str, str]]
) -> None:
    cache = Cache()
    info = cache.upsert_node(make_node("n", allocatable))
    infos = [make_pod(f"p{i}", containers, "n") for i, containers in enumerate(bound)]
    for p in infos:
        cache.upsert_pod(p)
    table = cache.table
    row = table.row["n"]

    # Nothing wrapped: every cell in range, every exact sum the sum of the clamped requests.
    assert (table.allocatable[: table.row_count] >= 0).all()
    assert (table.allocatable[: table.row_count] <= MAX_UNITS).all()
    assert (table.requested[: table.row_count] >= 0).all()
    assert (table.requested[: table.row_count] <= REQUESTED_CAP).all()
    for resource in table.column:
        assert exact_sum(cache, "n", resource) == sum(p.requests.get(resource, 0) for p in infos)
    for p in infos:
        assert all(0 <= amount <= MAX_UNITS for amount in p.requests.values())

    # A pod fits only where each request is at most the node's true free room.
    candidate = make_pod("pending", pending, None)
    cols, amounts = table.request_vector(candidate.requests)
    free = table.free(np.asarray([row]), cols)[0]
    fits = bool((amounts <= free).all()) and bool(table.active[row])
    if fits and not candidate.problems:  # a pod with problems is gated by the queue, never filtered
        assert not info.problems
        for resource, amount in candidate.requests.items():
            raw = {"pods": "110", **allocatable}.get(resource, "0")
            true_allocatable = to_int_units(resource, Quantity.parse(raw))
            assert amount + exact_sum(cache, "n", resource) <= true_allocatable

    # Removing every pod gives the node back exactly.
    for p in infos:
        cache.remove_pod(p.uid)
    assert not table.requested[row].any()


_AMOUNTS = st.one_of(st.integers(0, 10**6), st.just(MAX_UNITS), st.integers(0, MAX_UNITS))
_REQUESTS = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), _AMOUNTS, max_size=3)


@settings(max_examples=examples(200), deadline=None)
@given(
    before=st.lists(st.tuples(st.integers(0, 3), _REQUESTS), max_size=30),
    batch=st.lists(st.tuples(st.integers(0, 3), _REQUESTS), max_size=30),
    sign=st.sampled_from([1, -1]),
)
def test_a_batch_of_requests_is_accounted_as_one_by_one(
    before: list[tuple[int, dict[str, int]]], batch: list[tuple[int, dict[str, int]]], sign: int
) -> None:
    """``add_requests_many`` (used to lift a gang's nominations each cycle) leaves the table exactly
    as adding the same requests one pod at a time does, saturated cells included."""
    from scheduler.cache.node_table import NodeTable

    tables = [NodeTable(), NodeTable()]
    for table in tables:
        for name in ("n0", "n1", "n2", "n3"):
            table.add_node(name)
        for row, requests in before:
            table.add_requests(row, requests)
    one_by_one, batched = tables
    for row, requests in batch:
        one_by_one.add_requests(row, requests, sign)
    batched.add_requests_many([r for r, _ in batch], [q for _, q in batch], sign)
    for resource in ("cpu", "memory", "nvidia.com/gpu"):
        for row in range(4):
            assert batched.requested_exact(row, resource) == one_by_one.requested_exact(row, resource)
    assert np.array_equal(batched.requested, one_by_one.requested)


@settings(max_examples=examples(200), deadline=None)
@given(
    before=st.lists(st.tuples(st.integers(0, 3), st.tuples(_AMOUNTS, _AMOUNTS)), max_size=30),
    batch=st.lists(st.tuples(st.integers(0, 3), st.tuples(_AMOUNTS, _AMOUNTS)), max_size=30),
    sign=st.sampled_from([1, -1]),
)
def test_a_batch_of_non_zero_requests_is_accounted_as_one_by_one(
    before: list[tuple[int, tuple[int, int]]], batch: list[tuple[int, tuple[int, int]]], sign: int
) -> None:
    """``add_non_zero_many`` (a preemption's candidate victims taken out and put back at once)
    leaves the table exactly as one pod at a time does, saturated cells included."""
    from scheduler.cache.node_table import NodeTable

    tables = [NodeTable(), NodeTable()]
    for table in tables:
        for name in ("n0", "n1", "n2", "n3"):
            table.add_node(name)
        for row, non_zero in before:
            table.add_non_zero(row, non_zero)
    one_by_one, batched = tables
    for row, non_zero in batch:
        one_by_one.add_non_zero(row, non_zero, sign)
    batched.add_non_zero_many([r for r, _ in batch], [n for _, n in batch], sign)
    for row in range(4):
        for col in range(2):
            assert batched.non_zero_exact(row, col) == one_by_one.non_zero_exact(row, col)
    assert np.array_equal(batched.non_zero, one_by_one.non_zero)


_NODE_OPS = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "active", "inactive"]), st.integers(0, 9)), max_size=60
)


@settings(max_examples=examples(200), deadline=None)
@given(ops=_NODE_OPS)
def test_active_rows_kept_between_changes_are_the_active_rows(ops: list[tuple[str, int]]) -> None:
    """``active_rows`` (kept until a row's ``active`` changes) is always what computing it from
    ``active`` gives, through nodes added, removed, rows reused and the table grown; it and
    ``active`` refuse writes, so no caller can change it behind the table's back."""
    from scheduler.cache.node_table import NodeTable

    table = NodeTable(node_capacity=2)
    for op, index in ops:
        name = f"n{index}"
        if op == "add":
            table.add_node(name)
        elif op == "remove":
            table.remove_node(name)
        elif op in ("active", "inactive") and name in table.row:
            table.set_active(table.row[name], op == "active")
        rows = table.active_rows()
        assert rows.tolist() == np.flatnonzero(table.active[: table.row_count]).tolist()
        assert rows.dtype == np.int64
        assert not rows.flags.writeable
        assert not table.active.flags.writeable
