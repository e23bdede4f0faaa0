from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import networktopology as nt

KEY = "gang.scheduling.koordinator.sh/network-topology-spec"

V17_RELEASE_NOTES = """{
"gatherStrategy": [
{
"layer": "BlockLayer",
"strategy": "PreferGather"
}
]
}"""


def test_keys_and_layers() -> None:
    assert nt.ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC == KEY
    assert (
        nt.ANNOTATION_POD_NETWORK_TOPOLOGY_SELECTOR == "scheduling.koordinator.sh/network-topology-selector"
    )
    assert nt.CLUSTER_TOPOLOGY_LAYER == "ClusterTopologyLayer"
    assert nt.NODE_TOPOLOGY_LAYER == "NodeTopologyLayer"
    assert nt.LABEL_NVIDIA_TOPOLOGY_BLOCK == "network.topology.nvidia.com/block"
    assert nt.LABEL_NVIDIA_TOPOLOGY_SPINE == "network.topology.nvidia.com/spine"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(V17_RELEASE_NOTES, [("BlockLayer", "PreferGather", None)], id="v1.7-notes"),
        pytest.param(
            '{"gatherStrategy": [{"layer": "SpineLayer", "strategy": "MustGather"}]}',
            [("SpineLayer", "MustGather", None)],
            id="must-gather",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "SpineLayer", "strategy": "MustGather"},'
            ' {"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": 4}]}',
            [("SpineLayer", "MustGather", None), ("BlockLayer", "PreferGather", 4)],
            id="two-layers-multiple",
        ),
        pytest.param("{}", None, id="empty-object"),
        pytest.param(
            '{"gatherStrategy": [{"layer": "L", "strategy": "MustGather", "future": 1}], "other": true}',
            [("L", "MustGather", None)],
            id="unknown-fields-ignored",
        ),
    ],
)
def test_parse(raw: str, expected: list[tuple[str, str, int | None]] | None) -> None:
    spec = nt.parse_network_topology_spec(raw)
    if expected is None:
        assert spec.gather_strategy is None
    else:
        assert [(r.layer, r.strategy, r.pod_count_multiple) for r in spec.gather_strategy or []] == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "Sometimes"}]}',
            "gatherStrategy[0].strategy: Input should be 'MustGather' or 'PreferGather' (got 'Sometimes')",
            id="unknown-strategy",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "B", "strategy": "MustGather"},'
            ' {"layer": "B", "strategy": "mustgather"}]}',
            "gatherStrategy[1].strategy",
            id="wrong-case",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "", "strategy": "MustGather"}]}',
            "gatherStrategy[0].layer",
            id="empty-layer",
        ),
        pytest.param(
            '{"gatherStrategy": [{"strategy": "MustGather"}]}',
            "gatherStrategy[0].layer: Field required",
            id="no-layer",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "B", "strategy": "MustGather", "podCountMultiple": 0}]}',
            "gatherStrategy[0].podCountMultiple: Input should be greater than or equal to 1",
            id="multiple-zero",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "B", "strategy": "MustGather", "podCountMultiple": "4"}]}',
            "gatherStrategy[0].podCountMultiple: Input should be a valid integer",
            id="multiple-string",
        ),
        pytest.param(
            '{"gatherStrategy": {"layer": "B"}}', "gatherStrategy: Input should be a valid array", id="object"
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "B", "strategy": "MustGather",}]}',
            "malformed JSON",
            id="trailing-comma",
        ),
    ],
)
def test_parse_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        nt.parse_network_topology_spec(raw)
    assert caught.value.key == KEY
    assert fragment in caught.value.problem
    assert str(caught.value).startswith(f"invalid value for {KEY}: ")


def test_get() -> None:
    assert nt.get_network_topology_spec(None) is None
    assert nt.get_network_topology_spec({KEY: ""}) is None
    spec = nt.get_network_topology_spec({KEY: V17_RELEASE_NOTES})
    assert spec is not None
    assert spec.gather_strategy is not None
    assert spec.to_wire() == {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "PreferGather"}]}


def test_selector() -> None:
    assert nt.get_network_topology_selector({nt.ANNOTATION_POD_NETWORK_TOPOLOGY_SELECTOR: "job-1"}) == "job-1"
    assert nt.get_network_topology_selector(None) == ""
