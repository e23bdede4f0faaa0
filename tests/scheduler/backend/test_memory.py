"""MemoryBackend keeps the watch contract and the API server's write semantics the scheduler relies on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from apis.client.backend import (
    NODES,
    PDBS,
    PODS,
    BackendError,
    ClusterBackend,
    Conflict,
    EventRecord,
    EventType,
    NotFound,
    ObjectRef,
    WatchEvent,
)
from apis.core import Node, Pod, PodDisruptionBudget
from scheduler.backend.memory import FieldSelector, MemoryBackend, json_merge_patch, strategic_merge_patch

T = TypeVar("T", bound=BaseModel)


def pod(name: str, *, namespace: str = "default", node: str | None = None, **labels: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "koord-scheduler", "containers": [{"name": "main"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "8"}}}


async def next_event(stream: AsyncIterator[WatchEvent[T]]) -> WatchEvent[T]:
    return await asyncio.wait_for(anext(stream), timeout=1)


async def test_watch_starts_with_replaced_then_streams_changes_in_order() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1"))
    stream = backend.watch(NODES)
    first = await next_event(stream)
    assert first.type is EventType.REPLACED
    assert [n.metadata.name for n in first.objects] == ["n1"]

    backend.apply(NODES, node("n2"))
    backend.apply(NODES, {**node("n1"), "spec": {"unschedulable": True}})
    backend.delete(NODES, None, "n2")

    events = [await next_event(stream) for _ in range(3)]
    assert [(e.type, e.obj.metadata.name if e.obj else None) for e in events] == [
        (EventType.ADDED, "n2"),
        (EventType.MODIFIED, "n1"),
        (EventType.DELETED, "n2"),
    ]
    versions = [int(e.obj.metadata.resource_version or 0) for e in events if e.obj]
    assert versions == sorted(versions)
    assert isinstance(events[1].obj, Node)
    assert events[1].obj.spec.unschedulable is True
    await backend.close()


async def test_writes_before_the_first_iteration_are_in_the_replaced_list() -> None:
    backend = MemoryBackend()
    stream = backend.watch(PODS)
    backend.apply(PODS, pod("early"))  # the generator has not run yet: no event may be lost
    first = await next_event(stream)
    assert first.type is EventType.REPLACED
    assert [p.metadata.name for p in first.objects] == ["early"]
    backend.apply(PODS, pod("late"))
    assert (await next_event(stream)).type is EventType.ADDED
    await backend.close()


async def test_resource_version_increases_across_resource_types() -> None:
    backend = MemoryBackend()
    a = backend.apply(PODS, pod("a"))
    n = backend.apply(NODES, node("n"))
    b = backend.apply(PODS, pod("b"))
    assert [int(x.metadata.resource_version or 0) for x in (a, n, b)] == [1, 2, 3]
    assert backend.resource_version == "3"
    assert a.metadata.uid
    assert a.metadata.creation_timestamp is not None
    again = backend.apply(PODS, pod("a"))
    assert again.metadata.uid == a.metadata.uid  # a replace keeps the identity


async def test_field_selector_turns_leaving_and_entering_into_deleted_and_added() -> None:
    backend = MemoryBackend()
    backend.apply(PODS, pod("pending"))
    backend.apply(PODS, pod("running", node="n1"))
    unassigned = backend.watch(PODS, field_selector="spec.nodeName=")
    first = await next_event(unassigned)
    assert [p.metadata.name for p in first.objects] == ["pending"]

    stored = backend.get(PODS, "default", "pending")
    assert stored is not None
    await backend.bind(stored, "n1")
    gone = await next_event(unassigned)
    assert gone.type is EventType.DELETED
    assert gone.obj is not None
    assert gone.obj.metadata.name == "pending"

    backend.apply(PODS, pod("new"))
    added = await next_event(unassigned)
    assert added.type is EventType.ADDED
    assert added.obj is not None
    assert added.obj.metadata.name == "new"
    await backend.close()


def test_field_selector_parsing() -> None:
    selector = FieldSelector.parse("spec.nodeName!=, status.phase!=Failed,metadata.namespace==kube-system")
    assert selector.matches({"spec": {"nodeName": "n"}, "metadata": {"namespace": "kube-system"}})
    assert not selector.matches({"spec": {}, "metadata": {"namespace": "kube-system"}})
    assert not selector.matches(
        {"spec": {"nodeName": "n"}, "status": {"phase": "Failed"}, "metadata": {"namespace": "kube-system"}}
    )
    with pytest.raises(ValueError, match="invalid field selector"):
        FieldSelector.parse("spec.nodeName")


async def test_bind_sets_node_name_and_condition_and_refuses_a_second_bind() -> None:
    backend = MemoryBackend()
    created = backend.apply(PODS, pod("p"))
    stream = backend.watch(PODS)
    await next_event(stream)

    await backend.bind(created, "n1")
    event = await next_event(stream)
    assert event.type is EventType.MODIFIED
    assert isinstance(event.obj, Pod)
    assert event.obj.spec.node_name == "n1"
    conditions = {c.type: c.status for c in event.obj.status.conditions or []}
    assert conditions == {"PodScheduled": "True"}
    assert backend.bindings == [("default/p", "n1")]

    with pytest.raises(Conflict, match="already assigned") as info:
        await backend.bind(created, "n2")
    assert info.value.status == 409
    await backend.close()


async def test_a_bound_pod_is_what_validating_its_stored_wire_gives() -> None:
    """bind builds the new version from the stored one instead of validating the whole pod again:
    the model handed out must equal the one its wire decodes to, annotations, an earlier condition
    and the resourceVersion included, and the version before it must be left as it was."""
    backend = MemoryBackend()
    written = pod("p", app="web")
    written["metadata"]["annotations"] = {"keep": "1"}
    written["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    written["status"] = {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}
    created = backend.apply(PODS, written)
    before = created.model_dump(by_alias=True, mode="json")

    await backend.bind(created, "n1", annotations={"bound-by": "test"})

    stored = backend.get(PODS, "default", "p")
    assert stored is not None
    decoded = Pod.model_validate(stored.to_wire())
    assert stored == decoded
    assert stored.to_wire() == decoded.to_wire()
    assert stored.metadata.resource_version == backend.resource_version
    assert stored.metadata.annotations == {"keep": "1", "bound-by": "test"}
    assert [(c.type, c.status) for c in stored.status.conditions or []] == [
        ("Ready", "False"),
        ("PodScheduled", "True"),
    ]
    assert created.model_dump(by_alias=True, mode="json") == before
    assert created.spec.node_name is None
    # The stored wire (what field selectors read) moved on with the model.
    on_node = await next_event(backend.watch(PODS, field_selector="spec.nodeName=n1"))
    assert [p.metadata.name for p in on_node.objects] == ["p"]
    await backend.close()


async def test_bind_merges_podscheduled_into_the_condition_already_there() -> None:
    """An unschedulable pod carries PodScheduled=False: binding merges into that condition (by
    type, as a strategic merge patch does, its reason and message kept), the others untouched."""
    backend = MemoryBackend()
    written = pod("p")
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}
    ready = {"type": "Ready", "status": "False"}
    written["status"] = {"phase": "Pending", "conditions": [unschedulable, ready]}
    created = backend.apply(PODS, written)
    before = created.model_dump(by_alias=True, mode="json")

    await backend.bind(created, "n1")

    stored = backend.get(PODS, "default", "p")
    assert stored is not None
    assert stored == Pod.model_validate(stored.to_wire())
    conditions = stored.to_wire()["status"]["conditions"]
    scheduled = {
        "type": "PodScheduled",
        "status": "True",
        "lastTransitionTime": conditions[0]["lastTransitionTime"],
    }
    expected = strategic_merge_patch(created.to_wire()["status"], {"conditions": [scheduled]})["conditions"]
    assert conditions == expected
    assert conditions[1] == ready
    assert conditions[0]["reason"] == "Unschedulable"
    assert created.model_dump(by_alias=True, mode="json") == before


async def test_bind_errors_for_missing_and_recreated_pods() -> None:
    backend = MemoryBackend()
    with pytest.raises(NotFound):
        await backend.bind(Pod.model_validate(pod("ghost")), "n1")
    old = backend.apply(PODS, pod("p"))
    backend.delete(PODS, "default", "p")
    backend.apply(PODS, pod("p"))  # same name, new uid
    with pytest.raises(Conflict, match="recreated"):
        await backend.bind(old, "n1")


async def test_concurrent_binds_with_latency_have_exactly_one_winner() -> None:
    backend = MemoryBackend(bind_latency=0.01)
    created = backend.apply(PODS, pod("p"))
    results = await asyncio.gather(
        *(backend.bind(created, f"n{i}") for i in range(5)), return_exceptions=True
    )
    assert sum(r is None for r in results) == 1
    assert all(isinstance(r, Conflict) for r in results if r is not None)


async def test_patch_pod_merges_metadata_but_cannot_touch_status() -> None:
    backend = MemoryBackend()
    created = backend.apply(PODS, {**pod("p"), "status": {"phase": "Pending"}})
    await backend.patch_pod(
        created,
        {"metadata": {"annotations": {"a": "1"}, "name": "renamed"}, "status": {"phase": "Running"}},
    )
    await backend.patch_pod(created, {"metadata": {"annotations": {"b": "2"}}})
    await backend.patch_pod(created, {"metadata": {"annotations": {"a": None}}})
    stored = backend.get(PODS, "default", "p")
    assert stored is not None
    assert stored.metadata.annotations == {"b": "2"}
    assert stored.metadata.name == "p"
    assert stored.status.phase == "Pending"
    with pytest.raises(BackendError, match="invalid") as info:
        await backend.patch_pod(created, {"spec": {"containers": "not a list"}})
    assert info.value.status == 422


async def test_patch_pod_status_merges_conditions_by_type() -> None:
    backend = MemoryBackend()
    created = backend.apply(PODS, pod("p"))
    await backend.patch_pod_status(
        created, {"status": {"conditions": [{"type": "Ready", "status": "False"}], "nominatedNodeName": "n1"}}
    )
    await backend.patch_pod_status(
        created,
        {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}},
    )
    await backend.patch_pod_status(created, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    stored = backend.get(PODS, "default", "p")
    assert stored is not None
    assert stored.status.nominated_node_name == "n1"
    assert [(c.type, c.status) for c in stored.status.conditions or []] == [
        ("Ready", "True"),
        ("PodScheduled", "False"),
    ]


async def test_evict_deletes_and_respects_disruption_budgets() -> None:
    backend = MemoryBackend()
    victim = backend.apply(PODS, pod("victim", app="db"))
    other = backend.apply(PODS, pod("other", app="web"))
    backend.apply(
        PDBS,
        {
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": 1},
        },
    )
    stream = backend.watch(PODS)
    await next_event(stream)

    await backend.evict(victim, grace_period_seconds=0)
    deleted = await next_event(stream)
    assert deleted.type is EventType.DELETED
    assert deleted.obj is not None
    assert deleted.obj.metadata.name == "victim"
    budget = backend.get(PDBS, "default", "db")
    assert isinstance(budget, PodDisruptionBudget)
    assert budget.status.disruptions_allowed == 0

    second = backend.apply(PODS, pod("victim-2", app="db"))
    with pytest.raises(BackendError) as info:
        await backend.evict(second)
    assert info.value.status == 429
    await backend.evict(other)  # not selected by the budget
    with pytest.raises(NotFound):
        await backend.evict(other)
    await backend.close()


async def test_record_event_is_kept_for_assertions() -> None:
    backend = MemoryBackend()
    event = EventRecord(
        regarding=ObjectRef(kind="Pod", namespace="default", name="p"),
        type="Warning",
        reason="FailedScheduling",
        message="0/3 nodes are available",
    )
    await backend.record_event(event)
    assert backend.events == [event]


async def test_close_ends_every_stream_and_force_relist_replays_the_list() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1"))
    stream = backend.watch(NODES)
    await next_event(stream)
    backend.force_relist(NODES)
    relisted = await next_event(stream)
    assert relisted.type is EventType.REPLACED
    assert [n.metadata.name for n in relisted.objects] == ["n1"]
    await backend.close()
    with pytest.raises(StopAsyncIteration):
        await next_event(stream)
    assert [e async for e in backend.watch(NODES)] == []


async def test_objects_handed_out_are_independent_of_the_store() -> None:
    backend = MemoryBackend()
    given = Pod.model_validate(pod("p"))
    stored = backend.apply(PODS, given)
    given.metadata.labels = {"mutated": "yes"}
    again = backend.get(PODS, "default", "p")
    assert again is stored
    assert again.metadata.labels == {}


def test_it_is_a_cluster_backend() -> None:
    backend: ClusterBackend = MemoryBackend()  # checked by mypy
    assert callable(backend.watch)


def test_merge_patch_helpers() -> None:
    assert json_merge_patch({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"b": None, "e": 3}, "d": [2]}) == {
        "a": {"c": 2, "e": 3},
        "d": [2],
    }
    assert strategic_merge_patch(
        {"conditions": [{"type": "A", "status": "False", "reason": "x"}], "podIPs": [{"ip": "1"}]},
        {
            "conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}],
            "phase": "Running",
        },
    ) == {
        "conditions": [{"type": "A", "status": "True", "reason": "x"}, {"type": "B", "status": "True"}],
        "podIPs": [{"ip": "1"}],
        "phase": "Running",
    }


async def test_patch_custom_merges_metadata_and_status_of_a_custom_resource() -> None:
    from apis.client.backend import ELASTICQUOTAS, NotFound

    backend = MemoryBackend()
    quota = {
        "metadata": {"name": "q", "namespace": "team", "annotations": {"keep": "1"}},
        "spec": {"max": {"cpu": "4"}},
    }
    stored = backend.apply(ELASTICQUOTAS, quota)
    events = backend.watch(ELASTICQUOTAS)
    first = await anext(events)
    assert [q.metadata.name for q in first.objects] == ["q"]
    await backend.patch_custom(
        ELASTICQUOTAS,
        "team",
        "q",
        {"metadata": {"annotations": {"new": "2"}, "uid": "forged"}, "status": {"used": {"cpu": "1"}}},
    )
    event = await anext(events)
    assert event.type == EventType.MODIFIED
    patched = backend.get(ELASTICQUOTAS, "team", "q")
    assert patched is not None
    assert patched.status is not None
    assert patched.status.used is not None
    assert str(patched.status.used["cpu"]) == "1"
    assert patched.metadata.annotations == {"keep": "1", "new": "2"}
    assert patched.metadata.uid == stored.metadata.uid
    with pytest.raises(NotFound):
        await backend.patch_custom(ELASTICQUOTAS, "team", "missing", {"status": {}})


def test_negative_quantities_are_refused_as_the_api_server_does() -> None:
    backend = MemoryBackend()
    negative = pod("neg")
    negative["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "-4"}}
    with pytest.raises(BackendError, match=r"requests.cpu: must be greater than or equal to 0") as caught:
        backend.apply(PODS, negative)
    assert caught.value.status == 422
    with pytest.raises(BackendError, match=r"status.allocatable.cpu"):
        backend.apply(NODES, {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "-1"}}})
    assert backend.list(PODS) == []
    assert backend.list(NODES) == []
    assert backend.resource_version == "0"


async def test_a_watch_hands_over_its_events_in_write_order_to_a_reader_that_waits() -> None:
    """Events written while the reader waits, and before it asks, come in write order; closing
    ends the stream."""
    backend = MemoryBackend()
    stream = backend.watch(PODS)
    assert (await next_event(stream)).type is EventType.REPLACED
    waiting = asyncio.ensure_future(next_event(stream))
    await asyncio.sleep(0)
    backend.apply(PODS, pod("a"))
    backend.apply(PODS, pod("b"))
    first = await waiting
    assert first.obj is not None
    assert first.obj.metadata.name == "a"
    second = await next_event(stream)
    assert second.obj is not None
    assert second.obj.metadata.name == "b"
    closed = asyncio.ensure_future(next_event(stream))
    await asyncio.sleep(0)
    await backend.close()
    with pytest.raises(StopAsyncIteration):
        await closed
