"""The cache accounts pods on nodes exactly, and assumed pods are released when binding fails."""

from __future__ import annotations

import numpy as np
import pytest

from apis.core import Node, Pod
from apis.resources import from_int_units
from scheduler.cache.cache import Cache
from scheduler.cache.node_table import NodeTable
from scheduler.cache.pod_info import PodInfo, pod_requests
from scheduler.cache.quantity_range import MAX_UNITS, REQUESTED_CAP
from scheduler.cache.snapshot import Snapshot


def node(name: str, cpu: str = "4", memory: str = "8Gi", **labels: str) -> Node:
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
        }
    )


def pod(name: str, cpu: str = "1", node_name: str | None = None, phase: str = "Running") -> PodInfo:
    return PodInfo.of(
        Pod.model_validate(
            {
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {
                    "nodeName": node_name,
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
                },
                "status": {"phase": phase},
            }
        )
    )


def requested(cache: Cache, node_name: str, resource: str) -> int:
    return int(cache.table.requested[cache.table.row[node_name], cache.table.column_of(resource)])


def test_pod_requests_follow_kube_scheduler_rules() -> None:
    p = Pod.model_validate(
        {
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "250m"}}},
                ],
                "initContainers": [
                    {"name": "init", "resources": {"requests": {"cpu": "2"}}},
                    {
                        "name": "sidecar",
                        "restartPolicy": "Always",
                        "resources": {"requests": {"cpu": "100m"}},
                    },
                ],
                "overhead": {"cpu": "10m"},
            }
        }
    )
    # containers 750m + sidecar 100m = 850m; the init container needs 2000m alone (the sidecar
    # starts after it); + 10m overhead.
    assert pod_requests(p) == {"cpu": 2010, "memory": 1024**3, "pods": 1}


def test_assigned_pods_are_accounted_and_released() -> None:
    cache = Cache()
    cache.upsert_node(node("n1"))
    cache.upsert_pod(pod("p1", "1", "n1"))
    cache.upsert_pod(pod("p2", "2", "n1"))
    assert requested(cache, "n1", "cpu") == 3000
    assert requested(cache, "n1", "pods") == 2
    cache.upsert_pod(pod("p2", "2", "n1", phase="Succeeded"))
    assert requested(cache, "n1", "cpu") == 1000
    cache.remove_pod("p1")
    assert requested(cache, "n1", "cpu") == 0


def test_assume_then_forget_restores_the_node() -> None:
    cache = Cache()
    cache.upsert_node(node("n1"))
    p = pod("p1", "3")
    cache.assume(p, "n1")
    assert requested(cache, "n1", "cpu") == 3000
    cache.forget("p1")
    assert requested(cache, "n1", "cpu") == 0


def test_watch_confirms_an_assumed_pod_without_double_counting() -> None:
    cache = Cache()
    cache.upsert_node(node("n1"))
    cache.assume(pod("p1", "3"), "n1")
    cache.finish_binding("p1", now=0.0)
    cache.upsert_pod(pod("p1", "3", "n1"))
    assert not cache.is_assumed("p1")
    assert requested(cache, "n1", "cpu") == 3000
    assert cache.expire_assumed(now=1e9) == []


def test_unconfirmed_assumption_expires() -> None:
    cache = Cache(assumed_ttl=30)
    cache.upsert_node(node("n1"))
    cache.assume(pod("p1", "3"), "n1")
    cache.finish_binding("p1", now=100.0)
    assert cache.expire_assumed(now=129.0) == []
    assert [p.key for p in cache.expire_assumed(now=130.0)] == ["default/p1"]
    assert requested(cache, "n1", "cpu") == 0


def test_pods_of_an_unknown_node_are_kept_until_the_node_arrives() -> None:
    cache = Cache()
    cache.upsert_pod(pod("p1", "1", "late"))
    snapshot = Snapshot(cache)
    assert snapshot.candidate_rows().size == 0
    cache.upsert_node(node("late"))
    assert Snapshot(cache).candidate_rows().size == 1
    assert requested(cache, "late", "cpu") == 1000


def test_label_masks_follow_label_changes() -> None:
    cache = Cache()
    cache.upsert_node(node("a", zone="z1"))
    cache.upsert_node(node("b", zone="z2"))
    rows = cache.table.row
    mask = cache.label_mask("zone", frozenset({"z1"}))
    assert mask[rows["a"]]
    assert not mask[rows["b"]]
    cache.upsert_node(node("b", zone="z1"))
    assert cache.label_mask("zone", frozenset({"z1"}))[rows["b"]]
    assert np.count_nonzero(cache.label_mask("zone", None)) == 2


def test_simulate_removal_returns_an_undo() -> None:
    cache = Cache()
    cache.upsert_node(node("n1"))
    victim = pod("v", "2", "n1")
    cache.upsert_pod(victim)
    undo = Snapshot(cache).simulate_removal([victim])
    assert requested(cache, "n1", "cpu") == 0
    undo()
    assert requested(cache, "n1", "cpu") == 2000


