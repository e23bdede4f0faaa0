"""PodTopologySpread keeps a pod's default constraints for the next pod with the same labels and
owner references (the same objects, as a Deployment's replicas share them) while no Service,
ReplicationController, ReplicaSet or StatefulSet changed. Over random interleavings of workload
events and pods (sharing those objects or not, owned by any kind), every answer must equal the
constraints made afresh."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.backend import EventType, ResourceType, WatchEvent
from apis.meta import OwnerReference
from apis.workloads import ReplicaSet, ReplicationController, Service, StatefulSet
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.handle import Handle
from scheduler.plugins.pod_topology_spread import PodTopologySpreadArgs, new
from scheduler.plugins.pod_topology_spread.args import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY
from scheduler.plugins.pod_topology_spread.plugin import PodTopologySpread
from scheduler.plugins.pod_topology_spread.workloads import (
    REPLICASETS,
    REPLICATIONCONTROLLERS,
    SERVICES,
    STATEFULSETS,
)
from tests.scheduler.builders import make_pod, make_snapshot

APPS = ["web", "db"]
KINDS: dict[str, tuple[ResourceType[Any], Any]] = {
    "Service": (SERVICES, Service),
    "ReplicationController": (REPLICATIONCONTROLLERS, ReplicationController),
    "ReplicaSet": (REPLICASETS, ReplicaSet),
    "StatefulSet": (STATEFULSETS, StatefulSet),
}
OWNER_API = {"ReplicationController": "v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1"}

events = st.tuples(st.sampled_from(sorted(KINDS)), st.sampled_from(APPS), st.booleans())
"""A workload of one kind named and selecting by an app label, added (True) or deleted."""
pods = st.tuples(st.sampled_from(APPS), st.sampled_from([None, *sorted(OWNER_API)]), st.booleans())
"""A pod's app label, its controller's kind, and whether it shares the last such pod's objects."""


def _workload(kind: str, app: str) -> Any:
    model = KINDS[kind][1]
    meta = {"name": app, "namespace": "default"}
    if kind in ("ReplicaSet", "StatefulSet"):
        return model.model_validate({"metadata": meta, "spec": {"selector": {"matchLabels": {"app": app}}}})
    return model.model_validate({"metadata": meta, "spec": {"selector": {"app": app}}})


def _feed(plugin: PodTopologySpread, handle: Handle, kind: str, app: str, added: bool) -> None:
    event_type = EventType.ADDED if added else EventType.DELETED
    for listener in handle.informers.listeners(KINDS[kind][0]):
        listener(WatchEvent(event_type, _workload(kind, app)))


@settings(max_examples=120, deadline=None)
@given(
    steps=st.lists(
        st.one_of(events.map(lambda e: ("event", e)), pods.map(lambda p: ("pod", p))), max_size=12
    ),
    listed=st.booleans(),
)
def test_kept_defaults_equal_defaults_made_afresh(steps: list[tuple[str, Any]], listed: bool) -> None:
    args = (
        PodTopologySpreadArgs.model_validate(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": "host", "whenUnsatisfiable": "ScheduleAnyway"},
                ],
            }
        )
        if listed
        else None
    )
    handle = Handle(backend=None, snapshot=lambda: make_snapshot([]))  # type: ignore[arg-type]
    plugin = new(args, handle)
    last: dict[tuple[str, str | None], PodInfo] = {}
    for i, (what, step) in enumerate(steps):
        if what == "event":
            _feed(plugin, handle, *step)
            continue
        app, owner_kind, shared = step
        built = make_pod(f"p{i}").label("app", app).obj()
        if owner_kind is not None:
            built.metadata.owner_references = [
                OwnerReference(
                    api_version=OWNER_API[owner_kind], kind=owner_kind, name=app, uid="u", controller=True
                )
            ]
        before = last.get((app, owner_kind))
        if shared and before is not None:  # a replica: the same labels and owner references
            built.metadata.labels = before.pod.metadata.labels
            built.metadata.owner_references = before.pod.metadata.owner_references
        pod = PodInfo.of(built)
        last[(app, owner_kind)] = pod
        for action in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            assert plugin.constraints(pod, action) == plugin._default_constraints(pod, action)
