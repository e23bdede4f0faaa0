"""Coscheduling at the plugin level: the Permit barrier, Strict rollback, NonStrict patience,
Permit timeouts, and gang identity from pods and PodGroups."""

from __future__ import annotations

import asyncio

import pytest

from apis.client.backend import EventType, WatchEvent
from apis.core import Pod
from apis.scheduling.podgroup import PodGroup
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.status import Code
from scheduler.plugins.coscheduling import Coscheduling, CoschedulingArgs


def pod(name: str, group: str = "job") -> PodInfo:
    return PodInfo.of(
        Pod.model_validate(
            {
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "uid": name,
                    "labels": {"pod-group.scheduling.sigs.k8s.io": group},
                },
                "spec": {"schedulerName": "koord-scheduler", "containers": []},
            }
        )
    )


def pod_group(min_member: int, mode: str, timeout: int = 0) -> PodGroup:
    spec: dict[str, object] = {"minMember": min_member}
    if timeout:
        spec["scheduleTimeoutSeconds"] = timeout
    return PodGroup.model_validate(
        {
            "metadata": {
                "name": "job",
                "namespace": "default",
                "annotations": {"gang.scheduling.koordinator.sh/mode": mode},
            },
            "spec": spec,
        }
    )


def plugin_with_gang(
    mode: str, members: int = 3, timeout: int = 0
) -> tuple[Coscheduling, Handle, list[PodInfo]]:
    cache = Cache()
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: Snapshot(cache))
    plugin = Coscheduling(CoschedulingArgs(), handle)
    plugin._on_pod_group_event(WatchEvent(EventType.ADDED, pod_group(members, mode, timeout)))
    pods = [pod(f"m{i}") for i in range(members)]
    for p in pods:
        plugin._on_pod_event(WatchEvent(EventType.ADDED, p.pod))
    return plugin, handle, pods


def hold_at_permit(plugin: Coscheduling, handle: Handle, p: PodInfo) -> None:
    """What the runtime does for a member whose Permit says WAIT."""
    status, timeout = plugin.permit(CycleState(), p, "n1")
    assert status.code == Code.WAIT
    handle.waiting_pods.add(p, "n1", {plugin.name: timeout})


@pytest.mark.parametrize(("mode", "rolled_back"), [("Strict", True), ("NonStrict", False)])
async def test_a_failing_member_rolls_back_the_waiting_ones_only_in_strict_mode(
    mode: str, rolled_back: bool
) -> None:
    plugin, handle, (m0, m1, m2) = plugin_with_gang(mode)
    hold_at_permit(plugin, handle, m0)
    hold_at_permit(plugin, handle, m1)
    result = await plugin.post_filter(CycleState(), m2, handle.snapshot(), Diagnosis(node_count=3))
    assert result.status.code == Code.UNSCHEDULABLE
    assert (
        "gang group default/job rejected because member default/m2 is unschedulable"
        in result.status.message()
    )
    for member in (m0, m1):
        waiting = handle.waiting_pods.get(member.uid)
        assert waiting is not None
        if rolled_back:
            status = await asyncio.wait_for(waiting.wait(), timeout=1)
            assert status.code == Code.UNSCHEDULABLE
        else:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiting.wait()), timeout=0.05)


async def test_the_last_member_releases_every_waiting_member() -> None:
    plugin, handle, (m0, m1, m2) = plugin_with_gang("Strict")
    hold_at_permit(plugin, handle, m0)
    hold_at_permit(plugin, handle, m1)
    status, _ = plugin.permit(CycleState(), m2, "n1")
    assert status.ok
    for member in (m0, m1):
        waiting = handle.waiting_pods.get(member.uid)
        assert waiting is not None
        assert (await asyncio.wait_for(waiting.wait(), timeout=1)).ok


async def test_permit_wait_is_the_pod_groups_schedule_timeout_and_expires() -> None:
    plugin, handle, (m0, _, _) = plugin_with_gang("Strict", timeout=7)
    status, timeout = plugin.permit(CycleState(), m0, "n1")
    assert status.code == Code.WAIT
    assert timeout == 7
    handle.waiting_pods.add(m0, "n1", {plugin.name: 0.05})
    waiting = handle.waiting_pods.get(m0.uid)
    assert waiting is not None
    expired = await waiting.wait()
    assert expired.code == Code.UNSCHEDULABLE
    assert "rejected due to timeout after waiting at permit (Coscheduling)" in expired.message()


def test_pre_enqueue_holds_members_until_min_member_pods_exist() -> None:
    plugin, _, pods = plugin_with_gang("Strict", members=3)
    assert all(plugin.pre_enqueue(p).ok for p in pods)
    lonely = pod("x0", group="other")
    plugin._on_pod_event(WatchEvent(EventType.ADDED, lonely.pod))
    status = plugin.pre_enqueue(lonely)
    assert status.code == Code.PENDING
    assert "default/other is not initialized" in status.message()


def test_a_hostile_pod_in_the_start_up_list_hides_no_gang_listed_after_it() -> None:
    """A lightweight-gang pod whose min-available has 5,000 digits comes first in the start-up
    list: its gang records the problem, and the PodGroup gang listed after it is still known."""
    cache = Cache()
    plugin = Coscheduling(
        CoschedulingArgs(), Handle(backend=MemoryBackend(), snapshot=lambda: Snapshot(cache))
    )
    hostile = Pod.model_validate(
        {
            "metadata": {
                "name": "hostile",
                "namespace": "default",
                "uid": "hostile",
                "annotations": {
                    "gang.scheduling.koordinator.sh/name": "bad",
                    "gang.scheduling.koordinator.sh/min-available": "9" * 5000,
                },
            },
            "spec": {"schedulerName": "koord-scheduler", "containers": []},
        }
    )
    plugin._on_pod_group_event(WatchEvent(EventType.ADDED, pod_group(2, "Strict")))
    healthy = [pod("m0"), pod("m1")]
    plugin._on_pod_event(WatchEvent(EventType.REPLACED, objects=[hostile, *(p.pod for p in healthy)]))
    bad = plugin.gangs.gang_of(PodInfo.of(hostile))
    assert bad is not None
    assert bad.problem is not None
    assert "out of range" in bad.problem
    good = plugin.gangs.gang_of(healthy[1])
    assert good is not None
    assert good.problem is None
    assert set(good.children) == {"m0", "m1"}
    assert plugin.pre_enqueue(healthy[0]).ok


def test_a_malformed_gang_is_refused_at_pre_enqueue_and_a_short_one_waits() -> None:
    """PreEnqueue tells the pod's own fault (a rejection: reported with a Warning) from a wait for
    members (PENDING: explained quietly), by status code rather than by wording."""
    plugin, _, (m0, _, _) = plugin_with_gang("Strict")
    assert plugin.pre_enqueue(m0).ok
    short, _, (s0, _, _) = plugin_with_gang("Strict", members=3)
    short._on_pod_event(WatchEvent(EventType.DELETED, s0.pod))
    assert short.pre_enqueue(s0).code == Code.PENDING
    broken = Pod.model_validate(
        {
            "metadata": {
                "name": "b0",
                "namespace": "default",
                "uid": "b0",
                "annotations": {
                    "gang.scheduling.koordinator.sh/name": "broken",
                    "gang.scheduling.koordinator.sh/min-available": "x",
                },
            },
            "spec": {"schedulerName": "koord-scheduler", "containers": []},
        }
    )
    plugin._on_pod_event(WatchEvent(EventType.ADDED, broken))
    status = plugin.pre_enqueue(PodInfo.of(broken))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "min-available" in status.message()
