"""``koordctl explain`` on a pending gang member shows koord-descheduler's defragmentation plan
when the member's PodGroup carries it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from apis.client.backend import PODGROUPS, PODS
from apis.extension.defrag import ANNOTATION_DEFRAG_PLAN, DefragMove, DefragPlan
from scheduler.app import SchedulerApp
from scheduler.backend.memory import MemoryBackend
from tests.scheduler.test_gang_scheduling import cluster, member, pod_group

__all__ = ["cluster"]

PLAN = DefragPlan(
    id="abc123",
    gang="default/big",
    layer="BlockLayer",
    domain="b1",
    nodes=["n0", "n1"],
    moves=[
        DefragMove(
            namespace="default", name="web-1", uid="u1", node="n0", priority=0, reservation="defrag-abc123-0"
        )
    ],
    created=datetime(2026, 11, 25, 12, 0, tzinfo=UTC),
)


async def _explanation_notes(app: SchedulerApp, name: str) -> list[str]:
    # Bounded by the wall clock, not a count of sleeps: on a loaded machine 150 short sleeps
    # ended before the scheduler's first cycle had explained the pod.
    deadline = asyncio.get_running_loop().time() + 15.0
    while asyncio.get_running_loop().time() < deadline:
        # The first explanation may be the queue's "waiting" for the gang's other members (they
        # arrive one by one): only the scheduling cycle's own failure carries the plan's note.
        explanation = app.explanations.get("default", name)
        if explanation is not None and explanation.result == "unschedulable":
            return list(explanation.notes)
        await asyncio.sleep(0.02)
    raise AssertionError(f"no explanation for {name}")


async def test_a_pending_member_of_a_gang_with_a_plan_is_explained_with_it(
    cluster: tuple[MemoryBackend, SchedulerApp],
) -> None:
    backend, app = cluster
    annotations = {ANNOTATION_DEFRAG_PLAN: PLAN.model_dump_json(by_alias=True)}
    backend.apply(PODGROUPS, pod_group("big", 4, annotations=annotations, timeout=1))
    for i in range(4):
        backend.apply(PODS, member(f"b{i}", group="big", cpu="3"))  # 3 nodes x 4 CPU: only 3 fit
    notes = await _explanation_notes(app, "b0")
    assert (
        "defragmentation plan abc123: moving 1 pod(s) frees BlockLayer b1 for the gang: "
        "default/web-1 (on n0); reserving their new places"
    ) in notes


async def test_no_note_without_a_plan(cluster: tuple[MemoryBackend, SchedulerApp]) -> None:
    backend, app = cluster
    backend.apply(PODGROUPS, pod_group("big", 4, timeout=1))
    for i in range(4):
        backend.apply(PODS, member(f"b{i}", group="big", cpu="3"))
    notes = await _explanation_notes(app, "b0")
    assert not any(n.startswith("defragmentation plan") for n in notes)
