"""LeanHistogram exposes what prometheus-client's Histogram exposes for the same observations."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from scheduler.lean_histogram import LeanHistogram
from scheduler.metrics import exponential_buckets

BOUNDS = exponential_buckets(0.0001, 2, 12)


def _exposed(kind: type[Histogram], amounts: list[float]) -> str:
    registry = CollectorRegistry()
    histogram = kind("h_seconds", "help", ["point"], buckets=BOUNDS, registry=registry)
    child = histogram.labels("PreFilter")
    for amount in amounts:
        child.observe(amount)
    return "\n".join(
        line for line in generate_latest(registry).decode().splitlines() if "_created" not in line
    )


@given(
    st.lists(
        st.one_of(
            st.sampled_from([*BOUNDS, 0.0, BOUNDS[-1] * 4]),
            st.floats(min_value=0.0, max_value=2.0, allow_nan=False),
        ),
        max_size=40,
    )
)
def test_same_samples_as_prometheus_histogram(amounts: list[float]) -> None:
    assert _exposed(LeanHistogram, amounts) == _exposed(Histogram, amounts)


def test_created_sample_is_kept() -> None:
    registry = CollectorRegistry()
    LeanHistogram("h_seconds", "help", ["point"], buckets=BOUNDS, registry=registry).labels("x").observe(1.0)
    created = registry.get_sample_value("h_seconds_created", {"point": "x"})
    assert created is not None
    assert created > 0


def test_nan_counts_in_no_bucket() -> None:
    registry = CollectorRegistry()
    LeanHistogram("h_seconds", "help", buckets=BOUNDS, registry=registry).observe(math.nan)
    assert registry.get_sample_value("h_seconds_count") == 0.0


def test_parent_of_labelled_children_refuses_observations() -> None:
    histogram = LeanHistogram("h_seconds", "help", ["point"], buckets=BOUNDS, registry=CollectorRegistry())
    with pytest.raises(ValueError, match="missing label values"):
        histogram.observe(1.0)