def test_a_nomination_holds_room_until_the_pod_is_assumed_and_a_lift_is_undone_exactly() -> None:
    cache = Cache()
    cache.upsert_node(node("a", cpu="4"))
    waiting = pod("preemptor", cpu="3")
    assert cache.nominate(waiting, "a")
    assert requested(cache, "a", "cpu") == 3000
    assert not cache.nominate(pod("ghost", cpu="1"), "nowhere")

    snapshot = Snapshot(cache)
    restore = snapshot.lift_nominations(lambda n: n.pod.uid == "preemptor")
    assert requested(cache, "a", "cpu") == 0
    cache.assume(waiting, "a")  # the nominated pod is placed while its nomination is lifted
    restore()
    assert requested(cache, "a", "cpu") == 3000  # counted once, as an assumed pod
    assert cache.nominated_node("preemptor") is None

    other = pod("other", cpu="1")
    cache.nominate(other, "a")
    cache.remove_pod("other")  # deleted while pending
    assert requested(cache, "a", "cpu") == 3000
    cache.nominate(other, "a")
    cache.remove_node("a")
    assert cache.nominated_node("other") is None


# ---- amounts outside the range the int64 table holds ------------------------------------------


def raw_pod(name: str, requests: dict[str, str], node_name: str | None = None) -> PodInfo:
    return PodInfo.of(
        Pod.model_validate(
            {
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {
                    "nodeName": node_name,
                    "containers": [{"name": "c", "resources": {"requests": requests}}],
                },
            }
        )
    )


@pytest.mark.parametrize(
    ("requests", "field"),
    [
        ({"memory": "10E"}, "spec.containers[0].resources.requests.memory: 10E is outside"),
        ({"cpu": "1e999"}, "spec.containers[0].resources.requests.cpu: 1e999 is outside"),
        ({"cpu": "-2"}, "spec.containers[0].resources.requests.cpu: -2 is outside"),
        ({"example.com/dev": "5E"}, "requests.example.com/dev: 5E is outside"),
    ],
    ids=["memory-10E", "cpu-1e999", "negative-cpu", "extended-5E"],
)
def test_an_out_of_range_request_is_clamped_and_named(requests: dict[str, str], field: str) -> None:
    p = raw_pod("p", requests)
    assert len(p.problems) == 1
    assert field in p.problems[0]
    assert "range koord-scheduler can account (0 to " in p.problems[0]
    assert all(0 <= amount <= MAX_UNITS for amount in p.requests.values())


def test_in_range_parts_whose_sum_is_out_of_range_are_named_too() -> None:
    half = str(from_int_units("memory", MAX_UNITS // 2 + 1))
    p = PodInfo.of(
        Pod.model_validate(
            {
                "spec": {
                    "containers": [
                        {"name": "a", "resources": {"requests": {"memory": half}}},
                        {"name": "b", "resources": {"requests": {"memory": half}}},
                    ]
                }
            }
        )
    )
    assert [m.split(":")[0] for m in p.problems] == ["spec (the sum of every memory request)"]
    assert p.requests["memory"] == MAX_UNITS


def test_a_pod_in_range_has_no_problems() -> None:
    p = raw_pod("p", {"cpu": "64", "memory": "1Pi"})
    assert p.problems == ()
    assert p.requests == {"cpu": 64000, "memory": 2**50, "pods": 1}


def test_two_bound_5E_pods_make_the_node_full_instead_of_wrapping_negative() -> None:
    cache = Cache()
    cache.upsert_node(node("n1", memory="8Gi"))
    cache.upsert_pod(raw_pod("a", {"memory": "5E"}, "n1"))
    cache.upsert_pod(raw_pod("b", {"memory": "5E"}, "n1"))
    assert requested(cache, "n1", "memory") == 2 * MAX_UNITS
    table = cache.table
    free = table.free(np.asarray([table.row["n1"]]), np.asarray([table.column["memory"]]))
    assert int(free[0, 0]) < 0  # nothing more fits
    cache.remove_pod("a")
    cache.remove_pod("b")
    assert requested(cache, "n1", "memory") == 0


def test_a_node_with_out_of_range_allocatable_is_no_candidate_but_keeps_its_pods() -> None:
    cache = Cache()
    cache.upsert_node(node("ok"))
    info = cache.upsert_node(node("huge", memory="10E"))
    assert info.problems == (
        "status.allocatable.memory: 10E is outside the range koord-scheduler can account (0 to 1Pi)",
    )
    assert Snapshot(cache).candidate_rows().tolist() == [cache.table.row["ok"]]
    cache.upsert_pod(pod("p", "1", "huge"))
    assert requested(cache, "huge", "cpu") == 1000
    cache.upsert_node(node("huge", memory="8Gi"))  # fixed: a candidate again
    assert cache.nodes["huge"].problems == ()
    assert Snapshot(cache).candidate_rows().size == 2


def test_requested_saturates_in_the_table_and_comes_back_exactly() -> None:
    table = NodeTable()
    row = table.add_node("n")
    many = 2 * REQUESTED_CAP // MAX_UNITS  # twice what the table can show
    for _ in range(many):
        table.add_requests(row, {"memory": MAX_UNITS})
    col = table.column["memory"]
    assert int(table.requested[row, col]) == REQUESTED_CAP
    assert table.requested_exact(row, "memory") == many * MAX_UNITS
    for _ in range(many - 1):
        table.add_requests(row, {"memory": MAX_UNITS}, sign=-1)
    assert int(table.requested[row, col]) == MAX_UNITS
    table.remove_node("n")
    assert table.add_node("m") == row
    assert table.requested_exact(row, "memory") == 0


def test_the_table_clamps_what_it_is_given_directly() -> None:
    table = NodeTable()
    row = table.add_node("n")
    table.set_allocatable(row, {"memory": 10**30, "cpu": -5})
    assert table.allocatable[row, table.column["memory"]] == MAX_UNITS
    assert table.allocatable[row, table.column["cpu"]] == 0
    _cols, amounts = table.request_vector({"memory": 10**30})
    assert amounts.tolist() == [MAX_UNITS]
