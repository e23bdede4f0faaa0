"""ClusterNetworkTopologySpec.layer_chain: the one walk of the layer chain (placement and status tree)."""

from __future__ import annotations

from typing import Any

import pytest

from apis.errors import MESSAGE_LIMIT, InvalidSpec
from apis.scheduling.networktopology import ClusterNetworkTopologySpec, InvalidTopologyChain, chain_problems


def spec(items: list[dict[str, Any]]) -> ClusterNetworkTopologySpec:
    return ClusterNetworkTopologySpec.model_validate({"networkTopologySpec": items})


def chain(layers: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "L0"}]
    for i in range(layers - 1):
        item: dict[str, Any] = {"topologyLayer": f"L{i}", "labelKey": [f"k{i}"]}
        if i < layers - 2:
            item["parentTopologyLayer"] = f"L{i + 1}"
        items.append(item)
    return items


V17: list[dict[str, Any]] = [
    {"topologyLayer": "SpineLayer", "labelKey": ["spine"]},
    {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer", "labelKey": ["block"]},
    {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
]


def test_the_chain_is_top_down_and_ends_at_the_node_layer() -> None:
    shuffled = [V17[2], V17[0], V17[1]]
    assert [i.topology_layer for i in spec(shuffled).layer_chain()] == [
        "SpineLayer",
        "BlockLayer",
        "NodeTopologyLayer",
    ]


def test_an_explicit_cluster_root_parent_ends_the_walk() -> None:
    items = [{**V17[0], "parentTopologyLayer": "ClusterTopologyLayer"}, *V17[1:]]
    assert len(spec(items).layer_chain()) == 3


def test_480_layers_are_walked_in_a_loop() -> None:
    layers = spec(chain(480)).layer_chain()
    assert len(layers) == 480
    assert layers[0].topology_layer == "L478"
    assert layers[-1].topology_layer == "NodeTopologyLayer"


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        pytest.param(V17[:2], "NodeTopologyLayer is missing", id="no-node-layer"),
        pytest.param(
            [{**V17[0], "parentTopologyLayer": "BlockLayer"}, *V17[1:]],
            "cycle (BlockLayer -> SpineLayer -> BlockLayer)",
            id="cycle",
        ),
        pytest.param(
            [{**V17[0], "parentTopologyLayer": "Nowhere"}, *V17[1:]],
            "'Nowhere' is not a layer of the spec (dangling parent of 'SpineLayer')",
            id="dangling-top-parent",
        ),
        pytest.param(
            [*V17, {"topologyLayer": "Extra", "labelKey": ["x"]}],
            "[3]: layer 'Extra' is not on the chain",
            id="off-chain",
        ),
        pytest.param(
            [*V17, {"topologyLayer": "BlockLayer", "labelKey": ["y"]}],
            "duplicate layer 'BlockLayer'",
            id="duplicate",
        ),
        pytest.param([{"topologyLayer": "ClusterTopologyLayer"}, *V17], "implicit root", id="root-listed"),
    ],
)
def test_a_broken_chain_raises_naming_the_layer(items: list[dict[str, Any]], fragment: str) -> None:
    with pytest.raises(InvalidTopologyChain) as error:
        spec(items).layer_chain()
    assert isinstance(error.value, InvalidSpec)
    assert error.value.path == "spec.networkTopologySpec"
    assert fragment in str(error.value)
    assert any(fragment in p for p in chain_problems(spec(items)))


def test_a_480_layer_cycle_is_reported_briefly() -> None:
    items = chain(480)
    items[-1]["parentTopologyLayer"] = "L0"
    problems = chain_problems(spec(items))
    assert len(problems) == 1
    assert problems[0].endswith(
        "form a cycle (L0 -> L1 -> L2 -> L3 -> ... (472 more) -> L476 -> L477 -> L478 -> L0)"
    )
    with pytest.raises(InvalidTopologyChain) as error:
        spec(items).layer_chain()
    assert len(str(error.value)) <= MESSAGE_LIMIT
