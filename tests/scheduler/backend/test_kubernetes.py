"""KubernetesBackend against a scripted fake API server (aiohttp): the reflector paths a real server
only takes under failure (410 Gone, dropped streams, 5xx, expired continue tokens), deterministically,
and the wire shape of every write. The same backend runs against a real API server in
``e2e/scenarios/test_kubernetes_backend.py``."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client

from apis.client import kubernetes as kubernetes_module
from apis.client.backend import (
    PODGROUPS,
    PODS,
    TOPOLOGIES,
    BackendError,
    ClusterBackend,
    Conflict,
    EventRecord,
    EventType,
    NotFound,
    ObjectRef,
    WatchEvent,
)
from apis.client.kubernetes import KubernetesBackend, resource_path
from apis.client.watch import typed_event
from apis.core import Pod
from apis.gcpause import freezing_lists
from apis.quantity import Quantity
from scheduler.cache.pod_info import PodInfo


def raw_pod(name: str, rv: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": str(rv)},
        "spec": {"containers": [{"name": "main"}], **spec},
    }


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def bookmark(rv: int) -> bytes:
    return line("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}})


def gone() -> bytes:
    return line("ERROR", {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired"})


@dataclass
class Watch:
    """One scripted watch response: HTTP ``status``, the ``lines`` to send, then ``end``:
    ``close`` (the server's timeoutSeconds), ``drop`` (the connection dies mid-stream) or ``hang``."""

    lines: list[bytes] = field(default_factory=list)
    status: int = 200
    end: str = "close"


@dataclass
class Body:
    """A list response written as these bytes in chunks of ``chunk`` bytes, each flushed, then
    ``end``: ``close`` or ``drop`` (the connection dies before the body's end)."""

    data: bytes
    chunk: int = 1 << 16
    end: str = "close"


@dataclass
class FakeApiServer:
    lists: list[tuple[int, dict[str, Any]] | Body] = field(default_factory=list)
    watches: list[Watch] = field(default_factory=list)
    writes: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    """path -> (status, body) answered to POST / PATCH / PUT."""
    list_queries: list[dict[str, str]] = field(default_factory=list)
    list_encodings: list[str | None] = field(default_factory=list)
    """The Accept-Encoding of each list request."""
    watch_queries: list[dict[str, str]] = field(default_factory=list)
    requests: list[tuple[str, str, str, Any]] = field(default_factory=list)
    """(method, path, content type, JSON body) of every write."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "GET":
            body = await request.json()
            self.requests.append((request.method, request.path, request.content_type, body))
            status, answer = self.writes.get(request.path, (201, {}))
            return web.json_response(answer, status=status)
        if request.query.get("watch") != "true":
            self.list_queries.append(dict(request.query))
            self.list_encodings.append(request.headers.get("Accept-Encoding"))
            answer = self.lists.pop(0)
            if isinstance(answer, Body):
                return await self.write(request, answer)
            status, page = answer
            return web.json_response(page, status=status)
        self.watch_queries.append(dict(request.query))
        script = self.watches.pop(0) if self.watches else Watch(end="hang")
        if script.status != 200:
            return web.json_response({"kind": "Status", "code": script.status}, status=script.status)
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for chunk in script.lines:
            await response.write(chunk)
        if script.end == "drop":
            assert request.transport is not None
            request.transport.abort()
            return response
        if script.end == "hang":
            await asyncio.sleep(3600)
        await response.write_eof()
        return response

    async def write(self, request: web.Request, body: Body) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(body.data), body.chunk):
            await response.write(body.data[start : start + body.chunk])
        if body.end == "drop":
            assert request.transport is not None
            request.transport.abort()
            return response
        await response.write_eof()
        return response


@pytest_asyncio.fixture(loop_scope="function")
async def server() -> AsyncIterator[tuple[FakeApiServer, KubernetesBackend]]:
    fake = FakeApiServer()
    app = web.Application()

    async def dispatch(request: web.Request) -> web.StreamResponse:
        return await fake.handle(request)  # looked up per request, so a test can wrap it

    app.router.add_route("*", "/{tail:.*}", dispatch)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{test_server.port}"
    backend = KubernetesBackend(
        k8s_client.ApiClient(configuration), page_size=2, backoff_initial=0.01, backoff_max=0.05
    )
    try:
        yield fake, backend
    finally:
        await backend.close()
        await test_server.close()


def page(items: list[dict[str, Any]], rv: int, cont: str | None = None) -> dict[str, Any]:
    listed = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in items]
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if cont:
        meta["continue"] = cont
    return {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": listed}


def wire(listed: dict[str, Any]) -> bytes:
    """A list as the API server writes it: compact, metadata before the items."""
    return json.dumps(listed, separators=(",", ":")).encode()


REFUSED = (403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
"""The answer to a streamed first list that makes the backend list page by page."""


async def take(stream: AsyncIterator[WatchEvent[Pod]], n: int) -> list[WatchEvent[Pod]]:
    return [await asyncio.wait_for(anext(stream), timeout=5) for _ in range(n)]


def names(event: WatchEvent[Pod]) -> list[str | None]:
    if event.type is EventType.REPLACED:
        return [p.metadata.name for p in event.objects]
    assert event.obj is not None
    return [event.obj.metadata.name]


async def test_it_is_a_cluster_backend(server: tuple[FakeApiServer, KubernetesBackend]) -> None:
    backend: ClusterBackend = server[1]  # checked by mypy
    assert callable(backend.watch)


def test_resource_paths() -> None:
    assert resource_path(PODS) == "/api/v1/pods"
    assert resource_path(PODS, "ns", "p", "binding") == "/api/v1/namespaces/ns/pods/p/binding"
    assert resource_path(PODGROUPS, "ns") == "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/ns/podgroups"
    assert resource_path(TOPOLOGIES, "ignored", "t") == (
        "/apis/scheduling.koordinator.sh/v1alpha1/clusternetworktopologies/t"
    )


async def test_paginated_list_bookmarks_410_and_resume(
    server: tuple[FakeApiServer, KubernetesBackend], caplog: pytest.LogCaptureFixture
) -> None:
    fake, backend = server
    p1, p2, p3 = raw_pod("p1", 3), raw_pod("p2", 4), raw_pod("p3", 5)
    fake.lists = [
        (200, page([p1, p2], 10, cont="page-2")),
        (200, page([p3], 10)),
        # the relist after 410
        (200, page([p1, p2, p3, raw_pod("p4", 16)], 20)),
    ]
    fake.watches = [
        Watch([line("ADDED", raw_pod("p4", 11)), bookmark(15)]),  # then the server's timeout closes it
        Watch([line("MODIFIED", raw_pod("p4", 16, nodeName="n1")), gone()]),
        Watch(status=500),
        Watch([line("DELETED", raw_pod("p1", 21))], end="hang"),
    ]
    caplog.set_level(logging.INFO, logger="apis.client.kubernetes")
    stream = backend.watch(PODS)
    events = await take(stream, 5)
    assert [(e.type, names(e)) for e in events] == [
        (EventType.REPLACED, ["p1", "p2", "p3"]),
        (EventType.ADDED, ["p4"]),
        (EventType.MODIFIED, ["p4"]),
        (EventType.REPLACED, ["p1", "p2", "p3", "p4"]),
        (EventType.DELETED, ["p1"]),
    ]
    assert events[0].objects[0].kind == "Pod"  # filled in for list items
    # Resumed from the bookmark's version, relisted on 410, retried the 5xx from the same version.
    assert [q["resourceVersion"] for q in fake.watch_queries] == ["10", "15", "20", "20"]
    assert all(
        q["allowWatchBookmarks"] == "true" and q["timeoutSeconds"] == "300" for q in fake.watch_queries
    )
    assert [q.get("continue") for q in fake.list_queries] == [None, "page-2", None]
    assert all(q["limit"] == "2" for q in fake.list_queries)
    assert backend.stats.relists == 1
    assert backend.stats.reconnects == 1
    assert "relisting" in caplog.text
    assert "resuming" in caplog.text
    await backend.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(stream), timeout=5)


async def test_transforms_apply_to_every_listed_and_watched_object(
    server: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    fake, plain = server
    seen: list[str | None] = []

    def mark(pod: Pod) -> Pod:
        seen.append(pod.metadata.name)
        pod.metadata.labels = {"transformed": "yes"}
        return pod

    backend = KubernetesBackend(plain.api_client, page_size=2, transforms={PODS: mark})
    fake.lists = [
        (200, page([raw_pod("p1", 3), raw_pod("p2", 4)], 10, cont="page-2")),
        (200, page([raw_pod("p3", 5)], 10)),
    ]
    fake.watches = [Watch([line("ADDED", raw_pod("p4", 11))], end="hang")]
    stream = backend.watch(PODS)
    listed, added = await take(stream, 2)
    assert seen == ["p1", "p2", "p3", "p4"]
    assert all(p.metadata.labels == {"transformed": "yes"} for p in listed.objects)
    assert added.obj is not None
    assert added.obj.metadata.labels == {"transformed": "yes"}
    assert [(p.api_version, p.kind) for p in listed.objects] == [("v1", "Pod")] * 3
    await backend.close()


async def test_a_list_frozen_page_by_page_holds_no_garbage_cycle_out_of_reach(
    server: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    """Each page is frozen as it is decoded (``freezing_lists``, koord-scheduler until synced):
    what a list leaves alive then (the next page's request in flight, its response) must not end
    in cycles, which nothing would collect until the next term unfreezes."""
    fake, backend = server
    fake.lists = [
        (200, page([raw_pod(f"p{i}", i), raw_pod(f"q{i}", i)], 10, cont=f"page-{i + 1}")) for i in range(5)
    ]
    fake.lists.append((200, page([raw_pod("last", 9)], 10)))
    gc.collect()
    gc.unfreeze()
    try:
        with freezing_lists():
            stream = backend.watch(PODS)
            (listed,) = await take(stream, 1)
            assert len(listed.objects) == 11
            del listed
            await stream.aclose()  # type: ignore[attr-defined]
        gc.collect()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert gc.collect() == 0


async def test_http_410_on_the_watch_request_relists(server: tuple[FakeApiServer, KubernetesBackend]) -> None:
    fake, backend = server
    fake.lists = [(200, page([raw_pod("p1", 3)], 10)), (200, page([raw_pod("p2", 30)], 30))]
    fake.watches = [Watch(status=410)]
    events = await take(backend.watch(PODS, field_selector="spec.nodeName="), 2)
    assert [(e.type, names(e)) for e in events] == [
        (EventType.REPLACED, ["p1"]),
        (EventType.REPLACED, ["p2"]),
    ]
    assert fake.list_queries[0]["fieldSelector"] == "spec.nodeName="
    assert fake.watch_queries[0]["fieldSelector"] == "spec.nodeName="


async def test_watch_from_a_stale_version_relists(server: tuple[FakeApiServer, KubernetesBackend]) -> None:
    """The test hook: start watching at a given resourceVersion (no initial list)."""
    fake, backend = server
    fake.watches = [Watch([gone()])]
    fake.lists = [(200, page([raw_pod("p1", 3)], 40))]
    events = await take(backend._watch(PODS, None, "1"), 1)
    assert [(e.type, names(e)) for e in events] == [(EventType.REPLACED, ["p1"])]
    assert fake.watch_queries[0]["resourceVersion"] == "1"
    assert backend.stats.relists == 1


async def test_a_dropped_stream_resumes_from_the_last_version(
    server: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    fake, backend = server
    fake.lists = [(200, page([], 10))]
    fake.watches = [
        Watch([line("ADDED", raw_pod("p1", 11)), b'{"type":"MODIFIED","obj'], end="drop"),
        Watch([line("MODIFIED", raw_pod("p1", 12))], end="hang"),
    ]
    events = await take(backend.watch(PODS), 3)
    assert [e.type for e in events] == [EventType.REPLACED, EventType.ADDED, EventType.MODIFIED]
    assert [q["resourceVersion"] for q in fake.watch_queries] == ["10", "11"]
    assert backend.stats.reconnects == 1
    assert backend.stats.relists == 0


async def test_list_failures_back_off_and_an_expired_continue_restarts_the_list(
    server: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    fake, backend = server
    fake.lists = [
        (503, {"kind": "Status", "code": 503}),
        (200, page([raw_pod("p1", 3), raw_pod("p2", 4)], 10, cont="c")),
        (410, {"kind": "Status", "code": 410, "reason": "Expired"}),
        (200, page([raw_pod("p1", 3), raw_pod("p2", 4)], 12, cont="d")),
        (200, page([raw_pod("p3", 11)], 12)),
    ]
    events = await take(backend.watch(PODS), 1)
    assert names(events[0]) == ["p1", "p2", "p3"]
    assert [q.get("continue") for q in fake.list_queries] == [None, None, "c", None, "d"]


async def test_an_object_that_does_not_validate_is_logged_and_skipped(
    server: tuple[FakeApiServer, KubernetesBackend], caplog: pytest.LogCaptureFixture
) -> None:
    fake, backend = server
    fake.lists = [(200, page([], 10))]
    fake.watches = [
        Watch(
            [
                line("ADDED", {**raw_pod("bad", 11), "spec": {"containers": "not a list"}}),
                line("ADDED", raw_pod("good", 12)),
            ],
            end="hang",
        )
    ]
    events = await take(backend.watch(PODS), 2)
    assert [names(e) for e in events] == [[], ["good"]]
    assert backend.stats.decode_errors == 1
    assert "dropping Pod default/bad" in caplog.text


async def test_a_quantity_too_large_to_parse_decodes_as_1e999_so_the_range_check_names_it(
    server: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    fake, backend = server
    huge = {"requests": {"cpu": "10e999", "memory": "-1e100000"}, "limits": {"cpu": "10e999"}}
    fake.lists = [(200, page([], 10))]
    fake.watches = [
        Watch(
            [
                line("ADDED", raw_pod("huge", 11, containers=[{"name": "main", "resources": huge}])),
                line(
                    "ADDED",
                    raw_pod(
                        "broken",
                        12,
                        containers=[{"name": "main", "resources": {"requests": {"cpu": "10e999"}}}],
                        priority="x",
                    ),
                ),
            ],
            end="hang",
        )
    ]
    fake.watches[0].lines.append(line("ADDED", raw_pod("good", 13)))
    events = await take(backend.watch(PODS), 3)
    assert [names(e) for e in events] == [[], ["huge"], ["good"]]  # "broken" is wrong beyond its size
    assert backend.stats.decode_errors == 1
    pod = events[1].obj
    assert pod is not None
    requests = pod.spec.containers[0].resources.requests  # type: ignore[union-attr]
    assert requests == {"cpu": Quantity.parse("1e999"), "memory": Quantity.parse("-1e999")}
    problems = PodInfo.of(pod).problems
    assert [p.split(":")[0] for p in problems] == [
        "spec.containers[0].resources.requests.cpu",
        "spec.containers[0].resources.requests.memory",
    ]


def kwok_pod() -> dict[str, Any]:
    """A pod as a watch brings it once it runs: managedFields, defaults, status."""
    return {
        **raw_pod("busy", 40, nodeName="n1", priority=0, tolerations=[{"key": "k", "operator": "Exists"}]),
        "metadata": {
            "name": "busy",
            "namespace": "default",
            "uid": "uid-busy",
            "resourceVersion": "40",
            "creationTimestamp": "2026-12-06T18:30:35Z",
            "labels": {"app": "identical"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u"}],
            "managedFields": [{"manager": "kwok", "operation": "Update", "fieldsV1": {"f:status": {}}}],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": None}],
            "podIP": "10.0.1.44",
            "containerStatuses": [{"name": "main", "ready": True, "state": {"running": {}}}],
        },
    }


def test_a_typed_event_is_the_object_the_plain_json_path_decodes() -> None:
    raw = kwok_pod()
    raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m", "memory": "512Mi"}}
    typed = typed_event(Pod, line("MODIFIED", raw))
    assert typed is not None
    assert typed.type == "MODIFIED"
    assert typed.object == Pod.model_validate(raw)
    for undecided in (gone(), line("ADDED", {"spec": {"containers": 1}}), b"{not json"):
        assert typed_event(Pod, undecided) is None


async def test_errors_and_unknown_event_types_still_take_the_plain_path(
    server: tuple[FakeApiServer, KubernetesBackend], caplog: pytest.LogCaptureFixture
) -> None:
    fake, backend = server
    fake.lists = [(200, page([], 10))]
    failure = line("ERROR", {"kind": "Status", "status": "Failure", "code": 500, "message": "etcd"})
    fake.watches = [
        Watch([line("SURPRISE", raw_pod("p1", 11)), line("ADDED", kwok_pod()), failure]),
        Watch([line("DELETED", kwok_pod())], end="hang"),
    ]
    events = await take(backend.watch(PODS), 3)
    assert [(e.type, names(e)) for e in events] == [
        (EventType.REPLACED, []),
        (EventType.ADDED, ["busy"]),
        (EventType.DELETED, ["busy"]),
    ]
    assert "unknown type 'SURPRISE'" in caplog.text
    assert backend.stats.reconnects == 1
    assert [q["resourceVersion"] for q in fake.watch_queries] == ["10", "40"]


async def test_close_ends_a_hanging_watch(server: tuple[FakeApiServer, KubernetesBackend]) -> None:
    fake, backend = server
    fake.lists = [(200, page([], 10))]
    stream = backend.watch(PODS)
    await take(stream, 1)
    pending = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.1)
    await backend.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(pending, timeout=5)


def bound_pod(name: str = "p") -> Pod:
    return Pod.model_validate(raw_pod(name, 7))


async def test_bind_posts_a_binding_with_the_pods_uid(
    server: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    fake, backend = server
    await backend.bind(bound_pod(), "n1")
    method, path, content_type, body = fake.requests[0]
    assert (method, path, content_type) == (
        "POST",
        "/api/v1/namespaces/default/pods/p/binding",
        "application/json",
    )
    assert body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }


@pytest.mark.parametrize(
    ("status", "error"), [(409, Conflict), (404, NotFound), (500, BackendError), (403, BackendError)]
)
async def test_bind_maps_http_errors(
    server: tuple[FakeApiServer, KubernetesBackend], status: int, error: type[BackendError]
) -> None:
    fake, backend = server
    fake.writes["/api/v1/namespaces/default/pods/p/binding"] = (
        status,
        {"kind": "Status", "code": status, "message": "pod p is already assigned to node n0"},
    )
    with pytest.raises(error, match="already assigned") as info:
        await backend.bind(bound_pod(), "n1")
    assert type(info.value) is error
    assert info.value.status == status


async def test_patches_use_the_right_content_types(server: tuple[FakeApiServer, KubernetesBackend]) -> None:
    fake, backend = server
    await backend.patch_pod(bound_pod(), {"metadata": {"annotations": {"a": "b"}}})
    await backend.patch_pod_status(bound_pod(), {"status": {"nominatedNodeName": "n1"}})
    assert [(m, p, c) for m, p, c, _ in fake.requests] == [
        ("PATCH", "/api/v1/namespaces/default/pods/p", "application/merge-patch+json"),
        ("PATCH", "/api/v1/namespaces/default/pods/p/status", "application/strategic-merge-patch+json"),
    ]


async def test_evict_posts_an_eviction_and_maps_429(server: tuple[FakeApiServer, KubernetesBackend]) -> None:
    fake, backend = server
    await backend.evict(bound_pod(), grace_period_seconds=5)
    _, path, _, body = fake.requests[0]
    assert path == "/api/v1/namespaces/default/pods/p/eviction"
    assert body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 5, "preconditions": {"uid": "uid-p"}},
    }
    fake.writes[path] = (
        429,
        {"kind": "Status", "message": "Cannot evict pod as it would violate the pod's disruption budget."},
    )
    with pytest.raises(BackendError, match="disruption budget") as info:
        await backend.evict(bound_pod())
    assert info.value.status == 429
    fake.writes[path] = (404, {"kind": "Status", "message": 'pods "p" not found'})
    with pytest.raises(NotFound):
        await backend.evict(bound_pod())


async def test_record_event_writes_events_k8s_io_and_swallows_failures(
    server: tuple[FakeApiServer, KubernetesBackend], caplog: pytest.LogCaptureFixture
) -> None:
    fake, backend = server
    event = EventRecord(
        regarding=ObjectRef(kind="Pod", namespace="default", name="p", uid="uid-p"),
        type="Warning",
        reason="FailedScheduling",
        message="x" * 2000,
    )
    await backend.record_event(event)
    _, path, _, body = fake.requests[0]
    assert path == "/apis/events.k8s.io/v1/namespaces/default/events"
    assert body["metadata"]["name"].startswith("p.")
    assert body["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": "default",
        "uid": "uid-p",
    }
    assert body["reportingController"] == "koord-scheduler"
    assert body["reportingInstance"].startswith("koord-scheduler-")
    assert (body["type"], body["reason"], body["action"]) == ("Warning", "FailedScheduling", "Scheduling")
    assert len(body["note"].encode()) <= 1024
    assert body["eventTime"].endswith("Z")

    fake.writes[path] = (500, {"kind": "Status", "message": "etcd is sad"})
    await backend.record_event(event)  # does not raise
    assert "could not record event" in caplog.text


async def test_events_beyond_the_queue_are_dropped_as_kube_schedulers_broadcaster_drops_them(
    server: tuple[FakeApiServer, KubernetesBackend], caplog: pytest.LogCaptureFixture
) -> None:
    """client-go's event broadcaster queues 1,000 events and drops the rest: a burst of bindings
    must not leave thousands of Scheduled events waiting in memory. Once the queue drains, events
    are written again."""
    fake, bounded = server
    queued = 1000  # client-go tools/events: maxQueuedEvents
    release = asyncio.Event()
    original = fake.handle

    async def stuck(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return await original(request)

    fake.handle = stuck  # type: ignore[method-assign]

    def event(name: str) -> EventRecord:
        return EventRecord(
            regarding=ObjectRef(kind="Pod", namespace="default", name=name), reason="Scheduled", message="m"
        )

    waiting = [asyncio.create_task(bounded.record_event(event(f"p{i}"))) for i in range(queued)]
    await asyncio.sleep(0.1)
    with caplog.at_level(logging.WARNING):
        for i in range(queued, queued + 7):  # the queue is full: each returns at once, unwritten
            await asyncio.wait_for(bounded.record_event(event(f"p{i}")), timeout=1)
    assert bounded.events_dropped == 7
    assert caplog.text.count("dropping new ones until they drain") == 1
    release.set()
    await asyncio.gather(*waiting)
    await bounded.record_event(event("after"))
    names = [body["regarding"]["name"] for _, path, _, body in fake.requests if path.endswith("/events")]
    assert sorted(names) == sorted(["after", *(f"p{i}" for i in range(queued))])
    assert bounded.events_dropped == 7


async def test_writes_are_limited_by_the_semaphore(server: tuple[FakeApiServer, KubernetesBackend]) -> None:
    fake, backend = server
    limited = KubernetesBackend(backend.api_client, max_concurrency=2)
    in_flight = peak = 0
    original = fake.handle

    async def slow(request: web.Request) -> web.StreamResponse:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        return await original(request)

    fake.handle = slow  # type: ignore[method-assign]
    await asyncio.gather(*(limited.bind(bound_pod(f"p{i}"), "n1") for i in range(8)))
    assert len(fake.requests) == 8
    assert peak == 2


async def test_patch_custom_merge_patches_the_main_resource(
    server: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    from apis.client.backend import ELASTICQUOTAS

    fake, backend = server
    patch = {"metadata": {"annotations": {"a": "b"}}, "status": {"used": {"cpu": "1"}}}
    await backend.patch_custom(ELASTICQUOTAS, "team", "q", patch)
    assert [(m, p, c, body) for m, p, c, body in fake.requests] == [
        (
            "PATCH",
            "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/team/elasticquotas/q",
            "application/merge-patch+json",
            patch,
        )
    ]


async def test_the_next_page_is_asked_for_before_the_last_one_is_decoded(
    server: tuple[FakeApiServer, KubernetesBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, backend = server
    fake.lists = [
        (200, page([raw_pod("p1", 3), raw_pod("p2", 4)], 10, cont="page-2")),
        (200, page([raw_pod("p3", 5), raw_pod("p4", 6)], 10, cont="page-3")),
        (200, page([raw_pod("p5", 7)], 10)),
    ]
    asked: list[str | None] = []
    send = kubernetes_module.request_bytes

    async def recording_send(*args: Any, **kwargs: Any) -> bytes:
        asked.append(dict(kwargs["query"]).get("continue"))
        return await send(*args, **kwargs)

    monkeypatch.setattr(kubernetes_module, "request_bytes", recording_send)
    asked_when_decoded: list[list[str | None]] = []
    decode = backend._decode_page

    def recording_decode(*args: Any) -> Any:
        asked_when_decoded.append(list(asked))
        return decode(*args)

    monkeypatch.setattr(backend, "_decode_page", recording_decode)
    listed = await take(backend.watch(PODS), 1)
    assert names(listed[0]) == ["p1", "p2", "p3", "p4", "p5"]
    assert asked_when_decoded == [
        [None, "page-2"],
        [None, "page-2", "page-3"],
        [None, "page-2", "page-3"],
    ]
    assert [q.get("continue") for q in fake.list_queries] == [None, "page-2", "page-3"]


async def test_paged_lists_emit_their_pages_before_the_replaced_that_carries_the_same_objects(
    server: tuple[FakeApiServer, KubernetesBackend], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="apis.client.kubernetes")
    fake, plain = server
    backend = KubernetesBackend(
        plain.api_client, page_size=2, backoff_initial=0.01, paged_lists=(PODS,), page_wait_seconds=0.0
    )
    fake.lists = [
        REFUSED,
        (200, page([raw_pod("p1", 3), raw_pod("p2", 4)], 10, cont="c")),
        (410, {"kind": "Status", "code": 410, "reason": "Expired"}),  # the list starts over
        (200, page([raw_pod("p1", 3), raw_pod("p2", 4)], 12, cont="d")),
        (200, page([raw_pod("p3", 11), raw_pod("p4", 11)], 12, cont="e")),
        (200, page([raw_pod("p5", 11)], 12)),
    ]
    fake.watches = [Watch([line("ADDED", raw_pod("p6", 13))], end="hang")]
    events = await take(backend.watch(PODS), 5)
    assert [(e.type, [p.metadata.name for p in e.objects]) for e in events[:4]] == [
        (EventType.LISTED, ["p1", "p2"]),  # of the list that started over
        (EventType.LISTED, ["p1", "p2"]),
        (EventType.LISTED, ["p3", "p4"]),  # the last page comes with the REPLACED alone
        (EventType.REPLACED, ["p1", "p2", "p3", "p4", "p5"]),
    ]
    replaced = events[3].objects
    assert all(a is b for a, b in zip([*events[1].objects, *events[2].objects], replaced, strict=False))
    assert not any(a is b for a, b in zip(events[0].objects, replaced, strict=False))
    assert events[4].type is EventType.ADDED
    assert "listed pods: 5 objects" in caplog.text
    assert "2 pages handed out ahead" in caplog.text  # of the list that completed
    await backend.close()


async def test_a_paged_list_the_api_server_keeps_ahead_of_holds_its_pages_for_the_replaced(
    server: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    fake, plain = server
    backend = KubernetesBackend(plain.api_client, page_size=2, paged_lists=(PODS,), page_wait_seconds=3600)
    fake.lists = [
        REFUSED,
        (200, page([raw_pod("p1", 3), raw_pod("p2", 4)], 10, cont="c")),
        (200, page([raw_pod("p3", 5)], 10)),
    ]
    fake.watches = [Watch([line("ADDED", raw_pod("p4", 11))], end="hang")]
    events = await take(backend.watch(PODS), 2)
    assert [(e.type, names(e)) for e in events] == [
        (EventType.REPLACED, ["p1", "p2", "p3"]),
        (EventType.ADDED, ["p4"]),
    ]
    await backend.close()
