"""The bound version of a pod the scheduler placed is not decoded again: its PodInfo is made from
the assumed one (``PodInfo.successor``) where the parts a PodInfo reads are the same objects, and
it must equal what decoding it gives. The in-memory backend's bind copies the models it changes
without pydantic's generic copy (``scheduler.model_update.updated``), which must equal ``model_copy``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.backend import PODS, BackendError, EventType, WatchEvent
from apis.core import Node, Pod
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.events import EventHandlers
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.status import Status
from scheduler.model_update import updated
from scheduler.queue.scheduling_queue import SchedulingQueue

_FIELDS = (
    "key",
    "uid",
    "requests",
    "priority",
    "sub_priority",
    "created",
    "labels",
    "annotations",
    "problems",
    "non_zero",
    "host_ports",
)

_amounts = st.sampled_from(["0", "100m", "1", "2500m", "1Gi", "300Mi", "-1", "99999999999999999"])
_names = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "kubernetes.io/batch-cpu", "ephemeral-storage"])
_requests = st.dictionaries(_names, _amounts, max_size=3)


@st.composite
def _containers(draw: st.DrawFn, prefix: str, sidecars: bool) -> list[dict[str, Any]]:
    containers = []
    for i in range(draw(st.integers(min_value=1 if not sidecars else 0, max_value=2))):
        container: dict[str, Any] = {"name": f"{prefix}{i}"}
        requests = draw(_requests)
        if requests:
            container["resources"] = {"requests": requests}
        if draw(st.booleans()):
            container["ports"] = [{"containerPort": 80, "hostPort": draw(st.sampled_from([0, 8080, 9090]))}]
        if sidecars and draw(st.booleans()):
            container["restartPolicy"] = "Always"
        containers.append(container)
    return containers


@st.composite
def _pods(draw: st.DrawFn) -> dict[str, Any]:
    labels = draw(
        st.dictionaries(
            st.sampled_from(["app", "tier", "koordinator.sh/priority"]),
            st.sampled_from(["1", "web", "x"]),
            max_size=3,
        )
    )
    annotations = draw(st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["1", "2"]), max_size=2))
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "containers": draw(_containers("c", sidecars=False)),
        "initContainers": draw(_containers("i", sidecars=True)),
    }
    if draw(st.booleans()):
        spec["priority"] = draw(st.integers(min_value=-10, max_value=10**9))
    overhead = draw(_requests)
    if overhead:
        spec["overhead"] = overhead
    metadata: dict[str, Any] = {"name": "p", "namespace": draw(st.sampled_from(["default", "team"]))}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec}


def _same(made: PodInfo, decoded: PodInfo) -> None:
    for name in _FIELDS:
        assert getattr(made, name) == getattr(decoded, name), name


@settings(max_examples=150, deadline=None)
@given(wire=_pods(), binding=st.dictionaries(st.sampled_from(["a", "c"]), st.sampled_from(["3"]), max_size=2))
async def test_the_bound_version_made_from_the_assumed_podinfo_is_what_decoding_it_gives(
    wire: dict[str, Any], binding: dict[str, str]
) -> None:
    backend = MemoryBackend()
    try:
        created = backend.apply(PODS, wire)
    except BackendError:
        return  # a negative amount: the API server refuses the pod
    assumed = PodInfo._decode(created)  # as the informer decoded the pending pod (shares its parts)
    await backend.bind(created, "n1", annotations=binding)
    bound = backend.get(PODS, wire["metadata"]["namespace"], "p")
    assert bound is not None

    made = assumed.successor(bound)

    assert made is not None
    assert made.pod is bound
    assert made.node_name == "n1"
    _same(made, PodInfo._decode(Pod.model_validate(bound.to_wire())))  # decoded from scratch
    _same(made, PodInfo._decode(bound))
    assert made.requests is not assumed.requests  # its own dict, as every decode hands out


def test_a_version_whose_parts_are_new_objects_is_decoded() -> None:
    """A real API server's watch decodes every version anew: nothing is known to be the same."""
    wire = {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": [{"name": "c"}]}}
    assumed = PodInfo._decode(Pod.model_validate(wire))
    again = Pod.model_validate({**wire, "spec": {**wire["spec"], "nodeName": "n1"}})
    assert assumed.successor(again) is None
    renamed = assumed.pod.model_copy(
        update={"metadata": assumed.pod.metadata.model_copy(update={"uid": "v"})}
    )
    assert assumed.successor(renamed) is None


async def test_the_bound_event_of_an_assumed_pod_is_not_decoded_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = MemoryBackend()
    queue = SchedulingQueue(
        sort_key=lambda p: (p.key,),
        pre_enqueue=lambda p: Status(),
        plugin_events=lambda name: ClusterEvent.ALL,
    )
    h = EventHandlers(backend=backend, cache=Cache(), queue=queue, scheduler_names=("koord-scheduler",))
    h.handle_node_event(
        WatchEvent(
            EventType.REPLACED,
            objects=(
                Node.model_validate({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}}),
            ),
        )
    )
    wire = {
        "metadata": {"name": "p", "labels": {"app": "web"}},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    created = backend.apply(PODS, wire)
    h.handle_pod_event(WatchEvent(EventType.ADDED, obj=created))
    qp = await queue.pop()
    h.cache.assume(qp.pod, "n1")
    await backend.bind(created, "n1")
    bound = backend.get(PODS, "default", "p")
    assert bound is not None

    def refused(cls: type[PodInfo], pod: Pod) -> PodInfo:
        raise AssertionError("decoded again")

    monkeypatch.setattr(PodInfo, "_decode", classmethod(refused))
    h.handle_pod_event(WatchEvent(EventType.MODIFIED, obj=bound))

    counted = h.cache.pod(created.metadata.uid or "")
    assert counted is not None
    assert counted.pod is bound
    assert counted is not qp.pod
    assert not h.cache.is_assumed(counted.uid)
    assert counted.requests == {"cpu": 1000, "pods": 1}


_POD = Pod.model_validate(
    {
        "metadata": {"name": "p", "labels": {"a": "b"}, "annotations": {"x": "y"}},
        "spec": {"nodeSelector": {"k": "v"}, "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }
)
_OTHER = Pod.model_validate(
    {
        "metadata": {"name": "q", "uid": "u", "resourceVersion": "7"},
        "spec": {"nodeName": "n", "priority": 3, "containers": [{"name": "d"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
)


@settings(max_examples=100, deadline=None)
@given(
    part=st.sampled_from(["metadata", "spec", "status"]),
    picked=st.data(),
)
def test_a_bind_copies_models_as_model_copy_does(part: str, picked: st.DataObject) -> None:
    model = getattr(_POD, part)
    other = getattr(_OTHER, part)
    fields = picked.draw(st.lists(st.sampled_from(sorted(type(model).model_fields)), unique=True, max_size=4))
    changes = {name: getattr(other, name) for name in fields}

    fast, generic = updated(model, changes), model.model_copy(update=changes)

    assert type(fast) is type(generic)
    assert fast.__dict__ == generic.__dict__
    assert fast.__pydantic_fields_set__ == generic.__pydantic_fields_set__
    assert fast.model_dump(exclude_unset=True) == generic.model_dump(exclude_unset=True)
    assert fast.__dict__ is not model.__dict__
    assert model == getattr(_POD, part)  # the original is left as it was
