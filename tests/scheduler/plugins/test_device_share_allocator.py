"""The GPU allocator against a brute-force checker on small nodes, and a property: no card is
ever overcommitted across adding, removing and restarting (rebuilding from annotations)."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.extension.device import DeviceTopologyScope, parse_device_allocations
from scheduler.plugins.device_share.allocator import (
    GPU,
    Allocation,
    GPUUsage,
    ScoringType,
    allocate,
    device_score,
    fits,
)
from scheduler.plugins.device_share.plugin import allocated_annotation
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.store import DeviceStore, allocations_of
from tests.examples import examples

GIB = 2**30

requests = st.one_of(
    st.builds(lambda n: GPURequest(n, 100, 100, None), st.integers(1, 4)),
    st.builds(lambda c, r: GPURequest(1, c, r, None), st.integers(0, 100), st.integers(1, 100)),
    st.builds(lambda c, m: GPURequest(1, c, None, m * GIB), st.integers(0, 100), st.integers(1, 16)),
    st.builds(
        lambda n, c, r: GPURequest(n, c, r, None), st.integers(2, 3), st.integers(0, 50), st.integers(1, 50)
    ),
)


@st.composite
def nodes(draw: st.DrawFn) -> tuple[list[GPU], dict[int, GPUUsage]]:
    count = draw(st.integers(1, 5))
    gpus = [GPU(minor=m, memory=16 * GIB, numa=m // 2, pcie=f"p{m // 2}") for m in range(count)]
    usage: dict[int, GPUUsage] = {}
    for g in gpus:
        core = draw(st.integers(0, 100))
        ratio = draw(st.sampled_from([0, 25, 50, 100]))
        if core or ratio:
            usage[g.minor] = GPUUsage(core, ratio * g.memory // 100, ratio)
    return gpus, usage


def same_scope(chosen: tuple[GPU, ...], scope: DeviceTopologyScope | None) -> bool:
    if scope == "PCIe":
        return len({g.pcie for g in chosen}) == 1
    if scope == "NUMANode":
        return len({g.numa for g in chosen}) == 1
    return True


@settings(max_examples=examples(300), deadline=None)
@given(
    nodes(),
    requests,
    st.sampled_from([None, "PCIe", "NUMANode", "Node"]),
    st.sampled_from(["MostAllocated", "LeastAllocated"]),
)
def test_allocator_agrees_with_brute_force(
    node: tuple[list[GPU], dict[int, GPUUsage]],
    request: GPURequest,
    scope: DeviceTopologyScope | None,
    strategy: ScoringType,
) -> None:
    gpus, usage = node
    feasible = [
        combo
        for combo in itertools.combinations(gpus, request.count)
        if all(fits(g, usage.get(g.minor, GPUUsage()), request) for g in combo) and same_scope(combo, scope)
    ]
    got = allocate(gpus, usage, request, strategy, scope)
    assert (got is None) == (not feasible)
    if got is None:
        return
    chosen = tuple(g for g in gpus if g.minor in {a.minor for a in got})
    assert len(chosen) == request.count
    assert chosen in feasible
    if request.count == 1 and scope in (None, "Node"):
        # a single card is the best-scoring one (then the lowest minor)
        best = max(
            feasible,
            key=lambda c: (
                device_score(c[0], usage.get(c[0].minor, GPUUsage()), request, strategy),
                -c[0].minor,
            ),
        )
        assert chosen == best


def assert_not_overcommitted(store: DeviceStore, gpus: list[GPU]) -> None:
    for g in gpus:
        used = store.usage("n").get(g.minor, GPUUsage())
        assert 0 <= used.core <= 100
        assert 0 <= used.ratio <= 100
        assert 0 <= used.memory <= g.memory


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), requests),
        st.tuples(st.just("remove"), st.integers(0, 30)),
        st.tuples(st.just("restart"), st.none()),
    ),
    max_size=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 4), ops)
def test_no_card_is_ever_overcommitted(count: int, sequence: list[tuple[str, object]]) -> None:
    gpus = [GPU(minor=m, memory=16 * GIB, numa=0, pcie=f"p{m // 2}") for m in range(count)]
    store = DeviceStore()
    annotations: dict[str, str] = {}
    for i, (op, arg) in enumerate(sequence):
        if op == "add":
            assert isinstance(arg, GPURequest)
            got = allocate(gpus, store.usage("n"), arg)
            if got is not None:
                store.hold(f"p{i}", "n", got, assumed=True)
                annotations[f"p{i}"] = allocated_annotation(got)
        elif op == "remove" and annotations:
            uid = sorted(annotations)[int(str(arg)) % len(annotations)]
            store.release(uid)
            del annotations[uid]
        elif op == "restart":
            before = dict(store.usage("n"))
            store = DeviceStore()
            for uid, raw in annotations.items():
                store.hold(uid, "n", allocations_of(parse_device_allocations(raw)), assumed=False)
            assert dict(store.usage("n")) == before
        assert_not_overcommitted(store, gpus)


def test_annotation_round_trip_keeps_memory_bytes() -> None:
    allocation = Allocation(3, GPUUsage(30, 1234567, 1))
    raw = allocated_annotation([allocation])
    assert json.loads(raw) == {
        "gpu": [
            {
                "minor": 3,
                "resources": {
                    "koordinator.sh/gpu-core": "30",
                    "koordinator.sh/gpu-memory": "1234567",
                    "koordinator.sh/gpu-memory-ratio": "1",
                },
            }
        ]
    }
    assert allocations_of(parse_device_allocations(raw)) == [allocation]


# ---- Ascend NPUs and Cambricon MLUs: the same allocator, more dimensions per card ----

NPU = (20, 7, 100)
"""An Ascend 910B3's npu-core, npu-cpu and npu-dvpp."""

