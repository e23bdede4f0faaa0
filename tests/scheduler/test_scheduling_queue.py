"""The scheduling queue orders, gates, backs off and moves pods as kube-scheduler's does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.core import Pod
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.status import Code, Status
from scheduler.queue.scheduling_queue import QueueCounts, SchedulingQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, priority: int = 0, created: str = "2026-01-01T00:00:00Z") -> PodInfo:
    return PodInfo.of(
        Pod.model_validate(
            {
                "metadata": {"name": name, "namespace": "default", "uid": name, "creationTimestamp": created},
                "spec": {"priority": priority, "schedulerName": "koord-scheduler", "containers": []},
            }
        )
    )


def sort_key(p: PodInfo) -> tuple[Any, ...]:
    return (-p.priority, p.created, p.key)


EVENTS = {
    "NodeResourcesFit": ClusterEvent.NODE_ADD | ClusterEvent.POD_DELETE,
    "TaintToleration": ClusterEvent.NODE_UPDATE,
}


def make_queue(clock: FakeClock, gate: set[str] | None = None) -> SchedulingQueue:
    gated = gate if gate is not None else set()

    def pre_enqueue(p: PodInfo) -> Status:
        return (
            Status.pending("gang is short of members").with_plugin("Coscheduling")
            if p.name in gated
            else Status()
        )

    return SchedulingQueue(
        sort_key=sort_key,
        pre_enqueue=pre_enqueue,
        plugin_events=lambda name: EVENTS.get(name, ClusterEvent.ALL),
        clock=clock,
    )


async def test_pops_by_priority_then_creation_time() -> None:
    q = make_queue(FakeClock())
    q.add(pod("late", 0, "2026-01-01T00:00:05Z"))
    q.add(pod("early", 0, "2026-01-01T00:00:01Z"))
    q.add(pod("important", 100, "2026-01-01T00:00:09Z"))
    order = [(await q.pop()).pod.name for _ in range(3)]
    assert order == ["important", "early", "late"]


async def test_unschedulable_pod_moves_only_on_an_event_its_plugins_registered() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    qp = await q.pop()
    q.add_unschedulable(qp, {"TaintToleration"})
    assert q.counts().unschedulable == 1
    assert q.on_event(ClusterEvent.POD_DELETE) == 0
    assert q.counts().unschedulable == 1
    assert q.on_event(ClusterEvent.NODE_UPDATE) == 1
    # The first attempt's backoff (1 s) has not elapsed: the pod waits in backoff.
    assert q.counts().backoff == 1
    clock.now += 1.0
    q.flush()
    assert q.counts().active == 1


async def test_event_during_the_cycle_sends_the_pod_to_backoff_not_unschedulable() -> None:
    q = make_queue(FakeClock())
    q.add(pod("a"))
    qp = await q.pop()
    q.on_event(ClusterEvent.NODE_ADD)  # arrives while "a" is being scheduled
    q.add_unschedulable(qp, {"NodeResourcesFit"})
    assert q.counts().backoff == 1
    assert q.counts().unschedulable == 0


@pytest.mark.parametrize(
    ("attempts", "expected"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)]
)
def test_backoff_doubles_up_to_the_cap(attempts: int, expected: float) -> None:
    assert make_queue(FakeClock()).backoff_duration(attempts) == expected


async def test_activation_skips_the_backoff_earned_by_earlier_cycles() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    for _ in range(4):  # four failed cycles, each retried on an event after its backoff
        clock.now += 100
        qp = await q.pop()
        q.add_unschedulable(qp, {"NodeResourcesFit"})
        q.on_event(ClusterEvent.POD_DELETE)
    assert q.counts().backoff == 1  # for 8 s
    q.activate({"a"})
    assert q.counts() == QueueCounts(active=1, backoff=0, unschedulable=0, gated=0)
    assert (await asyncio.wait_for(q.pop(), 0.1)).attempts == 5


async def test_a_pod_activated_during_its_cycle_goes_to_active_when_the_cycle_fails() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    qp = await q.pop()
    q.add_unschedulable(qp, {"NodeResourcesFit"})
    q.on_event(ClusterEvent.POD_DELETE)
    clock.now += 1
    qp = await q.pop()
    q.activate({"a"})  # e.g. the last victim of its preemption went while it was being scheduled
    q.on_event(ClusterEvent.POD_DELETE)  # that deletion's event: alone, it would earn a 2 s backoff
    q.add_unschedulable(qp, {"NodeResourcesFit"})
    assert q.counts() == QueueCounts(active=1, backoff=0, unschedulable=0, gated=0)
    assert (await asyncio.wait_for(q.pop(), 0.1)).pod.name == "a"
    # The activation was used up: the next failure waits as usual.
    q.add_unschedulable(qp, {"NodeResourcesFit"})
    assert q.counts().unschedulable == 1


async def test_gated_pod_stays_out_until_pre_enqueue_lets_it_in() -> None:
    gate = {"g"}
    q = make_queue(FakeClock(), gate)
    q.add(pod("g"))
    assert q.counts().gated == 1
    assert q.counts().active == 0
    gate.clear()
    q.on_event(ClusterEvent.POD_ADD)
    assert q.counts().active == 1
    assert (await q.pop()).pod.name == "g"


async def test_deleted_pod_is_never_popped() -> None:
    q = make_queue(FakeClock())
    q.add(pod("a"))
    q.add(pod("b"))
    q.delete("a")
    assert (await q.pop()).pod.name == "b"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.pop(), timeout=0.05)


async def test_pop_waits_for_a_pod() -> None:
    q = make_queue(FakeClock())
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    assert not waiter.done()
    q.add(pod("a"))
    assert (await asyncio.wait_for(waiter, 1)).pod.name == "a"


async def test_long_unschedulable_pods_are_retried_anyway() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    q.add_unschedulable(await q.pop(), {"TaintToleration"})
    clock.now += 301
    q.flush()
    assert q.counts().active == 1


async def test_each_long_unschedulable_pod_is_retried_when_its_own_time_is_up() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    q.add(pod("b"))
    q.add_unschedulable(await q.pop(), {"TaintToleration"})
    clock.now += 100
    q.add_unschedulable(await q.pop(), {"TaintToleration"})
    clock.now += 200
    q.flush()
    assert [p.pod.name for p in q.pending()] == ["a", "b"]
    assert q.counts().active == 1  # a, 300 s after it failed
    clock.now += 99
    q.flush()
    assert q.counts().active == 1
    clock.now += 1
    q.flush()
    assert q.counts().active == 2


async def test_error_goes_to_backoff_then_active() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    qp = await q.pop()
    q.add_backoff(qp)
    assert q.counts().backoff == 1
    clock.now += 1.0
    assert (await q.pop()).attempts == 2


def out_of_range_pod(name: str) -> PodInfo:
    return PodInfo.of(
        Pod.model_validate(
            {
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": {"memory": "10E"}}}],
                },
            }
        )
    )


async def test_a_pod_with_out_of_range_requests_is_gated_before_any_plugin_and_reported_once() -> None:
    seen: list[str] = []
    gated: list[tuple[str, Status]] = []

    def pre_enqueue(p: PodInfo) -> Status:
        seen.append(p.name)
        return Status()

    q = SchedulingQueue(
        sort_key=sort_key,
        pre_enqueue=pre_enqueue,
        plugin_events=lambda name: ClusterEvent.ALL,
        clock=FakeClock(),
        on_gated=lambda qp, status: gated.append((qp.pod.name, status)),
    )
    q.add(out_of_range_pod("huge"))
    q.add(pod("fine"))
    assert seen == ["fine"]
    assert q.counts().gated == 1
    assert (await q.pop()).pod.name == "fine"
    q.on_event(ClusterEvent.NODE_ADD)  # asks the gate again: same reason, not reported again
    assert [(name, status.code) for name, status in gated] == [("huge", Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
    assert "requests.memory: 10E is outside" in gated[0][1].message()
    queued = q.get("huge")
    assert queued is not None
    assert queued.gated_by is not None
    assert "10E" in queued.gated_by


async def test_a_queued_pod_updated_out_of_range_is_gated() -> None:
    q = make_queue(FakeClock())
    q.add(pod("p"))
    q.update(out_of_range_pod("p"))
    assert q.counts() == QueueCounts(active=0, backoff=0, unschedulable=0, gated=1)


async def test_a_gate_is_reported_again_only_when_its_reason_changes() -> None:
    reasons = iter(["has 1 of 3", "has 1 of 3", "has 2 of 3"])
    gated: list[str] = []
    q = SchedulingQueue(
        sort_key=sort_key,
        pre_enqueue=lambda p: Status.pending(next(reasons)),
        plugin_events=lambda name: ClusterEvent.ALL,
        clock=FakeClock(),
        on_gated=lambda qp, status: gated.append(status.message()),
    )
    q.add(pod("member"))
    q.on_event(ClusterEvent.POD_ADD)
    q.on_event(ClusterEvent.POD_ADD)
    assert gated == ["has 1 of 3", "has 2 of 3"]


async def test_every_entry_into_a_queue_is_reported_with_its_queue_and_event() -> None:
    """What scheduler_queue_incoming_pods_total and scheduler_unschedulable_pods are fed from."""
    clock = FakeClock()
    seen: list[tuple[str, str]] = []
    queue = SchedulingQueue(
        sort_key=sort_key,
        pre_enqueue=lambda p: (
            Status.pending("short").with_plugin("Coscheduling") if p.name == "gated" else Status()
        ),
        plugin_events=lambda name: EVENTS.get(name, ClusterEvent.ALL),
        clock=clock,
        on_incoming=lambda q, event: seen.append((q, event)),
    )
    queue.add(pod("a"))
    queue.add(pod("gated"))
    assert seen == [("active", "PodAdd"), ("gated", "PodAdd")]
    popped = await queue.pop()
    queue.add_unschedulable(popped, {"NodeResourcesFit"})
    assert seen[-1] == ("unschedulable", "ScheduleAttemptFailure")
    assert queue.unschedulable_by_plugin() == {
        ("koord-scheduler", "NodeResourcesFit"): 1,
        ("koord-scheduler", "Coscheduling"): 1,
    }
    clock.now += 60  # past its backoff: the event sends it straight to active
    queue.on_event(ClusterEvent.NODE_ADD)
    assert ("active", "NodeAdd") in seen


def with_changes(p: PodInfo, **changes: Any) -> PodInfo:
    """A later version of ``p``: its wire form with ``changes`` merged into metadata, spec or status."""
    wire = p.pod.model_dump(by_alias=True, exclude_none=True)
    for part, values in changes.items():
        wire.setdefault(part, {}).update(values)
    return PodInfo.of(Pod.model_validate(wire))


async def test_an_unschedulable_pod_whose_status_alone_changed_waits_for_an_event() -> None:
    """The scheduler writes PodScheduled=False (and a nominated node) after a failed cycle, which
    comes back as an update of the pod: as kube-scheduler's isPodUpdated, an update of the status,
    resourceVersion, generation or finalizers only does not move the pod (each failed pod was tried
    twice); a change of its labels or spec does."""
    q = make_queue(FakeClock())
    q.add(pod("a"))
    qp = await q.pop()
    q.add_unschedulable(qp, {"NodeResourcesFit"})
    failed = with_changes(
        qp.pod,
        metadata={"resourceVersion": "7", "generation": 2, "finalizers": ["x"]},
        status={"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    )
    q.update(failed)
    assert q.counts().unschedulable == 1
    kept = q.get("a")
    assert kept is not None
    assert kept.pod is failed  # the newest version is kept
    q.update(with_changes(failed, metadata={"labels": {"team": "b"}}))
    assert q.counts().unschedulable == 0
    assert q.counts().backoff == 1


async def test_an_unschedulable_pod_whose_spec_changed_is_tried_again() -> None:
    q = make_queue(FakeClock())
    q.add(pod("a"))
    qp = await q.pop()
    q.add_unschedulable(qp, {"NodeResourcesFit"})
    q.update(with_changes(qp.pod, spec={"priority": 5}))
    assert q.counts().unschedulable == 0
    assert q.counts().backoff == 1


class FullScanQueue(SchedulingQueue):
    """The queue whose ``flush`` walks both sets on every call, as before the lower bounds."""

    def flush(self) -> None:
        now = self._clock()
        for uid, qp in list(self._backoff.items()):
            if qp.backoff_until <= now:
                del self._backoff[uid]
                self._enqueue(qp, "BackoffComplete")
        for uid, qp in list(self._unschedulable.items()):
            if now - qp.queued_at >= self.max_unschedulable_seconds:
                del self._unschedulable[uid]
                self._requeue(qp, "UnschedulableTimeout")


_STEPS = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 5)),
    st.tuples(st.just("fail"), st.sampled_from(["NodeResourcesFit", "TaintToleration", ""])),
    st.tuples(st.just("error"), st.just("")),
    st.tuples(st.just("bound"), st.just("")),
    st.tuples(st.just("tick"), st.sampled_from([0.5, 1.0, 3.0, 7.0])),
    st.tuples(st.just("event"), st.sampled_from(["NODE_ADD", "NODE_UPDATE", "POD_ADD"])),
    st.tuples(st.just("activate"), st.integers(0, 5)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_STEPS, max_size=60))
def test_flush_moves_the_pods_a_full_walk_of_both_sets_moves(steps: list[tuple[str, Any]]) -> None:
    """``flush`` walks the backoff and unschedulable sets only when a pod in them may be due (it
    runs on every pop); the pods it moves, and when, are those of walking both every time."""
    clock = FakeClock()
    gate = {"p5"}
    queues = [make_queue(clock, gate), FullScanQueue(**_queue_args(clock, gate))]
    for q in queues:
        q.max_unschedulable_seconds = 4.0
    in_flight: list[list[Any]] = [[], []]
    for step, arg in steps:
        if step == "tick":
            clock.now += arg
            continue
        for q, flying in zip(queues, in_flight, strict=True):
            _apply(q, flying, step, arg)
        popped = [_pop_now(q, flying) for q, flying in zip(queues, in_flight, strict=True)]
        assert popped[0] == popped[1]
        assert queues[0].counts() == queues[1].counts()
        assert [p.pod.uid for p in queues[0].pending()] == [p.pod.uid for p in queues[1].pending()]


def _pop_now(q: SchedulingQueue, flying: list[Any]) -> str | None:
    """``pop`` when it does not wait: the uid popped (kept in ``flying``), or None."""
    q.flush()
    if not q.counts().active:
        return None
    coro = q.pop()
    try:
        coro.send(None)
    except StopIteration as done:
        flying.append(done.value)
        return str(done.value.pod.uid)
    coro.close()
    raise AssertionError("pop waited with a pod active")


def _queue_args(clock: FakeClock, gate: set[str]) -> dict[str, Any]:
    def pre_enqueue(p: PodInfo) -> Status:
        return Status.pending("short").with_plugin("Coscheduling") if p.name in gate else Status()

    return {
        "sort_key": sort_key,
        "pre_enqueue": pre_enqueue,
        "plugin_events": lambda name: EVENTS.get(name, ClusterEvent.ALL),
        "clock": clock,
    }


def _apply(q: SchedulingQueue, flying: list[Any], step: str, arg: Any) -> None:
    if step == "add":
        q.add(pod(f"p{arg}"))
    elif step in ("fail", "error", "bound") and flying:
        qp = flying.pop(0)
        if step == "fail":
            q.add_unschedulable(qp, {arg} - {""})
        elif step == "error":
            q.add_backoff(qp)
        else:
            q.done(qp.pod.uid)
    elif step == "event":
        q.on_event(ClusterEvent[arg])
    elif step == "activate":
        q.activate({f"p{arg}"})
    elif step == "delete":
        q.delete(f"p{arg}")
