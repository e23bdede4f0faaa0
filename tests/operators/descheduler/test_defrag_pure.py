"""GangDefragmentation's pure parts: its args, which gangs wait, and the domains of a gang."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from apis.extension.networktopology import NetworkTopologySpec
from operators.descheduler.defrag import GangDefragmentationArgs
from operators.descheduler.defrag.domains import Domain, domains, gather_layer
from operators.descheduler.defrag.waiting import blocked_gangs
from tests.operators.descheduler.defrag_fakes import gang_member, node, pod_group, rack_topology
from tests.operators.descheduler.fakes import NOW


def test_args_defaults_and_checks() -> None:
    args = GangDefragmentationArgs()
    assert (args.wait_threshold_seconds, args.max_pods_to_move, args.plan_timeout_seconds, args.dry_run) == (
        60.0,
        4,
        600.0,
        False,
    )
    assert (
        GangDefragmentationArgs.model_validate({"waitThreshold": "2m", "maxPodsToMove": 2}).max_pods_to_move
        == 2
    )
    for bad in (
        {"maxPodsToMove": 0},
        {"planTimeout": "0s"},
        {"unknown": 1},
        {"maxUnavailablePerWorkload": "x"},
    ):
        with pytest.raises(ValidationError):
            GangDefragmentationArgs.model_validate(bad)


@pytest.mark.parametrize(
    ("value", "replicas", "expected"),
    [
        (None, 3, 1),
        (None, 4, 2),
        (None, 10, 2),
        (None, 30, 3),
        (0, 5, 1),
        (3, 2, 2),
        ("50%", 5, 2),
        ("10%", 5, 1),
    ],
)
def test_max_unavailable(value: int | str | None, replicas: int, expected: int) -> None:
    args = GangDefragmentationArgs(max_unavailable_per_workload=value)
    assert args.max_unavailable(replicas) == expected


def test_a_gang_waits_once_every_pending_member_was_unschedulable_long_enough() -> None:
    groups = [pod_group("train", 2)]
    members = [gang_member("train-0", "train", waited=120), gang_member("train-1", "train", waited=61)]
    (found,) = blocked_gangs(groups, {"default/train": members}, {}, {})
    assert (found.key, found.priority, found.since) == ("default/train", 100, NOW - timedelta(seconds=61))
    assert found.waited(NOW, timedelta(seconds=60))
    members[1] = gang_member("train-1", "train", waited=59)
    (found,) = blocked_gangs(groups, {"default/train": members}, {}, {})
    assert not found.waited(NOW, timedelta(seconds=60))
    # The scheduler rewrote the condition: the earliest time seen before still counts.
    (found,) = blocked_gangs(
        groups, {"default/train": members}, {}, {"default/train": NOW - timedelta(seconds=90)}
    )
    assert found.waited(NOW, timedelta(seconds=60))


def test_a_gang_with_members_missing_or_bound_enough_is_not_blocked() -> None:
    groups = [pod_group("train", 3)]
    members = [gang_member("train-0", "train"), gang_member("train-1", "train")]
    assert blocked_gangs(groups, {"default/train": members}, {}, {}) == []  # one not created
    assert len(blocked_gangs(groups, {"default/train": members}, {"default/train": 1}, {})) == 1
    assert blocked_gangs(groups, {"default/train": members}, {"default/train": 3}, {}) == []


def test_domains_of_the_must_gather_layer_or_nodes() -> None:
    nodes = [node("a0", "a"), node("b0", "b"), node("a1", "a"), node("loose", None)]
    topology = rack_topology()
    spec = NetworkTopologySpec.model_validate(
        {"gatherStrategy": [{"layer": "RackLayer", "strategy": "MustGather"}]}
    )
    assert gather_layer(spec, topology) == "RackLayer"
    # A node without the rack label is a rack of its own (the layer right above the nodes).
    assert domains(nodes, topology, "RackLayer") == [
        Domain("RackLayer", "a", ("a0", "a1")),
        Domain("RackLayer", "b", ("b0",)),
        Domain("RackLayer", "loose", ("loose",)),
    ]
    assert gather_layer(None, topology) == "NodeTopologyLayer"
    prefer = NetworkTopologySpec.model_validate(
        {"gatherStrategy": [{"layer": "RackLayer", "strategy": "PreferGather"}]}
    )
    assert gather_layer(prefer, topology) == "NodeTopologyLayer"
    assert [d.name for d in domains(nodes, None, "NodeTopologyLayer")] == ["a0", "a1", "b0", "loose"]
    assert gather_layer(spec, None) is None  # must gather on a layer nobody declared: nothing to plan
    unknown = NetworkTopologySpec.model_validate(
        {"gatherStrategy": [{"layer": "SpineLayer", "strategy": "MustGather"}]}
    )
    assert gather_layer(unknown, topology) is None
