"""kube-scheduler's preemption rules as ``helper.preemption`` keeps them: how many nodes are dry-run,
which pods violate a PodDisruptionBudget, and which candidate node is chosen."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from apis.client.backend import PDBS, EventType, WatchEvent
from apis.core import Pod, PodDisruptionBudget
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis
from scheduler.plugins.default_preemption import DefaultPreemption, DefaultPreemptionArgs
from scheduler.plugins.helper.preemption import Candidate, PdbIndex, num_candidates, pick_one_node
from tests.scheduler.test_cache import node
from tests.scheduler.test_cache import pod as cache_pod


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


def no_victim_cluster() -> tuple[Cache, Handle]:
    """Four nodes: two with pods of priority 0 and 5, one empty, one unresolvable for the pod."""
    cache = Cache()
    for name in ("n1", "n2", "n3", "n4"):
        cache.upsert_node(node(name))
    for name, priority, on in (("a", 0, "n1"), ("b", 5, "n1"), ("c", 0, "n2")):
        placed = cache_pod(name, "1", on)
        placed.priority = priority
        cache.upsert_pod(placed)
    return cache, Handle(backend=MemoryBackend(), snapshot=lambda: Snapshot(cache))


def test_a_pod_no_pod_anywhere_is_below_finds_no_victim_without_walking_the_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Preemption for a pod of the lowest priority in the cluster (every pod of a full cluster of
    one priority): the same answer as dry-running every node, without reading a node's pods."""
    cache, handle = no_victim_cluster()
    evaluator = DefaultPreemption(DefaultPreemptionArgs(), handle).evaluator
    preemptor = cache_pod("p", "1")

    def answer() -> Candidate | str:
        snapshot = Snapshot(cache)
        diagnosis = Diagnosis(node_count=4, unresolvable_rows={cache.table.row["n4"]})
        return evaluator.choose(preemptor, snapshot, diagnosis)

    walks: list[str] = []
    pods_on = Snapshot.pods_on

    def counted(self: Snapshot, name: str) -> Iterable[PodInfo]:
        walks.append(name)
        return pods_on(self, name)

    monkeypatch.setattr(Snapshot, "pods_on", counted)
    fast = answer()
    assert fast == "0/4 nodes are available: 3 No preemption victims found for incoming pod, " + (
        "1 Preemption is not helpful for scheduling."
    )
    assert walks == []
    monkeypatch.setattr(Snapshot, "has_pod_below", lambda self, priority: True)
    assert answer() == fast
    assert sorted(walks) == ["n1", "n2", "n3"]
    monkeypatch.undo()
    preemptor.priority = 1  # "a" and "c" are below it now: the nodes are walked
    monkeypatch.setattr(Snapshot, "pods_on", counted)
    walks.clear()
    answer()
    assert sorted(walks) == ["n1", "n2", "n3"]
