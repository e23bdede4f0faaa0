"""The default profile preempts for a plain pod as kube-scheduler's does (DefaultPreemption, last
at PostFilter), with no ``enablePreemption``: on the in-memory backend through the scheduler's own
loop, evictions through the backend."""

from __future__ import annotations

import pytest

from apis.client.backend import NODES, PODS
from scheduler.backend.memory import MemoryBackend
from tests.scheduler.test_job_preemption import HIGH, LOW, bound, names, node, pod, until
from tests.scheduler.whatif.cluster import DEFAULT_PROFILE_CONFIG, running


async def test_a_high_priority_pod_evicts_the_lower_priority_pods_it_needs_and_binds() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("a", cpu="4"))
    for i in range(3):
        backend.apply(PODS, pod(f"low-{i}", cpu="1", priority=LOW + i, node_name="a"))
    async with running(backend, config_text=DEFAULT_PROFILE_CONFIG):
        backend.apply(PODS, pod("urgent", cpu="3", priority=HIGH))
        await until(lambda: bound(backend).get("urgent") == "a")
        # 1 CPU is free: two must go, the two least important (kube-scheduler's reprieve)
        assert names(backend) == {"urgent", "low-2"}


@pytest.mark.parametrize(
    ("label", "value"),
    [
        ("scheduling.koordinator.sh/disable-preemptible", "true"),
        ("quota.scheduling.koordinator.sh/preemptible", "false"),
    ],
)
async def test_a_pod_labelled_not_preemptible_is_never_a_victim(label: str, value: str) -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("a", cpu="2"))
    backend.apply(PODS, pod("keep", cpu="2", priority=LOW, node_name="a", labels={label: value}))
    async with running(backend, config_text=DEFAULT_PROFILE_CONFIG):
        backend.apply(PODS, pod("urgent", cpu="2", priority=HIGH))
        await until(
            lambda: any("No preemption victims found for incoming pod" in e.message for e in backend.events)
        )
        assert names(backend) == {"keep", "urgent"}
        assert "urgent" not in bound(backend)
