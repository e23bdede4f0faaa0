"""PrioritySort, NodeName and NodeUnschedulable."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent
from scheduler.plugins import node_name, node_unschedulable, queue_sort
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import filter_reasons


def test_priority_sort_orders_like_koordinator() -> None:
    plugin = queue_sort.new(None, handle=None)  # type: ignore[arg-type]
    pods = [
        make_pod("low").priority(10).created(1).info(),
        make_pod("high-late").priority(100).created(50).info(),
        make_pod("high-sub").priority(100).created(60).label("koordinator.sh/priority", "5").info(),
        make_pod("high-early").priority(100).created(40).info(),
        make_pod("b-tie").priority(100).created(50).namespace("zz").info(),
        make_pod("none").info(),
    ]
    ordered = [p.name for p in sorted(pods, key=plugin.sort_key)]
    assert ordered == ["high-sub", "high-early", "high-late", "b-tie", "low", "none"]


def test_node_name() -> None:
    snapshot = make_snapshot([make_node(n).alloc(cpu="1").obj() for n in ("a", "b", "c")])
    plugin = node_name.new(None, handle=None)  # type: ignore[arg-type]
    reason = "node(s) didn't match the requested node name"
    assert filter_reasons(plugin, make_pod("p").on("b").info(), snapshot) == {
        "a": [reason],
        "b": [],
        "c": [reason],
    }
    assert filter_reasons(plugin, make_pod("p").on("gone").info(), snapshot) == {n: [reason] for n in "abc"}
    assert filter_reasons(plugin, make_pod("p").info(), snapshot) == {"a": [], "b": [], "c": []}
    rows = snapshot.candidate_rows()
    result = plugin.filter(CycleState(), make_pod("p").on("b").info(), snapshot, rows)
    assert result.unresolvable is not None
    assert result.unresolvable.tolist() == [True, False, True]


UNSCHEDULABLE = "node(s) were unschedulable"


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod("p"), {"open": [], "cordoned": [UNSCHEDULABLE]}, id="plain-pod"),
        pytest.param(
            make_pod("p").toleration(
                "node.kubernetes.io/unschedulable", effect="NoSchedule", operator="Exists"
            ),
            {"open": [], "cordoned": []},
            id="tolerates-unschedulable-taint",
        ),
        pytest.param(
            make_pod("p").toleration(operator="Exists"),
            {"open": [], "cordoned": []},
            id="tolerates-everything",
        ),
        pytest.param(
            make_pod("p").toleration(
                "node.kubernetes.io/unschedulable", effect="NoExecute", operator="Exists"
            ),
            {"open": [], "cordoned": [UNSCHEDULABLE]},
            id="wrong-effect",
        ),
    ],
)
def test_node_unschedulable(pod: Any, expected: dict[str, list[str]]) -> None:
    snapshot = make_snapshot(
        [make_node("open").alloc(cpu="1").obj(), make_node("cordoned").alloc(cpu="1").unschedulable().obj()]
    )
    assert filter_reasons(node_unschedulable.new(None, handle=None), pod.info(), snapshot) == expected  # type: ignore[arg-type]


def test_events() -> None:
    assert node_name.new(None, None).events_to_register() == ClusterEvent.NODE_ADD  # type: ignore[arg-type]
    assert (
        node_unschedulable.new(None, None).events_to_register()
        == ClusterEvent.NODE_ADD | ClusterEvent.NODE_UPDATE
    )  # type: ignore[arg-type]


def test_scheduling_gates_keep_a_gated_pod_out_of_the_queue() -> None:
    from apis.core import Pod
    from scheduler.cache.pod_info import PodInfo
    from scheduler.framework.status import Code
    from scheduler.plugins.scheduling_gates import SchedulingGates

    gated = Pod.model_validate(
        {"metadata": {"name": "g"}, "spec": {"schedulingGates": [{"name": "b"}, {"name": "a"}]}}
    )
    status = SchedulingGates().pre_enqueue(PodInfo.of(gated))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("waiting for scheduling gates: [a, b]",)
    assert SchedulingGates().pre_enqueue(PodInfo.of(Pod.model_validate({"metadata": {"name": "free"}}))).ok
