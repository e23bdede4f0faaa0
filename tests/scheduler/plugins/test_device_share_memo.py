"""DeviceShare keeps each request shape's PreFilter refusals and Score card scores per node and asks
again only the nodes whose cards changed (``device_share.node_memo``): what it keeps must equal
what asking every node afresh answers, after any sequence of placements, releases and Device
changes, and also when the change log has dropped what a shape last saw."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.backend import EventType, WatchEvent
from scheduler.plugins.device_share import store as store_module
from scheduler.plugins.device_share.allocator import node_score
from scheduler.plugins.device_share.cycle import Cycle as _Cycle
from scheduler.plugins.device_share.plugin import DeviceShare
from scheduler.plugins.device_share.rdma import Refusal
from tests.examples import examples
from tests.scheduler.plugins.device_share_fixtures import device, gpu
from tests.scheduler.plugins.test_device_share import gpu_pod, plugin, req, schedule, snapshot

NODES = ("n0", "n1", "n2", "n3")
SHAPES: list[dict[str, str | int]] = [
    req(core=100, ratio=100),
    req(core=200, ratio=200),
    req(core=50, ratio=50),
    req(core=25, ratio=25),
    req(core=30, memory="20Gi"),
]

Step = tuple[str, int, int]
"""("place", shape, _) | ("release", held index, _) | ("device", node index, card count)."""

steps = st.lists(
    st.one_of(
        st.tuples(st.just("place"), st.integers(0, len(SHAPES) - 1), st.just(0)),
        st.tuples(st.just("release"), st.integers(0, 50), st.just(0)),
        st.tuples(st.just("device"), st.integers(0, len(NODES) - 1), st.integers(0, 4)),
    ),
    max_size=40,
)


def cards(count: int, memory_gib: int = 40) -> list[dict[str, Any]]:
    return [gpu(m, memory_gib=memory_gib) for m in range(count)]


def fresh_refusals(p: DeviceShare, cycle: _Cycle) -> dict[str, Refusal]:
    found = {node: p._refusal(node, cycle) for node in p.store.has_device}
    return {node: refusal for node, refusal in found.items() if refusal is not None}


def fresh_scores(p: DeviceShare, cycle: _Cycle) -> dict[str, int]:
    assert cycle.request is not None
    return {
        node: node_score(p.store.gpus(node), p.store.usage(node), cycle.request, p.card_order, p.weights)
        for node in p.store.has_device
        if p.store.gpus(node)
    }


def check_every_shape(p: DeviceShare) -> None:
    snap = snapshot(*NODES)
    for i, shape in enumerate(SHAPES):
        cycle = p._cycle_of(gpu_pod(f"probe-{i}", **shape), snap)
        assert isinstance(cycle, _Cycle)
        assert p._memoizable(cycle)
        assert p._fit_table(cycle).by_node == fresh_refusals(p, cycle), shape
        assert p._score_table(cycle).by_node == fresh_scores(p, cycle), shape


def replay(p: DeviceShare, plan: list[Step]) -> None:
    held: list[str] = []
    snap = snapshot(*NODES)
    for n, (kind, a, b) in enumerate(plan):
        if kind == "place":
            name = f"pod-{n}"
            node, _ = schedule(p, gpu_pod(name, **SHAPES[a]), snap)
            if node is not None:
                held.append(name)
        elif kind == "release" and held:
            p.store.release(held.pop(a % len(held)))
        elif kind == "device":
            changed = device(NODES[a], *cards(b, memory_gib=40 if b % 2 else 80))
            p._on_device(WatchEvent(EventType.MODIFIED, changed))
        check_every_shape(p)


@settings(max_examples=examples(25, full=300), deadline=None)
@given(plan=steps)
def test_kept_answers_equal_asking_every_node_afresh(plan: list[Step]) -> None:
    p, _ = plugin(*(device(n, *cards(2 + i % 3)) for i, n in enumerate(NODES)))
    check_every_shape(p)  # every shape's table is filled once before the changes begin
    replay(p, plan)


@settings(max_examples=examples(10, full=100), deadline=None)
@given(plan=steps)
def test_kept_answers_hold_when_the_change_log_dropped_what_a_shape_saw(plan: list[Step]) -> None:
    kept = store_module._CHANGES_KEPT, store_module._CHANGES_KEPT_PER_NODE
    store_module._CHANGES_KEPT, store_module._CHANGES_KEPT_PER_NODE = 2, 0
    try:
        p, _ = plugin(*(device(n, *cards(2 + i % 3)) for i, n in enumerate(NODES)))
        check_every_shape(p)
        replay(p, plan)
    finally:
        store_module._CHANGES_KEPT, store_module._CHANGES_KEPT_PER_NODE = kept
