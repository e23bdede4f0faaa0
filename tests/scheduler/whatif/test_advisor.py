"""The scheduler's own advice for a gang left pending (``--whatif-advice-seconds``): found off the
loop, kept for ``koordctl explain``, written once as a FailedScheduling event on the PodGroup
and not again while it says the same."""

from __future__ import annotations

import asyncio

from scheduler.backend.memory import MemoryBackend
from scheduler.elected import ElectedScheduler
from scheduler.metrics import SchedulerMetrics
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
        await until(lambda: bool(_advice_events(backend)))
        await asyncio.sleep(0.5)  # several more rounds: nothing new to say, nothing written
        events = _advice_events(backend)
        assert events == [
            "what-if for default/train: topology: gang default/train needs 4 members in one BlockLayer "
            "domain; the largest free domain holds 3; smallest change: PreferGather instead of MustGather "
            "at BlockLayer"
        ]
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
