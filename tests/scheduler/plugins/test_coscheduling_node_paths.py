"""``node_paths`` (every candidate row's topology path at once, from the cache's label domains)
answers as ``node_path`` does node by node: the first label key with a non-empty value per layer,
the node's own name for a leaf layer without one, None for a node outside the tree."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.core import Node
from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.coscheduling.placement import node_path, node_paths
from tests.examples import examples

CHAIN = (
    ("SpineLayer", ("spine-a", "spine-b")),
    ("BlockLayer", ("block",)),
    ("RackLayer", ("rack",)),
)
_VALUE = st.one_of(st.none(), st.just(""), st.sampled_from(["x", "y", "z"]))


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(_VALUE, _VALUE, _VALUE, _VALUE), min_size=1, max_size=8))
def test_node_paths_are_node_path_of_every_row(labelled: list[tuple[str | None, ...]]) -> None:
    cache = Cache()
    for i, values in enumerate(labelled):
        labels = {
            key: v
            for key, v in zip(("spine-a", "spine-b", "block", "rack"), values, strict=True)
            if v is not None
        }
        cache.upsert_node(
            Node.model_validate(
                {"metadata": {"name": f"n{i}", "labels": labels}, "status": {"allocatable": {"cpu": "1"}}}
            )
        )
    snapshot = Snapshot(cache)
    rows = [snapshot.table.row[f"n{i}"] for i in range(len(labelled))]
    expected = [node_path(snapshot.node_at(r).labels, snapshot.node_at(r).name, CHAIN) for r in rows]
    assert node_paths(snapshot, rows, CHAIN) == expected
