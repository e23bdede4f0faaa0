"""topology_tree: node labels -> detailStatus, and the admission check of the layer chain."""

from __future__ import annotations

from typing import Any

import pytest

from apis.core import Node
from apis.meta import ObjectMeta
from apis.scheduling.networktopology import ClusterNetworkTopology, ClusterNetworkTopologySpec
from operators.logic import admission, topology_tree

SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
ACCEL = "network.topology.nvidia.com/accelerator"

# docs/examples/v1.7/02-cluster-network-topology.yaml (the top layer names no parent).
V17 = [
    {"topologyLayer": "SpineLayer", "labelKey": [SPINE]},
    {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer", "labelKey": [BLOCK]},
    {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
]
WITH_ACCELERATOR = [
    {"topologyLayer": "SpineLayer", "parentTopologyLayer": "ClusterTopologyLayer", "labelKey": [SPINE]},
    {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer", "labelKey": [BLOCK]},
    {"topologyLayer": "AcceleratorLayer", "parentTopologyLayer": "BlockLayer", "labelKey": [ACCEL]},
    {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "AcceleratorLayer"},
]


def spec(items: list[dict[str, Any]]) -> ClusterNetworkTopologySpec:
    return ClusterNetworkTopologySpec.model_validate({"networkTopologySpec": items})


def node(name: str, **labels: str) -> Node:
    keys = {"spine": SPINE, "block": BLOCK, "accel": ACCEL}
    return Node(metadata=ObjectMeta(name=name, labels={keys.get(k, k): v for k, v in labels.items()}))


def entry(
    layer: str,
    name: str,
    parent: tuple[str, str] | None,
    nodes: int,
    child_layer: str | None = None,
    children: list[str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyInfo": {"topologyLayer": layer, "topologyName": name}, "nodeNum": nodes}
    if parent is not None:
        out["parentTopologyInfo"] = {"topologyLayer": parent[0], "topologyName": parent[1]}
    if child_layer is not None:
        out["childTopologyLayer"] = child_layer
    if children is not None:
        out["childTopologyNames"] = children
    return out


def wire(items: list[dict[str, Any]], nodes: list[Node]) -> list[dict[str, Any]]:
    return [e.to_wire() for e in topology_tree.build_detail_status(spec(items), nodes)]


ROOT = ("ClusterTopologyLayer", "")
# The v1.7 release notes' picture: 2 spines x 2 blocks each (4 blocks), 2 nodes per block.
V17_NODES = [node(f"n{i}", spine=f"s{1 + i // 4}", block=f"b{1 + i // 2}") for i in range(8)]
V17_STATUS = [
    entry("ClusterTopologyLayer", "", None, 8, "SpineLayer", ["s1", "s2"]),
    entry("SpineLayer", "s1", ROOT, 4, "BlockLayer", ["b1", "b2"]),
    entry("BlockLayer", "b1", ("SpineLayer", "s1"), 2, "NodeTopologyLayer"),
    entry("BlockLayer", "b2", ("SpineLayer", "s1"), 2, "NodeTopologyLayer"),
    entry("SpineLayer", "s2", ROOT, 4, "BlockLayer", ["b3", "b4"]),
    entry("BlockLayer", "b3", ("SpineLayer", "s2"), 2, "NodeTopologyLayer"),
    entry("BlockLayer", "b4", ("SpineLayer", "s2"), 2, "NodeTopologyLayer"),
]


@pytest.mark.parametrize(
    ("items", "nodes", "expected"),
    [
        pytest.param(V17, V17_NODES, V17_STATUS, id="v1.7-example-2-spines-4-blocks"),
        pytest.param(V17, list(reversed(V17_NODES)), V17_STATUS, id="node-order-does-not-matter"),
        pytest.param(list(reversed(V17)), V17_NODES, V17_STATUS, id="spec-order-does-not-matter"),
        pytest.param(V17, [], [entry("ClusterTopologyLayer", "", None, 0)], id="no-nodes-only-the-root"),
        pytest.param(
            V17,
            [node("a", spine="s1", block="b1"), node("cpu-0"), node("no-spine", block="b1")],
            [
                entry("ClusterTopologyLayer", "", None, 1, "SpineLayer", ["s1"]),
                entry("SpineLayer", "s1", ROOT, 1, "BlockLayer", ["b1"]),
                entry("BlockLayer", "b1", ("SpineLayer", "s1"), 1, "NodeTopologyLayer"),
            ],
            id="nodes-missing-a-layer-are-left-out",
        ),
        pytest.param(
            V17,
            [node("a", spine="s1"), node("b", spine="s1", block="b1")],
            [
                entry("ClusterTopologyLayer", "", None, 2, "SpineLayer", ["s1"]),
                entry("SpineLayer", "s1", ROOT, 2, "BlockLayer", ["a", "b1"]),
                entry("BlockLayer", "a", ("SpineLayer", "s1"), 1, "NodeTopologyLayer"),
                entry("BlockLayer", "b1", ("SpineLayer", "s1"), 1, "NodeTopologyLayer"),
            ],
            id="missing-direct-parent-gets-a-virtual-domain-named-after-the-node",
        ),
        pytest.param(
            WITH_ACCELERATOR,
            [node("g0", spine="s1", block="b1", accel="nvl0"), node("g1", spine="s1", block="b1")],
            [
                entry("ClusterTopologyLayer", "", None, 2, "SpineLayer", ["s1"]),
                entry("SpineLayer", "s1", ROOT, 2, "BlockLayer", ["b1"]),
                entry("BlockLayer", "b1", ("SpineLayer", "s1"), 2, "AcceleratorLayer", ["g1", "nvl0"]),
                entry("AcceleratorLayer", "g1", ("BlockLayer", "b1"), 1, "NodeTopologyLayer"),
                entry("AcceleratorLayer", "nvl0", ("BlockLayer", "b1"), 1, "NodeTopologyLayer"),
            ],
            id="virtual-accelerator-domain",
        ),
        pytest.param(
            WITH_ACCELERATOR,
            [node("g0", spine="s1", accel="nvl0")],
            [entry("ClusterTopologyLayer", "", None, 0)],
            id="missing-a-layer-above-the-direct-parent-leaves-the-node-out",
        ),
        pytest.param(
            [{**V17[0], "labelKey": ["rack", SPINE]}, *V17[1:]],
            [node("a", rack="", spine="s9", block="b1"), node("b", rack="r1", spine="s9", block="b2")],
            [
                entry("ClusterTopologyLayer", "", None, 2, "SpineLayer", ["r1", "s9"]),
                entry("SpineLayer", "r1", ROOT, 1, "BlockLayer", ["b2"]),
                entry("BlockLayer", "b2", ("SpineLayer", "r1"), 1, "NodeTopologyLayer"),
                entry("SpineLayer", "s9", ROOT, 1, "BlockLayer", ["b1"]),
                entry("BlockLayer", "b1", ("SpineLayer", "s9"), 1, "NodeTopologyLayer"),
            ],
            id="first-non-empty-label-key-wins",
        ),
        pytest.param(
            V17,
            [
                node("a", spine="s1", block="b1"),
                node("b", spine="s2", block="b1"),
                node("c", spine="s2", block="b2"),
            ],
            [
                entry("ClusterTopologyLayer", "", None, 3, "SpineLayer", ["s1", "s2"]),
                entry("SpineLayer", "s1", ROOT, 2, "BlockLayer", ["b1"]),
                entry("BlockLayer", "b1", ("SpineLayer", "s1"), 2, "NodeTopologyLayer"),
                entry("SpineLayer", "s2", ROOT, 1, "BlockLayer", ["b2"]),
                entry("BlockLayer", "b2", ("SpineLayer", "s2"), 1, "NodeTopologyLayer"),
            ],
            id="upstream-quirk-equal-names-under-different-parents-merge",
        ),
    ],
)
def test_detail_status(
    items: list[dict[str, Any]], nodes: list[Node], expected: list[dict[str, Any]]
) -> None:
    assert wire(items, nodes) == expected


def test_relabelling_a_node_moves_it_between_domains() -> None:
    before = wire(V17, V17_NODES)
    relabelled = [node("n0", spine="s2", block="b3"), *V17_NODES[1:]]
    after = wire(V17, relabelled)
    assert after != before
    counts = {
        (e["topologyInfo"]["topologyLayer"], e["topologyInfo"]["topologyName"]): e["nodeNum"] for e in after
    }
    assert counts[("SpineLayer", "s1")] == 3
    assert counts[("BlockLayer", "b1")] == 1
    assert counts[("SpineLayer", "s2")] == 5
    assert counts[("BlockLayer", "b3")] == 3


@pytest.mark.parametrize(
    ("items", "message"),
    [
        pytest.param(V17[:2], "NodeTopologyLayer is missing", id="no-node-layer"),
        pytest.param(
            [V17[0], {**V17[1], "parentTopologyLayer": "Missing"}, V17[2]],
            "'Missing' is not a layer of the spec",
            id="dangling-parent-below-the-top",
        ),
        pytest.param(
            [*V17, {"topologyLayer": "Extra", "labelKey": ["x"]}],
            "layer 'Extra' is not on the chain",
            id="extra-item",
        ),
    ],
)
def test_layers_koordinator_cannot_sort_give_no_tree(items: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(topology_tree.InvalidChain, match=message):
        topology_tree.build_detail_status(spec(items), V17_NODES)


def test_a_dangling_top_parent_gives_no_tree_as_the_scheduler_refuses_it_too() -> None:
    # Koordinator never looks at the topmost item's parent and builds a status anyway; here the
    # status is built from the chain koord-scheduler places gangs on, so both refuse it.
    dangling = [{**V17[0], "parentTopologyLayer": "Nowhere"}, *V17[1:]]
    with pytest.raises(topology_tree.InvalidChain, match="'Nowhere' is not a layer of the spec"):
        topology_tree.build_detail_status(spec(dangling), V17_NODES)
    assert topology_tree.validate_chain(spec(dangling))


def chain(layers: int) -> list[dict[str, Any]]:
    """NodeTopologyLayer under L0 under L1 ... under L{layers-2}: ``layers`` items."""
    items: list[dict[str, Any]] = [{"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "L0"}]
    for i in range(layers - 1):
        item: dict[str, Any] = {"topologyLayer": f"L{i}", "labelKey": [f"k{i}"]}
        if i < layers - 2:
            item["parentTopologyLayer"] = f"L{i + 1}"
        items.append(item)
    return items


def test_a_480_layer_chain_builds_without_recursion() -> None:
    # Admission allows any number of layers; the recursive emitter hit RecursionError here.
    items = chain(480)
    labels = {f"k{i}": f"v{i}" for i in range(479)}
    nodes = [Node(metadata=ObjectMeta(name=f"n{j}", labels=labels)) for j in range(2)]

    def deep(frames: int) -> list[dict[str, Any]]:  # as called under Kopf's own stack
        return deep(frames - 1) if frames else wire(items, nodes)

    status = deep(200)
    assert len(status) == 480  # the root and 479 layers
    assert status[0]["nodeNum"] == 2
    assert status[-1]["topologyInfo"] == {"topologyLayer": "L0", "topologyName": "v0"}
    assert topology_tree.validate_chain(spec(items)) == []


def test_a_long_cycle_is_named_not_walked_forever() -> None:
    items = chain(480)
    items[-1]["parentTopologyLayer"] = "L0"
    with pytest.raises(topology_tree.InvalidChain, match="form a cycle") as error:
        topology_tree.sort_layers(spec(items))
    assert len(str(error.value)) <= 2000


@pytest.mark.parametrize(
    ("items", "fragments"),
    [
        pytest.param(V17, [], id="valid-v1.7-chain"),
        pytest.param(WITH_ACCELERATOR, [], id="valid-explicit-cluster-parent"),
        pytest.param(
            [V17[0], {**V17[1], "parentTopologyLayer": "RackLayer"}, V17[2]],
            ["[1].parentTopologyLayer", "'RackLayer' is not a layer of the spec", "[0]: layer 'SpineLayer'"],
            id="dangling-parent",
        ),
        pytest.param(
            [
                *V17,
                {"topologyLayer": "RowLayer", "labelKey": ["row"]},
                {"topologyLayer": "RackLayer", "parentTopologyLayer": "RowLayer", "labelKey": ["rack"]},
            ],
            ["[3]: layer 'RowLayer' is not on the chain", "[4]: layer 'RackLayer' is not on the chain"],
            id="two-chains",
        ),
        pytest.param(
            [*V17, {"topologyLayer": "OtherBlock", "parentTopologyLayer": "SpineLayer", "labelKey": ["x"]}],
            ["[3]: layer 'OtherBlock' is not on the chain"],
            id="branch",
        ),
        pytest.param(V17[:2], ["NodeTopologyLayer is missing"], id="missing-node-layer"),
        pytest.param(
            [{**V17[0], "parentTopologyLayer": "BlockLayer"}, *V17[1:]],
            ["cycle (BlockLayer -> SpineLayer -> BlockLayer)"],
            id="cycle",
        ),
        pytest.param(
            [*V17, {"topologyLayer": "BlockLayer", "labelKey": ["y"]}],
            ["[3].topologyLayer: duplicate layer 'BlockLayer' (also at [1])"],
            id="duplicate-layer",
        ),
        pytest.param(
            [*V17[:2], {**V17[2], "labelKey": ["kubernetes.io/hostname"]}],
            ["[2].labelKey: NodeTopologyLayer is named after the node"],
            id="node-layer-with-label-key",
        ),
        pytest.param(
            [{"topologyLayer": "ClusterTopologyLayer"}, *V17],
            ["[0].topologyLayer: ClusterTopologyLayer is the implicit root"],
            id="root-listed",
        ),
    ],
)
def test_validate_chain(items: list[dict[str, Any]], fragments: list[str]) -> None:
    problems = topology_tree.validate_chain(spec(items))
    if not fragments:
        assert problems == []
    for fragment in fragments:
        assert any(fragment in p for p in problems), (fragment, problems)


def test_admission_rejects_a_broken_chain_and_names_the_problem() -> None:
    body = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {"networkTopologySpec": V17[:2]},
    }
    result = admission.review(ClusterNetworkTopology, body)
    assert not result.allowed
    assert "NodeTopologyLayer is missing" in result.message()
    body["spec"] = {"networkTopologySpec": V17}
    assert admission.review(ClusterNetworkTopology, body).allowed
