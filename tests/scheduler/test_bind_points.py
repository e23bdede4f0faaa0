"""Permit, PreBind and Bind as the runtime runs them: the plugin that says no is named on the
status, each plugin is timed only in the cycles that time plugins, and a Bind plugin's SKIP hands
the pod to the next one."""

from __future__ import annotations

from typing import Any

import pytest

from apis.client.backend import NODES, PODS
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.profile import ExtensionPoint, ResolvedProfile
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.default_binder import DefaultBinder
from scheduler.plugins.node_numa_resource.plugin import NodeNUMAResource


def setup() -> tuple[Framework, PodInfo, MemoryBackend, list[tuple[str, str, str]]]:
    backend = MemoryBackend()
    backend.apply(NODES, {"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "4"}}})
    backend.apply(PODS, {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": []}})
    observed: list[tuple[str, str, str]] = []
    cache = Cache()
    framework = Framework(
        ResolvedProfile("koord-scheduler", dict(DEFAULT_PLUGINS)),
        DEFAULT_REGISTRY,
        Handle(backend=backend, snapshot=lambda: Snapshot(cache)),
        observe=lambda point, plugin, code, seconds: observed.append((point, plugin, code)),
    )
    return framework, PodInfo.of(backend.list(PODS)[0]), backend, observed


@pytest.mark.parametrize("sampled", [True, False])
async def test_the_rejecting_plugin_is_named_and_plugins_are_timed_only_when_sampled(
    monkeypatch: pytest.MonkeyPatch, sampled: bool
) -> None:
    framework, pod, _, observed = setup()

    def refuse(self: Any, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        return Status.unschedulable("not now"), 0.0

    async def fail(self: Any, state: CycleState, pod: PodInfo, node: str) -> Status:
        return Status.error("no cpuset")

    monkeypatch.setattr(Coscheduling, "permit", refuse)
    monkeypatch.setattr(NodeNUMAResource, "pre_bind", fail)
    state = CycleState(record_plugin_metrics=sampled)
    permit = framework.run_permit(state, pod, "n0")
    pre_bind = await framework.run_pre_bind(state, pod, "n0")
    assert (permit.code, permit.plugin, permit.message()) == (Code.UNSCHEDULABLE, "Coscheduling", "not now")
    assert (pre_bind.code, pre_bind.plugin) == (Code.ERROR, "NodeNUMAResource")
    timed = {(point, plugin, code) for point, plugin, code in observed}
    if sampled:
        assert ("permit", "Coscheduling", "UNSCHEDULABLE") in timed
        assert ("preBind", "NodeNUMAResource", "ERROR") in timed
    else:
        assert not timed


async def test_a_bind_plugins_skip_goes_on_to_the_next_and_a_failure_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    framework, pod, backend, observed = setup()
    binders = framework.runs_at(ExtensionPoint.BIND)
    assert [b.name for b in binders] == ["Reservation", "DefaultBinder"]  # Reservation's: SKIP

    async def refuse(self: Any, state: CycleState, pod: PodInfo, node: str) -> Status:
        return Status.error("conflict")

    state = CycleState(record_plugin_metrics=True)
    monkeypatch.setattr(DefaultBinder, "bind", refuse)
    status = await framework.run_bind(state, pod, "n0")
    assert (status.code, status.plugin, status.message()) == (Code.ERROR, "DefaultBinder", "conflict")
    assert observed == [("bind", "Reservation", "SKIP"), ("bind", "DefaultBinder", "ERROR")]

    async def skip(self: Any, state: CycleState, pod: PodInfo, node: str) -> Status:
        return Status.skip()

    monkeypatch.setattr(DefaultBinder, "bind", skip)
    status = await framework.run_bind(state, pod, "n0")
    assert (status.code, status.message()) == (Code.ERROR, "no bind plugin bound the pod")
    assert backend.list(PODS)[0].spec.node_name is None
