"""GangDefragmentation through the descheduler framework's fakes: a waiting MustGather gang gets a
plan (Reservations, a PodGroup annotation and event), pods are moved only once every Reservation
is Available and the gang still needs exactly those moves, and every abort path deletes the
plan's Reservations and says why."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from apis.core import Pod
from apis.extension.defrag import ANNOTATION_DEFRAG_PLAN, LABEL_DEFRAG_PLAN, get_defrag_plan
from apis.extension.reservation import LABEL_RESERVATION_ORDER
from operators.descheduler.config import MIGRATION_CONTROLLER
from operators.descheduler.defrag import GangDefragmentation, GangDefragmentationArgs
from operators.descheduler.defrag import plugin as defrag_plugin
from operators.descheduler.defrag.plugin import ABORTED, DONE, DRY_RUN, EVICTING, PLANNED
from operators.descheduler.registry import REGISTRY
from tests.operators.descheduler.defrag_fakes import (
    FakeDefragClient,
    gang_member,
    node,
    pod_group,
    rack_topology,
    running_pod,
)
from tests.operators.descheduler.fakes import NOW, FakeEvictor, FakeHandle


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def cluster(
    pods: list[Pod] | None = None, evictor: FakeEvictor | None = None
) -> tuple[FakeHandle, FakeDefragClient]:
    """Racks a (a0, a1), b (b0, b1) and c (c0) of 4-CPU nodes; a 1-CPU web pod on every node of
    a and b; a gang of two 4-CPU members that must gather in one rack: no rack holds it."""
    nodes = [node("a0", "a"), node("a1", "a"), node("b0", "b"), node("b1", "b"), node("c0", "c")]
    if pods is None:
        pods = [running_pod(f"{n}p", n) for n in ("a0", "a1", "b0", "b1")]
    handle = FakeHandle(node_list=nodes, pods=pods, metrics={}, fake_evictor=evictor or FakeEvictor())
    client = FakeDefragClient(
        groups=[pod_group("train", 2)],
        unbound=[gang_member("train-0", "train"), gang_member("train-1", "train")],
        cnt=rack_topology(),
    )
    return handle, client


def plugin(
    handle: FakeHandle, client: FakeDefragClient, clock: Clock | None = None, **args: object
) -> GangDefragmentation:
    return GangDefragmentation(
        GangDefragmentationArgs.model_validate(args), handle, client, clock=clock or Clock()
    )


async def test_plans_then_evicts_only_once_every_reservation_is_available() -> None:
    handle, client = cluster()
    defrag = plugin(handle, client)
    await defrag.balance(handle.node_list)
    # Two moves free rack a (rack b is as good; a wins by name); each gets a Reservation first.
    assert sorted(client.created) == [f"defrag-{defrag.plans['default/train'].id}-{i}" for i in range(2)]
    plan = get_defrag_plan(client.pod_group("train").metadata.annotations)
    assert plan is not None
    assert (plan.layer, plan.domain, plan.phase) == ("RackLayer", "a", "Reserving")
    assert [m.name for m in plan.moves] == ["a0p", "a1p"]
    assert client.reasons == [PLANNED]
    assert "moving 2 pod(s) frees RackLayer a" in client.events[0][2]
    reservation = client.created[plan.moves[0].reservation]
    assert reservation.metadata.labels is not None
    assert reservation.metadata.labels[LABEL_DEFRAG_PLAN] == plan.id
    assert reservation.spec is not None
    assert reservation.spec.allocate_once
    assert reservation.spec.ttl == "10m0s"
    owner = reservation.spec.owners[0].controller
    assert owner is not None
    assert (owner.kind, owner.name, owner.namespace) == ("ReplicaSet", "web", "default")
    terms = reservation.spec.template["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    # One requirement per node: Kubernetes allows a metadata.name field requirement one value only.
    assert terms == [
        {
            "matchFields": [
                {"key": "metadata.name", "operator": "NotIn", "values": ["a0"]},
                {"key": "metadata.name", "operator": "NotIn", "values": ["a1"]},
            ]
        }
    ]
    assert "nodeName" not in reservation.spec.template["spec"]
    # Any replacement of the workload matches every reservation of the plan: the order label makes
    # the first replacement take the first move's reservation.
    orders = [
        int((client.created[m.reservation].metadata.labels or {})[LABEL_RESERVATION_ORDER])
        for m in plan.moves
    ]
    assert orders == sorted(orders)
    assert len(set(orders)) == len(orders)

    await defrag.balance(handle.node_list)  # still Pending
    client.place(plan.moves[0].reservation, "c0")
    await defrag.balance(handle.node_list)  # one of two
    assert handle.fake_evictor.evicted == []

    client.place(plan.moves[1].reservation, "c0")
    await defrag.balance(handle.node_list)
    assert handle.fake_evictor.names == ["a0p", "a1p"]
    options = [o for _, o in handle.fake_evictor.evicted]
    assert [o.reservation for o in options] == [m.reservation for m in plan.moves]
    assert {o.plugin_name for o in options} == {"GangDefragmentation"}
    assert client.reasons == [PLANNED, EVICTING]
    evicting = get_defrag_plan(client.pod_group("train").metadata.annotations)
    assert evicting is not None
    assert evicting.phase == "Evicting"

    await defrag.balance(handle.node_list)  # asked once only
    assert len(handle.fake_evictor.evicted) == 2
    # The gang binds: the plan is done, its (consumed) Reservations are left to the PMJs.
    handle.pods = [running_pod(f"train-{i}", f"a{i}", cpu="4", priority=100, owner=None) for i in range(2)]
    for p in handle.pods:
        assert p.metadata.labels is not None
        p.metadata.labels["pod-group.scheduling.sigs.k8s.io"] = "train"
    client.unbound = []
    await defrag.balance(handle.node_list)
    assert client.reasons[-1] == DONE
    assert client.deleted == []
    assert ANNOTATION_DEFRAG_PLAN not in (client.pod_group("train").metadata.annotations or {})
    assert defrag.plans == {}


async def test_a_gang_bound_meanwhile_aborts_and_deletes_the_reservations() -> None:
    handle, client = cluster()
    defrag = plugin(handle, client)
    await defrag.balance(handle.node_list)
    names = sorted(client.created)
    bound = [running_pod(f"train-{i}", "c0", cpu="0", priority=100, owner=None) for i in range(2)]
    for p in bound:
        assert p.metadata.labels is not None
        p.metadata.labels["pod-group.scheduling.sigs.k8s.io"] = "train"
    handle.pods += bound
    client.unbound = []
    await defrag.balance(handle.node_list)
    assert sorted(client.deleted) == names
    assert client.reasons == [PLANNED, ABORTED]
    assert "no longer needs it" in client.events[-1][2]
    assert ANNOTATION_DEFRAG_PLAN not in (client.pod_group("train").metadata.annotations or {})
    assert handle.fake_evictor.evicted == []


async def test_a_plan_past_its_timeout_is_dropped() -> None:
    handle, client = cluster()
    clock = Clock()
    defrag = plugin(handle, client, clock, planTimeout="5m")
    await defrag.balance(handle.node_list)
    names = sorted(client.created)
    clock.now += timedelta(minutes=6)
    for name in names:
        client.place(name, "c0")
    await defrag.balance(handle.node_list)
    assert handle.fake_evictor.evicted == []
    assert set(names) <= set(client.deleted)
    assert ABORTED in client.reasons
    assert any("timed out after 5m" in message for _, _, message, _ in client.events)


async def test_a_failed_reservation_aborts_the_plan() -> None:
    handle, client = cluster()
    defrag = plugin(handle, client)
    await defrag.balance(handle.node_list)
    first, second = sorted(client.created)
    client.place(first, "c0")
    client.place(second, "c0", phase="Failed")
    await defrag.balance(handle.node_list)
    assert handle.fake_evictor.evicted == []
    assert {first, second} <= set(client.deleted)
    assert any(f"reservation {second} is Failed" in message for _, _, message, _ in client.events)


async def test_a_gang_that_fits_without_moves_by_then_is_not_moved_for() -> None:
    handle, client = cluster()
    defrag = plugin(handle, client)
    await defrag.balance(handle.node_list)
    for name in sorted(client.created):
        client.place(name, "c0")
    handle.pods = [p for p in handle.pods if not (p.spec.node_name or "").startswith("b")]  # rack b emptied
    await defrag.balance(handle.node_list)
    assert handle.fake_evictor.evicted == []
    assert any("fits in RackLayer b without moves" in message for _, _, message, _ in client.events)


async def test_a_pod_the_evictor_refuses_aborts_before_any_eviction() -> None:
    handle, client = cluster()
    defrag = plugin(handle, client)
    await defrag.balance(handle.node_list)
    for name in sorted(client.created):
        client.place(name, "c0")
    handle.fake_evictor.unmovable = {"a1p"}
    await defrag.balance(handle.node_list)
    assert handle.fake_evictor.evicted == []
    assert any("refuses to move a1p" in message for _, _, message, _ in client.events)


async def test_a_restarted_plugin_picks_its_plan_up_from_the_reservations_and_the_pod_group() -> None:
    handle, client = cluster()
    await plugin(handle, client).balance(handle.node_list)
    names = sorted(client.created)
    for name in names:
        client.place(name, "c0")
    restarted = plugin(handle, client)
    await restarted.balance(handle.node_list)
    assert handle.fake_evictor.names == ["a0p", "a1p"]
    assert sorted(client.created) == names  # no second plan


async def test_a_restart_without_the_pod_group_annotation_rebuilds_from_the_reservations() -> None:
    handle, client = cluster()
    await plugin(handle, client).balance(handle.node_list)
    client.pod_group("train").metadata.annotations = {
        k: v
        for k, v in (client.pod_group("train").metadata.annotations or {}).items()
        if k != ANNOTATION_DEFRAG_PLAN
    }
    names = sorted(client.created)
    restarted = plugin(handle, client)
    await restarted.balance(handle.node_list)
    assert sorted(client.created) == names
    assert "default/train" in restarted.plans


async def test_orphaned_reservations_of_a_gone_gang_are_deleted_on_restart() -> None:
    handle, client = cluster()
    await plugin(handle, client).balance(handle.node_list)
    names = sorted(client.created)
    client.groups = []
    client.unbound = []
    await plugin(handle, client).balance(handle.node_list)
    assert sorted(client.deleted) == names


@pytest.mark.parametrize(
    ("pods", "why"),
    [
        (
            [running_pod(f"{n}p", n, priority=100) for n in ("a0", "a1", "b0", "b1")],
            "same priority as the gang",
        ),
        (
            [running_pod(f"{n}p", n, owner=("DaemonSet", "agent")) for n in ("a0", "a1", "b0", "b1")],
            "DaemonSet",
        ),
        ([running_pod(f"{n}p", n, owner=None) for n in ("a0", "a1", "b0", "b1")], "bare pods"),
        (
            [running_pod(f"{n}p", n, priority=2_000_000_000) for n in ("a0", "a1", "b0", "b1")],
            "system-critical",
        ),
        (
            [running_pod(f"{n}p", n, priority=1000) for n in ("a0", "a1", "b0", "b1")],
            "higher priority than the gang",
        ),
    ],
)
async def test_pods_it_may_not_move_give_no_plan(pods: list[Pod], why: str) -> None:
    handle, client = cluster(pods)
    await plugin(handle, client).balance(handle.node_list)
    assert client.created == {}, why
    assert client.events == [], why


async def test_a_budget_already_spent_by_an_unready_pod_gives_no_plan() -> None:
    # web has 4 pods, so 2 may be unavailable; two are not Ready: nothing more may move.
    pods = [running_pod(f"{n}p", n, ready=n.endswith("0")) for n in ("a0", "a1", "b0", "b1")]
    pods += [running_pod(f"{n}q", "c0", cpu="0", ready=False) for n in ("x", "y")]
    handle, client = cluster(pods)
    await plugin(handle, client).balance(handle.node_list)
    assert client.created == {}


async def test_bare_pods_move_when_allowed() -> None:
    handle, client = cluster([running_pod(f"{n}p", n, owner=None) for n in ("a0", "a1", "b0", "b1")])
    await plugin(handle, client, evictBarePods=True).balance(handle.node_list)
    assert len(client.created) == 2
    owner = next(iter(client.created.values())).spec
    assert owner is not None
    assert owner.owners[0].object is not None


async def test_at_most_max_pods_to_move() -> None:
    handle, client = cluster()
    await plugin(handle, client, maxPodsToMove=1).balance(handle.node_list)
    assert client.created == {}


async def test_a_gang_waiting_less_than_the_threshold_is_left_alone() -> None:
    handle, client = cluster()
    client.unbound = [gang_member("train-0", "train", waited=30), gang_member("train-1", "train", waited=30)]
    await plugin(handle, client).balance(handle.node_list)
    assert client.created == {}
    await plugin(handle, client, waitThreshold="20s").balance(handle.node_list)
    assert len(client.created) == 2


async def test_the_wait_counts_from_the_first_round_it_was_seen_though_the_condition_is_rewritten() -> None:
    handle, client = cluster()
    clock = Clock()
    client.unbound = [gang_member("train-0", "train", waited=30), gang_member("train-1", "train", waited=30)]
    defrag = plugin(handle, client, clock)
    await defrag.balance(handle.node_list)
    assert client.created == {}
    # 40 s later (70 s of waiting) koord-scheduler has just written the condition again: its
    # lastTransitionTime is NOW + 35 s, 5 s before the clock.
    clock.now += timedelta(seconds=40)
    client.unbound = [gang_member(f"train-{i}", "train", waited=-35) for i in range(2)]
    await defrag.balance(handle.node_list)
    assert len(client.created) == 2


async def test_dry_run_only_reports_once() -> None:
    handle, client = cluster()
    defrag = plugin(handle, client, dryRun=True)
    await defrag.balance(handle.node_list)
    await defrag.balance(handle.node_list)
    assert client.created == {}
    assert client.reasons == [DRY_RUN]
    assert client.events[0][2].startswith("dry run: defragmentation plan")
    assert handle.fake_evictor.evicted == []


async def test_without_must_gather_one_node_is_freed() -> None:
    handle, client = cluster()
    client.groups = [pod_group("train", 1, gather=None)]
    client.unbound = [gang_member("train-0", "train", cpu="4")]
    # c0 is empty: the gang fits there already.
    await plugin(handle, client).balance(handle.node_list)
    assert client.created == {}
    handle.pods.append(running_pod("c0p", "c0", cpu="2", priority=50, owner=("ReplicaSet", "other")))
    await plugin(handle, client).balance(handle.node_list)
    (reservation,) = client.created.values()
    plan = get_defrag_plan(reservation.metadata.annotations)
    assert plan is not None
    # The lowest priority goes: a web pod (0) rather than c0p (50).
    assert (plan.layer, plan.domain, [m.name for m in plan.moves]) == ("NodeTopologyLayer", "a0", ["a0p"])


def test_the_registry_builds_it_like_any_plugin_with_the_api_from_the_handle() -> None:
    handle, client = cluster()
    handle.fake_objects = client
    factory = REGISTRY[defrag_plugin.NAME]
    assert factory.new is not None
    built = factory.new(GangDefragmentationArgs(), handle)
    assert isinstance(built, GangDefragmentation)
    assert built.client is client
    assert [name for name, f in REGISTRY.items() if f.new is None] == [MIGRATION_CONTROLLER]