vendor_requests = st.one_of(
    requests,
    # whole NPUs (npu-core + gpu-memory-ratio 100 per card)
    st.builds(lambda n: GPURequest(n, 100, 100, None, (20, 0, 0)), st.integers(1, 3)),
    # vNPUs (gpu.shared 1 + npu-core + npu-cpu (+ npu-dvpp) + gpu-memory)
    st.builds(
        lambda c, p, d, m: GPURequest(1, 0, None, m * GIB, (c, p, d)),
        st.integers(1, 20),
        st.integers(1, 7),
        st.sampled_from([0, 25, 50, 100]),
        st.integers(1, 16),
    ),
)


def mixed_card(m: int, kind: str) -> GPU:
    if kind == "npu":
        return GPU(minor=m, memory=16 * GIB, core=0, numa=m // 2, pcie=f"p{m // 2}", npu=NPU)
    return GPU(minor=m, memory=16 * GIB, numa=m // 2, pcie=f"p{m // 2}")


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.sampled_from(["npu", "gpu"]), min_size=1, max_size=5),
    st.lists(vendor_requests, max_size=4),
    vendor_requests,
    st.sampled_from([None, "PCIe", "NUMANode"]),
)
def test_allocator_agrees_with_brute_force_on_npus_and_gpus(
    kinds: list[str], earlier: list[GPURequest], request: GPURequest, scope: DeviceTopologyScope | None
) -> None:
    gpus = [mixed_card(m, k) for m, k in enumerate(kinds)]
    store = DeviceStore()
    for i, previous in enumerate(earlier):
        got = allocate(gpus, store.usage("n"), previous)
        if got is not None:
            store.hold(f"p{i}", "n", got, assumed=True)
    usage = store.usage("n")
    feasible = [
        combo
        for combo in itertools.combinations(gpus, request.count)
        if all(fits(g, usage.get(g.minor, GPUUsage()), request) for g in combo) and same_scope(combo, scope)
    ]
    got = allocate(gpus, usage, request, "MostAllocated", scope)
    assert (got is None) == (not feasible)
    if got is not None:
        assert tuple(g for g in gpus if g.minor in {a.minor for a in got}) in feasible
        # An NPU request lands on NPUs only; a GPU request needing gpu-core never on an NPU.
        for a in got:
            card = gpus[a.minor]
            if any(request.npu):
                assert card.npu == NPU
            elif request.core:
                assert card.core == 100


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from(["npu", "gpu"]), min_size=1, max_size=4), st.data())
def test_no_npu_dimension_is_ever_overcommitted(kinds: list[str], data: st.DataObject) -> None:
    gpus = [mixed_card(m, k) for m, k in enumerate(kinds)]
    sequence = data.draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("add"), vendor_requests),
                st.tuples(st.just("remove"), st.integers(0, 30)),
                st.tuples(st.just("restart"), st.none()),
            ),
            max_size=30,
        )
    )
    store = DeviceStore()
    annotations: dict[str, str] = {}
    for i, (op, arg) in enumerate(sequence):
        if op == "add":
            assert isinstance(arg, GPURequest)
            got = allocate(gpus, store.usage("n"), arg)
            if got is not None:
                store.hold(f"p{i}", "n", got, assumed=True)
                annotations[f"p{i}"] = allocated_annotation(got, template="vir" if any(arg.npu) else None)
        elif op == "remove" and annotations:
            uid = sorted(annotations)[int(str(arg)) % len(annotations)]
            store.release(uid)
            del annotations[uid]
        elif op == "restart":
            before = dict(store.usage("n"))
            store = DeviceStore()
            for uid, raw in annotations.items():
                store.hold(uid, "n", allocations_of(parse_device_allocations(raw)), assumed=False)
            assert dict(store.usage("n")) == before
        for g in gpus:
            used = store.usage("n").get(g.minor, GPUUsage())
            assert 0 <= used.core <= g.core
            assert 0 <= used.ratio <= 100
            assert 0 <= used.memory <= g.memory
            assert all(0 <= u <= cap for u, cap in zip(used.npu, g.npu, strict=True))
