"""DefaultPreBind in a profile that enables it (Koordinator's shipped one): the PreBind plugins'
annotations still reach the pod, on the Binding, in one write."""

from __future__ import annotations

from apis.client.backend import NODES, PODS
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import BIND_ANNOTATIONS
from scheduler.framework.handle import Handle
from scheduler.framework.profile import ExtensionPoint, PluginRef, ResolvedProfile
from scheduler.framework.runtime import Framework
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY


async def test_the_annotations_prebind_plugins_leave_travel_on_the_binding() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, {"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "4"}}})
    backend.apply(PODS, {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": []}})
    pod = PodInfo.of(backend.list(PODS)[0])
    plugins = dict(DEFAULT_PLUGINS)
    plugins[ExtensionPoint.PRE_BIND] = (PluginRef("DefaultPreBind"),)
    cache = Cache()
    framework = Framework(
        ResolvedProfile("koord-scheduler", plugins),
        DEFAULT_REGISTRY,
        Handle(backend=backend, snapshot=lambda: Snapshot(cache)),
    )
    state = CycleState()
    state.write(BIND_ANNOTATIONS, {"example.com/record": "x"})
    assert (await framework.run_pre_bind(state, pod, "n0")).ok
    assert (await framework.run_bind(state, pod, "n0")).ok
    bound = backend.list(PODS)[0]
    assert bound.spec.node_name == "n0"
    assert (bound.metadata.annotations or {}).get("example.com/record") == "x"
