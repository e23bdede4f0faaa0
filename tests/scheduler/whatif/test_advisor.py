"""The scheduler's own advice for a gang left pending (``--whatif-advice-seconds``): found off the
loop, kept for ``koordctl explain``, written once as a FailedScheduling event on the PodGroup
and not again while it says the same."""

from __future__ import annotations

import asyncio

from apis.client.backend import PODGROUPS, PODS
from apis.meta import Condition
from scheduler.backend.memory import MemoryBackend
from scheduler.elected import ElectedScheduler
from scheduler.metrics import SchedulerMetrics
from scheduler.whatif.advisor import Advice
from tests.scheduler.whatif.cluster import apply, gang, running, topology_backend, until


def _advice_events(backend: MemoryBackend) -> list[str]:
    return [
        e.message
        for e in backend.events
        if e.regarding.kind == "PodGroup" and e.message.startswith("what-if for ")
    ]


async def test_a_pending_gang_gets_its_smallest_change_once_on_its_pod_group_and_in_explain() -> None:
    backend = topology_backend({"b1": ("s1", 3), "b2": ("s2", 3)})
    async with running(backend, advice_seconds=0.1) as app:
        assert app.advisor is not None
        apply(backend, gang("train", 4, gather=("BlockLayer", "MustGather")))
        found = (
            "what-if for default/train: topology: gang default/train needs 4 members in one BlockLayer "
            "domain; the largest free domain holds 3; smallest change: PreferGather instead of MustGather "
            "at BlockLayer"
        )
        await until(lambda: found in _advice_events(backend))
        await asyncio.sleep(0.5)  # several more rounds: nothing new to say, nothing written
        events = _advice_events(backend)
        # On a loaded machine the first rounds may run out of their time before the relaxations
        # (said so, and asked again with twice the time); once found, the change is written once.
        assert events[-1] == found
        assert events.count(found) == 1
        assert all("; smallest change: none found within " in e for e in events[:-1]), events
        advice = app.advisor.advice_for("default", "train-2")
        assert advice is not None
        assert advice.smallest_change == "PreferGather instead of MustGather at BlockLayer"
        elected = ElectedScheduler(lambda _: app, backend, SchedulerMetrics())
        elected.app = app
        explained = elected.explain("default", "train-2")
        assert explained is not None
        assert explained["smallest_change"] == events[0]


async def test_without_the_setting_no_advice_is_sought() -> None:
    backend = topology_backend({"b1": ("s1", 3)})
    async with running(backend) as app:
        assert app.advisor is None
        apply(backend, gang("train", 4, gather=("BlockLayer", "MustGather")))
        await until(lambda: app.explanations.get("default", "train-0") is not None)
        await asyncio.sleep(0.3)
        assert _advice_events(backend) == []


def _schedulable(backend: MemoryBackend, name: str) -> Condition | None:
    group = backend.get(PODGROUPS, "default", name)
    conditions = group.status.conditions if group is not None and group.status is not None else None
    return next((c for c in conditions or () if c.type == "Schedulable"), None)


async def test_the_smallest_change_is_the_pod_groups_condition_and_in_each_members_message() -> None:
    backend = topology_backend({"b1": ("s1", 3), "b2": ("s2", 3)})
    async with running(backend, advice_seconds=0.1):
        apply(backend, gang("train", 4, gather=("BlockLayer", "MustGather")))
        await until(lambda: getattr(_schedulable(backend, "train"), "message", "").endswith("BlockLayer"))
        condition = _schedulable(backend, "train")
        assert condition is not None
        assert (condition.status, condition.reason) == ("False", "Unschedulable")
        assert condition.message.startswith("what-if for default/train: topology: ")
        assert condition.message.endswith("smallest change: PreferGather instead of MustGather at BlockLayer")

        def members_told() -> bool:
            told = {
                e.regarding.name
                for e in backend.events
                if e.reason == "FailedScheduling"
                and e.regarding.kind == "Pod"
                and e.message.endswith(condition.message)
            }
            return told == {f"train-{i}" for i in range(4)}

        await until(members_told)
        for i in range(4):  # the member's own PodScheduled condition says it too
            member = backend.get(PODS, "default", f"train-{i}")
            assert member is not None
            assert member.status is not None
            scheduled = next(c for c in member.status.conditions or () if c.type == "PodScheduled")
            assert scheduled.message is not None
            assert scheduled.message.endswith(condition.message)
        since = condition.last_transition_time

        for i in range(4):  # the job goes: the group's condition says no member is pending
            backend.delete(PODS, "default", f"train-{i}")
        await until(lambda: getattr(_schedulable(backend, "train"), "status", None) == "True")
        cleared = _schedulable(backend, "train")
        assert cleared is not None
        assert (cleared.reason, cleared.message) == ("NoPendingMembers", "no member of the gang is pending")
        assert cleared.last_transition_time >= since


def test_a_search_cut_by_its_deadline_says_so_and_is_asked_again_with_more_time() -> None:
    cut = Advice("default/train", "topology: ...", None, version=1, at=0.0, seconds=2.0, cut=True)
    assert cut.will_retry
    assert cut.message().endswith("smallest change: none found within 2 s (searching again with more time)")
    last = Advice("default/train", "topology: ...", None, version=1, at=0.0, seconds=10.0, cut=True)
    assert not last.will_retry
    assert last.message().endswith("smallest change: none found within 10 s")
    done = Advice("default/train", "topology: ...", None, version=1, at=0.0)
    assert not done.will_retry
    assert done.message().endswith("smallest change: none found (no single relaxation makes it fit)")
