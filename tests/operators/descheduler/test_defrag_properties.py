"""GangDefragmentation end to end through the fakes on random small clusters: a plan never moves
more than maxPodsToMove pods, never one of the gang's priority or higher, every moved pod fits
outside the domain (room counted once), the domain then holds the gang; and when brute force
finds such moves, the plugin plans."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.core import Pod
from apis.extension.defrag import get_defrag_plan
from apis.podrequests import pod_requests
from operators.descheduler.defrag import GangDefragmentation, GangDefragmentationArgs
from operators.descheduler.defrag.domains import Domain
from operators.descheduler.defrag.planner import Candidate, Member, PlanProblem
from tests.examples import examples
from tests.operators.descheduler.defrag_fakes import (
    FakeDefragClient,
    gang_member,
    node,
    pod_group,
    rack_topology,
    running_pod,
)
from tests.operators.descheduler.fakes import NOW, FakeHandle
from tests.operators.descheduler.test_defrag_planner import _fits_all, brute_force

GANG_PRIORITY = 100
RACKS = {"a": ("a0", "a1"), "b": ("b0", "b1"), "c": ("c0",)}
CPU = 4000


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Pod], int, int, int]:
    pods = []
    for rack_nodes in RACKS.values():
        for n in rack_nodes:
            used = 0
            for i in range(draw(st.integers(1, 3))):
                cpu = draw(st.sampled_from([1000, 2000]))
                if used + cpu > CPU:
                    break
                used += cpu
                priority = draw(st.sampled_from([0, 50, 100, 200]))
                # One pod per ReplicaSet: every budget is 1, so none constrains.
                pods.append(
                    running_pod(
                        f"{n}-p{i}", n, cpu=f"{cpu}m", priority=priority, owner=("ReplicaSet", f"{n}-{i}")
                    )
                )
    members = draw(st.integers(1, 2))
    member_cpu = draw(st.sampled_from([3000, 4000]))
    return pods, members, member_cpu, draw(st.integers(1, 3))


def _run(pods: list[Pod], members: int, member_cpu: int, max_moves: int) -> FakeDefragClient:
    handle = FakeHandle(
        node_list=[node(n, rack) for rack, names in RACKS.items() for n in names], pods=pods, metrics={}
    )
    client = FakeDefragClient(
        groups=[pod_group("g", members)],
        unbound=[
            gang_member(f"g-{i}", "g", cpu=f"{member_cpu}m", priority=GANG_PRIORITY) for i in range(members)
        ],
        cnt=rack_topology(),
    )
    plugin = GangDefragmentation(
        GangDefragmentationArgs(max_pods_to_move=max_moves), handle, client, clock=lambda: NOW
    )
    asyncio.run(plugin.balance(handle.node_list))
    return client


def _cpu(pod: Pod) -> int:
    return pod_requests(pod.spec)["cpu"].milli_value()


def _free(pods: list[Pod]) -> dict[str, dict[str, int]]:
    free = {n: {"cpu": CPU} for names in RACKS.values() for n in names}
    for p in pods:
        free[p.spec.node_name or ""]["cpu"] -= _cpu(p)
    return free


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_plans_are_valid_and_found_whenever_brute_force_finds_one(
    case: tuple[list[Pod], int, int, int],
) -> None:
    pods, members, member_cpu, max_moves = case
    client = _run(pods, members, member_cpu, max_moves)
    free = _free(pods)
    everywhere = frozenset(free)
    gang = [Member(f"g-{i}", {"cpu": member_cpu}, everywhere) for i in range(members)]
    domains = [Domain("RackLayer", rack, names) for rack, names in RACKS.items()]
    already = any(
        _fits_all(
            [(m.key, m.request, m.nodes & set(d.nodes)) for m in gang], {n: dict(free[n]) for n in d.nodes}
        )
        for d in domains
    )
    candidates = [
        Candidate(
            p.metadata.name or "",
            p.spec.node_name or "",
            {"cpu": free_cpu},
            p.spec.priority or 0,
            None,
            everywhere,
        )
        for p in pods
        if (p.spec.priority or 0) < GANG_PRIORITY
        for free_cpu in [_cpu(p)]
    ]
    expected = None if already else brute_force(PlanProblem(free, candidates, gang, {}, max_moves), domains)
    plan = get_defrag_plan(client.pod_group("g").metadata.annotations)
    if expected is None:
        assert plan is None
        return
    assert plan is not None
    assert len(plan.moves) == expected[0] <= max_moves
    by_name = {p.metadata.name: p for p in pods}
    assert all(
        m.priority < GANG_PRIORITY and by_name[m.name].spec.node_name in plan.nodes for m in plan.moves
    )
    inside = set(plan.nodes)
    outside = {n: dict(r) for n, r in free.items() if n not in inside}
    moved = [c for c in candidates if c.key in {m.name for m in plan.moves}]
    assert _fits_all([(c.key, c.request, everywhere - inside) for c in moved], outside)
    room = {n: dict(free[n]) for n in inside}
    for c in moved:
        room[c.node]["cpu"] += c.request["cpu"]
    assert _fits_all([(m.key, m.request, m.nodes & inside) for m in gang], room)
