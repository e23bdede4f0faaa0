"""The cache accounts pods on nodes exactly, and assumed pods are released when binding fails."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from apis.core import ContainerImage, Node, Pod
from apis.quantity import Quantity
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


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []

    def pod_added(self, pod: PodInfo, row: int) -> None:
        self.seen.append(("added", pod.pod.spec.node_name or "", row))

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        self.seen.append(("removed", pod.pod.spec.node_name or "", row))


def test_a_new_version_occupying_the_same_swaps_the_pod_and_tells_observers_as_a_release_and_take() -> None:
    """Confirming an assumed pod (or a status update of a bound one) takes the short way: the node's
    sums stay, the cache holds the new PodInfo, and observers see the old version removed and the
    new one added, as they did when the pod was released and taken again."""
    cache = Cache()
    cache.upsert_node(node("n1"))
    recorder = Recorder()
    cache.observe(recorder)
    cache.assume(pod("p1", "3"), "n1")
    version = cache.version
    bound = pod("p1", "3", "n1")
    cache.upsert_pod(bound)
    row = cache.table.row["n1"]
    assert recorder.seen == [("added", "", row), ("removed", "", row), ("added", "n1", row)]
    assert cache.pod("p1") is bound
    assert cache.version > version
    assert requested(cache, "n1", "cpu") == 3000
    # A version that occupies something else still releases and takes.
    cache.upsert_pod(pod("p1", "2", "n1"))
    assert requested(cache, "n1", "cpu") == 2000
    cache.upsert_pod(pod("p1", "2", "n1", phase="Succeeded"))
    assert requested(cache, "n1", "cpu") == 0


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


def test_pods_requesting_alike_get_equal_figures_each_its_own_and_problems_every_time() -> None:
    # Requests are computed once per shape of requests (start-up decodes tens of thousands of
    # replicas): a replica written differently gets the same figures, each in a dict of its own, and
    # an out-of-range pod is checked (and its problem named) every time.
    first, second = (
        raw_pod("a", {"cpu": "1", "memory": "1Gi"}),
        raw_pod("b", {"cpu": "1000m", "memory": "1024Mi"}),
    )
    assert first.requests == second.requests == {"cpu": 1000, "memory": 2**30, "pods": 1}
    assert first.non_zero == second.non_zero == (1000, 2**30)
    assert first.requests is not second.requests
    third = raw_pod("c", {"cpu": "1"})
    assert third.requests == {"cpu": 1000, "pods": 1}
    assert third.non_zero == (1000, 200 * 1024 * 1024)
    for name in ("d", "e"):
        bad = raw_pod(name, {"memory": "10E"})
        assert len(bad.problems) == 1
        assert "memory: 10E is outside" in bad.problems[0]
    sidecar = PodInfo.of(
        Pod.model_validate(
            {
                "spec": {
                    "initContainers": [
                        {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
                    ],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                }
            }
        )
    )
    plain_init = PodInfo.of(
        Pod.model_validate(
            {
                "spec": {
                    "initContainers": [{"name": "s", "resources": {"requests": {"cpu": "1"}}}],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                }
            }
        )
    )
    assert sidecar.requests["cpu"] == 2000  # a sidecar runs beside the containers
    assert plain_init.requests["cpu"] == 1000  # an init container runs before them


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


# ---- what NodeInfo keeps beside requests: non-zero requests, host ports, images ----------------

MI = 1024 * 1024


def spec_pod(name: str, spec: Mapping[str, object], node_name: str | None = None) -> PodInfo:
    return PodInfo.of(
        Pod.model_validate(
            {
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"nodeName": node_name, **spec},
                "status": {"phase": "Running"},
            }
        )
    )


def non_zero(cache: Cache, node_name: str) -> tuple[int, int]:
    row = cache.table.row[node_name]
    return int(cache.table.non_zero[row, 0]), int(cache.table.non_zero[row, 1])


def test_non_zero_requests_count_request_less_containers_as_100m_and_200mi() -> None:
    cache = Cache()
    cache.upsert_node(node("n1"))
    cache.upsert_pod(spec_pod("empty", {"containers": [{"name": "a"}, {"name": "b"}]}, "n1"))
    cache.upsert_pod(pod("real", "1", "n1"))  # cpu 1, memory 1Gi
    assert requested(cache, "n1", "cpu") == 1000  # Filter's view: real requests only
    assert non_zero(cache, "n1") == (2 * 100 + 1000, 2 * 200 * MI + 1024 * MI)
    undo = Snapshot(cache).simulate_removal([cache.pod("empty")])  # type: ignore[list-item]
    assert non_zero(cache, "n1") == (1000, 1024 * MI)
    undo()
    cache.remove_pod("empty")
    cache.remove_pod("real")
    assert non_zero(cache, "n1") == (0, 0)


def test_a_nomination_holds_requests_but_is_not_scored_as_non_zero() -> None:
    cache = Cache()
    cache.upsert_node(node("n1"))
    cache.nominate(pod("waiting", "2"), "n1")
    assert requested(cache, "n1", "cpu") == 2000
    assert non_zero(cache, "n1") == (0, 0)  # kube-scheduler adds nominated pods for Filter only


def test_non_zero_sums_saturate_and_come_back_exactly() -> None:
    table = NodeTable()
    row = table.add_node("n")
    for _ in range(5000):
        table.add_non_zero(row, (MAX_UNITS, 1))
    assert int(table.non_zero[row, 0]) == REQUESTED_CAP
    assert table.non_zero_exact(row, 0) == 5000 * MAX_UNITS
    for _ in range(5000):
        table.add_non_zero(row, (MAX_UNITS, 1), sign=-1)
    assert table.non_zero[row].tolist() == [0, 0]


def ported(
    name: str, port: Mapping[str, object], node_name: str | None = None, *, sidecar: bool = False
) -> PodInfo:
    if sidecar:
        spec = {
            "containers": [{"name": "c"}],
            "initContainers": [{"name": "s", "restartPolicy": "Always", "ports": [port]}],
        }
        return spec_pod(name, spec, node_name)
    return spec_pod(name, {"containers": [{"name": "c", "ports": [port]}]}, node_name)


def test_host_ports_follow_get_host_ports() -> None:
    p = spec_pod(
        "p",
        {
            "containers": [
                {
                    "name": "c",
                    "ports": [
                        {"containerPort": 80, "hostPort": 8080},
                        {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                        {"containerPort": 9000},  # no hostPort: no node port
                        {"containerPort": 9001, "hostPort": 0},
                    ],
                }
            ],
            "initContainers": [
                {"name": "init", "ports": [{"containerPort": 1, "hostPort": 1111}]},  # runs to completion
                {
                    "name": "side",
                    "restartPolicy": "Always",
                    "ports": [{"containerPort": 2, "hostPort": 2222}],
                },
            ],
        },
    )
    assert p.host_ports == (
        ("0.0.0.0", "TCP", 2222),
        ("0.0.0.0", "TCP", 8080),
        ("10.0.0.1", "UDP", 53),
    )


def test_host_ports_are_held_while_assigned_nominated_or_assumed() -> None:
    cache = Cache()
    cache.upsert_node(node("n1"))
    cache.upsert_node(node("n2"))
    rows = cache.table.row
    http = {"containerPort": 80, "hostPort": 80}
    wanted = [("0.0.0.0", "TCP", 80)]

    def holders() -> list[str]:
        mask = Snapshot(cache).host_port_conflicts(wanted)
        return sorted(name for name, row in rows.items() if mask[row])

    cache.upsert_pod(ported("a", http, "n1"))
    assert holders() == ["n1"]
    assumed = ported("b", http)
    cache.assume(assumed, "n2")
    assert holders() == ["n1", "n2"]
    cache.forget("b")
    assert holders() == ["n1"]
    waiting = ported("c", http, sidecar=True)
    cache.nominate(waiting, "n2")
    assert holders() == ["n1", "n2"]
    restore = Snapshot(cache).lift_nominations(lambda n: n.pod.uid == "c")
    assert holders() == ["n1"]
    restore()
    assert holders() == ["n1", "n2"]
    cache.clear_nomination("c")
    undo = Snapshot(cache).simulate_removal([cache.pod("a")])  # type: ignore[list-item]
    assert holders() == []
    undo()
    assert holders() == ["n1"]
    cache.remove_pod("a")
    assert holders() == []


def imaged(name: str, *images: tuple[list[str], int]) -> Node:
    n = node(name)
    n.status.images = [ContainerImage(names=names, size_bytes=size) for names, size in images]
    return n


def test_images_are_indexed_by_name_with_the_first_reported_size() -> None:
    cache = Cache()
    cache.upsert_node(imaged("a", (["nginx:latest", "nginx:1.27"], 100)))
    cache.upsert_node(imaged("b", (["nginx:latest"], 120), (["redis:7"], 50)))
    snapshot = Snapshot(cache)
    rows = cache.table.row

    def held(snapshot: Snapshot, name: str) -> set[int]:
        return set(snapshot.image_rows(name).tolist())

    assert held(snapshot, "nginx:latest") == {rows["a"], rows["b"]}
    assert snapshot.image_size("nginx:latest") == 100
    assert held(snapshot, "nginx:1.27") == {rows["a"]}
    cache.upsert_node(imaged("a", (["redis:7"], 50)))  # the kubelet reports a new image list
    assert held(snapshot, "nginx:latest") == {rows["b"]}
    assert held(snapshot, "nginx:1.27") == set()
    assert snapshot.image_size("nginx:1.27") == 0
    cache.remove_node("b")
    assert held(snapshot, "nginx:latest") == set()
    assert held(snapshot, "redis:7") == {rows["a"]}


def prioritised(name: str, priority: int, node_name: str | None = None) -> PodInfo:
    info = pod(name, "1", node_name)
    info.priority = priority
    return info


def test_the_cache_knows_whether_any_node_holds_a_pod_below_a_priority() -> None:
    """What preemption asks before dry-running nodes: kept as pods are bound, assumed, swapped,
    forgotten and removed; a pod withdrawn by a simulated removal still counts (it is still on
    its node, where preemption's walk would find it)."""
    cache = Cache()
    cache.upsert_node(node("n1"))
    assert not cache.has_pod_below(0)
    low = prioritised("low", 5, "n1")
    cache.upsert_pod(low)
    cache.assume(prioritised("high", 10), "n1")
    assert cache.has_pod_below(6)
    assert not cache.has_pod_below(5)
    undo = Snapshot(cache).simulate_removal([low])
    assert cache.has_pod_below(6)
    undo()
    cache.remove_pod("low")
    assert not cache.has_pod_below(10)
    assert cache.has_pod_below(11)
    cache.upsert_pod(prioritised("high", 3, "n1"))  # confirmed in place, as a new version
    assert cache.has_pod_below(4)
    assert not cache.has_pod_below(3)
    cache.upsert_pod(pod("high", "1", "n1", phase="Succeeded"))
    assert not cache.has_pod_below(1_000_000)
    cache.assume(prioritised("assumed", -7), "n1")
    assert cache.has_pod_below(0)
    cache.forget("assumed")
    assert not cache.has_pod_below(1_000_000)


def test_a_pod_sharing_containers_gets_their_figures_and_its_own_overhead_counted() -> None:
    # Figures are kept by the identity of the containers, init containers and overhead: a later
    # version of a pod (bound: the same container objects) reads them, each in a dict of its own,
    # and a pod that shares only the containers has its overhead counted.
    spec = {
        "containers": [
            {
                "name": "c",
                "resources": {"requests": {"cpu": "1"}},
                "ports": [{"containerPort": 80, "hostPort": 8080}],
            }
        ]
    }
    first = PodInfo.of(Pod.model_validate({"metadata": {"name": "a"}, "spec": spec}))
    bound = first.pod.model_copy(update={"spec": first.pod.spec.model_copy(update={"node_name": "n1"})})
    again = PodInfo.of(bound)
    assert again.requests == first.requests == {"cpu": 1000, "pods": 1}
    assert again.requests is not first.requests
    assert again.host_ports == first.host_ports == (("0.0.0.0", "TCP", 8080),)
    assert again.non_zero == first.non_zero
    with_overhead = first.pod.model_copy(
        update={"spec": first.pod.spec.model_copy(update={"overhead": {"cpu": Quantity.parse("500m")}})}
    )
    assert PodInfo.of(with_overhead).requests == {"cpu": 1500, "pods": 1}
