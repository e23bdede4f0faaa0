"""kube-scheduler's preemption rules as ``helper.preemption`` keeps them: how many nodes are dry-run,
which pods violate a PodDisruptionBudget, and which candidate node is chosen."""

from __future__ import annotations

from typing import Any

import pytest

from apis.client.backend import PDBS, EventType, WatchEvent
from apis.core import Pod, PodDisruptionBudget
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import Handle
from scheduler.plugins.helper.preemption import Candidate, PdbIndex, num_candidates, pick_one_node


def victim(name: str, priority: int, created: float = 0.0, labels: dict[str, str] | None = None) -> PodInfo:
    info = PodInfo.of(
        Pod.model_validate(
            {"metadata": {"name": name, "namespace": "default", "labels": labels or {}}, "spec": {}}
        )
    )
    info.priority = priority
    info.created = created
    return info


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        pytest.param(50, 50, id="small-cluster-all"),
        pytest.param(500, 100, id="at-least-absolute"),
        pytest.param(5000, 500, id="ten-percent"),
    ],
)
def test_the_candidates_to_find_follow_kube_schedulers_defaults(nodes: int, expected: int) -> None:
    assert num_candidates(nodes, 10, 100) == expected


def candidate(node: str, *victims: PodInfo, violations: int = 0) -> Candidate:
    return Candidate(node, victims, violations)


@pytest.mark.parametrize(
    ("candidates", "chosen"),
    [
        pytest.param(
            [candidate("a", victim("x", 1), violations=1), candidate("b", victim("y", 100))],
            "b",
            id="fewest-pdb-violations-first",
        ),
        pytest.param(
            [
                candidate("a", victim("x", 100)),
                candidate("b", victim("y", 5), victim("z", 5), victim("w", 5)),
            ],
            "b",
            id="then-lowest-highest-victim-priority",
        ),
        pytest.param(
            [candidate("a", victim("x", 5), victim("y", 4)), candidate("b", victim("z", 5), victim("w", 1))],
            "b",
            id="then-smallest-priority-sum",
        ),
        pytest.param(
            [
                candidate("a", victim("x", 5), victim("y", -3)),
                candidate("b", victim("z", 5)),
            ],
            "b",
            id="negative-priorities-do-not-make-more-victims-cheaper",
        ),
        pytest.param(
            [candidate("a", victim("x", 5, created=10)), candidate("b", victim("y", 5, created=20))],
            "b",
            id="then-latest-start-of-the-highest-priority-victims",
        ),
        pytest.param(
            [candidate("b", victim("x", 5)), candidate("a", victim("y", 5))],
            "a",
            id="then-node-name",
        ),
    ],
)
def test_the_node_is_picked_by_kube_schedulers_criteria_in_order(
    candidates: list[Candidate], chosen: str
) -> None:
    picked = pick_one_node(candidates)
    assert picked is not None
    assert picked.node == chosen


def pdb(name: str, allowed: int, selector: dict[str, Any]) -> PodDisruptionBudget:
    return PodDisruptionBudget.model_validate(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": selector},
            "status": {"disruptionsAllowed": allowed},
        }
    )


def test_pods_beyond_a_budgets_allowed_disruptions_violate_it_in_order() -> None:
    cache = Cache()
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: Snapshot(cache))
    index = PdbIndex(handle)
    listener = handle.informers.listeners(PDBS)[0]
    listener(
        WatchEvent(
            EventType.REPLACED,
            objects=[pdb("one", 1, {"matchLabels": {"app": "a"}}), pdb("empty", 0, {})],
        )
    )
    pods = [victim(f"p{i}", 1, labels={"app": "a"}) for i in range(3)] + [
        victim("other", 1, labels={"x": "y"})
    ]
    violating, other = index.split_violating(pods)
    assert [p.name for p in violating] == ["p1", "p2"]
    assert [p.name for p in other] == ["p0", "other"]  # an empty selector protects nothing
