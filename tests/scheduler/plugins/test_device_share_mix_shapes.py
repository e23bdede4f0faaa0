"""The Fragmentation strategy's kept mix shapes (``_mix_shapes``): the per-shape columns kept for
the last lists of shapes and the cpu and memory asked only of the shapes scored give the very
arrays that ``shapes_of`` the mix's weights, hosts and ``shape_hosts`` give, whatever the mix did
since (pods added, re-added with another shape, deleted, deleted while pending)."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.device_share.args import FragmentationArgs
from scheduler.plugins.device_share.fragmentation import Shapes, shape_hosts, shapes_of
from scheduler.plugins.device_share.fragmentation_strategy import FragmentationStrategy
from scheduler.plugins.device_share.request import GPURequest

GIB = 2**30
POOL = [
    GPURequest(1, 100, 100, None),
    GPURequest(1, 50, 50, None),
    GPURequest(1, 25, None, 4 * GIB),
    GPURequest(2, 100, 100, None),
    GPURequest(8, 100, 100, None),
    GPURequest(1, 10, 10, None),
]

_step = st.tuples(
    st.sampled_from(["add", "remove", "leave"]),
    st.integers(0, 7),
    st.integers(0, len(POOL) - 1),
    st.integers(0, 3),
)


def _same(got: Shapes, expected: Shapes) -> None:
    for field in dataclasses.fields(Shapes):
        a, b = getattr(got, field.name), getattr(expected, field.name)
        assert a.dtype == b.dtype, field.name
        assert a.shape == b.shape, field.name
        assert a.tobytes() == b.tobytes(), field.name


@settings(max_examples=60, deadline=None)
@given(
    mix=st.sampled_from(["Cluster", "Recent"]),
    max_shapes=st.integers(1, 4),
    steps=st.lists(_step, min_size=1, max_size=40),
)
def test_kept_mix_shapes_are_shapes_of_the_mix(
    mix: str, max_shapes: int, steps: list[tuple[str, int, int, int]]
) -> None:
    args = FragmentationArgs.model_validate({"mix": mix, "maxShapes": max_shapes})
    strategy = FragmentationStrategy(args)
    for action, pod, shape, size in steps:
        host = (1_000 * (size + 1), size * GIB)
        if action == "add" or strategy.cluster is None:
            strategy.observe(f"pod-{pod}", POOL[shape], host)
        elif action == "remove":
            strategy.cluster.remove(f"pod-{pod}")
        else:
            strategy.cluster.leave(f"pod-{pod}", served=size % 2 == 0)
        weights = strategy.mix.weights_seen()
        _same(strategy._mix_shapes(None, None)[1], shapes_of(weights, strategy.mix.hosts_seen()))
        for request in (POOL[shape], POOL[(shape + 3) % len(POOL)]):
            weights = strategy.mix.weights(request)
            expected = shapes_of(weights)
            _same(strategy._mix_shapes(request, None)[1], expected)
            kinds = [r for r, w in weights.items() if w > 0]
            hosts = shape_hosts(kinds, strategy.mix.hosts(request, host))
            _same(strategy._mix_shapes(request, host)[1], dataclasses.replace(expected, host=hosts))


def test_a_mix_of_the_same_shapes_reuses_the_columns_with_new_weights() -> None:
    strategy = FragmentationStrategy(FragmentationArgs())
    one, half = POOL[0], POOL[1]
    strategy.observe("a", one)
    strategy.observe("b", half)
    first = strategy._mix_shapes(one, None)[1]
    strategy.observe("c", one)
    second = strategy._mix_shapes(one, None)[1]
    assert second.count is first.count  # the same shapes in the same order: columns shared
    assert second.weight.tolist() == [2 / 3, 1 / 3]
    assert np.array_equal(first.weight, [0.5, 0.5])


_fields = st.tuples(
    st.integers(1, 8),
    st.integers(1, 100),
    st.none() | st.integers(1, 100),
    st.none() | st.integers(1, 2**36),
    st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4)),
    st.lists(st.tuples(st.sampled_from(["npu-core", "npu-cpu"]), st.integers(1, 8)), max_size=2).map(tuple),
)


@given(fields=_fields, other=_fields)
def test_a_request_hashes_as_its_fields_once_taken(
    fields: tuple[int, int, int | None, int | None, tuple[int, int, int], tuple[tuple[str, int], ...]],
    other: tuple[int, int, int | None, int | None, tuple[int, int, int], tuple[tuple[str, int], ...]],
) -> None:
    request = GPURequest(*fields)
    assert hash(request) == hash(fields)  # as the dataclass hashed: sets of requests keep their order
    rebuilt = dataclasses.replace(GPURequest(*other), count=fields[0], core=fields[1], ratio=fields[2])
    rebuilt = dataclasses.replace(rebuilt, memory=fields[3], npu=fields[4], asked=fields[5])
    assert rebuilt == request
    assert hash(rebuilt) == hash(request)
    assert (GPURequest(*other) == request) == (other == fields)
