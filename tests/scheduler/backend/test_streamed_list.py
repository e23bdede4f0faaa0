"""The first list of a ``paged_lists`` resource: one ``resourceVersion=0`` response decoded in
pages as it streams in (``KubernetesBackend._streamed_list``), against the scripted fake API server
of ``test_kubernetes``. It ends in the objects and the resourceVersion the paginated list ends in;
an invalid object is dropped and logged; a refusal, a broken stream or a body that does not decode
falls back to the paginated list at once; a relist stays paginated."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from apis.client.backend import PODS, EventType, WatchEvent
from apis.client.kubernetes import KubernetesBackend
from apis.core import Pod
from tests.scheduler.backend.test_kubernetes import (
    REFUSED,
    Body,
    FakeApiServer,
    Watch,
    gone,
    line,
    names,
    page,
    raw_pod,
    server,
    take,
    wire,
)

__all__ = ["server"]  # the fixture, shared

PODS_LISTED = [raw_pod(f"p{i}", 100 + i, nodeName=f"n{i % 3}") for i in range(12)]


@pytest_asyncio.fixture(loop_scope="function")
async def streaming(
    server: tuple[FakeApiServer, KubernetesBackend],
) -> AsyncIterator[tuple[FakeApiServer, KubernetesBackend]]:
    """A backend that streams the first pod list, decoding every 600 bytes of items (pages of two
    or three of these pods) and handing each page out at once."""
    fake, plain = server
    backend = KubernetesBackend(
        plain.api_client,
        page_size=5,
        backoff_initial=0.01,
        paged_lists=(PODS,),
        page_wait_seconds=0.0,
        list_batch_bytes=600,
    )
    try:
        yield fake, backend
    finally:
        await backend.close()


async def until_watching(stream: AsyncIterator[WatchEvent[Pod]]) -> list[WatchEvent[Pod]]:
    """The events up to the first of the watch (the fake's watch sends one ADDED)."""
    events: list[WatchEvent[Pod]] = []
    while not events or events[-1].type is not EventType.ADDED:
        events += await take(stream, 1)
    return events


async def test_a_streamed_list_ends_in_the_objects_of_the_paginated_list(
    streaming: tuple[FakeApiServer, KubernetesBackend], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="apis.client.kubernetes")
    fake, backend = streaming
    fake.lists = [Body(wire(page(PODS_LISTED, 200)), chunk=7)]
    fake.watches = [Watch([line("ADDED", raw_pod("late", 201))], end="hang")]
    events = await until_watching(backend.watch(PODS))
    assert fake.list_queries == [{"resourceVersion": "0"}]  # one request, no limit
    assert fake.list_encodings == ["identity"]  # not gzipped: inflated, it comes in chunks of MBs
    assert fake.watch_queries[0]["resourceVersion"] == "200"
    *pages, replaced, added = events
    assert pages
    assert all(e.type is EventType.LISTED for e in pages)
    assert replaced.type is EventType.REPLACED
    wanted = [p["metadata"]["name"] for p in PODS_LISTED]
    assert [p.metadata.name for p in replaced.objects] == wanted
    handed = [p for e in pages for p in e.objects]
    assert handed
    assert all(a is b for a, b in zip(handed, replaced.objects, strict=False))
    assert len(handed) < len(wanted)  # the last page comes with the REPLACED alone
    assert names(added) == ["late"]
    assert "listed pods: 12 objects at resourceVersion 200" in caplog.text
    assert "one response, streamed" in caplog.text

    # The same list paginated (the stream refused) gives equal objects, transformed alike.
    fake.lists = [
        REFUSED,
        *(
            (200, page(PODS_LISTED[i : i + 5], 200, cont=f"c{i}" if i + 5 < len(PODS_LISTED) else None))
            for i in range(0, len(PODS_LISTED), 5)
        ),
    ]
    fake.watches = [Watch([line("ADDED", raw_pod("late", 201))], end="hang")]
    paginated = [e for e in await until_watching(backend.watch(PODS)) if e.type is EventType.REPLACED]
    assert [p.model_dump() for p in paginated[0].objects] == [p.model_dump() for p in replaced.objects]


async def test_an_invalid_object_in_the_stream_is_dropped_and_logged(
    streaming: tuple[FakeApiServer, KubernetesBackend], caplog: pytest.LogCaptureFixture
) -> None:
    fake, backend = streaming
    bad = {**raw_pod("bad", 150), "spec": {"containers": "not a list"}}
    huge = raw_pod("huge", 151, containers=[{"name": "m", "resources": {"requests": {"cpu": "1e1000"}}}])
    listed = [*PODS_LISTED[:4], bad, *PODS_LISTED[4:8], huge, *PODS_LISTED[8:]]
    fake.lists = [Body(wire(page(listed, 200)), chunk=1 << 16)]
    fake.watches = [Watch([line("ADDED", raw_pod("late", 201))], end="hang")]
    events = await until_watching(backend.watch(PODS))
    replaced = next(e for e in events if e.type is EventType.REPLACED)
    wanted = [p["metadata"]["name"] for p in listed if p is not bad]
    assert [p.metadata.name for p in replaced.objects] == wanted
    assert backend.stats.decode_errors == 1
    assert "dropping Pod default/bad" in caplog.text
    assert len(fake.list_queries) == 1  # no fallback: the stream was good


@pytest.mark.parametrize(
    "answer",
    [
        REFUSED,
        (500, {"kind": "Status", "code": 500}),
        Body(wire(page(PODS_LISTED, 200))[:-400], end="drop"),  # the connection breaks
        Body(wire(page(PODS_LISTED, 200))[:-400]),  # the body ends early
        Body(b"<html>not json</html>" * 100),
        Body(wire({"kind": "PodList", "items": []})),  # no resourceVersion to watch from
    ],
    ids=["refused", "server-error", "dropped", "truncated", "not-json", "no-version"],
)
async def test_a_stream_that_fails_falls_back_to_the_paginated_list_at_once(
    streaming: tuple[FakeApiServer, KubernetesBackend],
    caplog: pytest.LogCaptureFixture,
    answer: tuple[int, dict[str, Any]] | Body,
) -> None:
    fake, backend = streaming
    fake.lists = [
        answer,
        (200, page(PODS_LISTED[:5], 300, cont="c")),
        (200, page(PODS_LISTED[5:], 300)),
    ]
    fake.watches = [Watch([line("ADDED", raw_pod("late", 301))], end="hang")]
    events = await until_watching(backend.watch(PODS))
    replaced = [e for e in events if e.type is EventType.REPLACED]
    assert len(replaced) == 1
    assert [p.metadata.name for p in replaced[0].objects] == [p["metadata"]["name"] for p in PODS_LISTED]
    assert [q.get("resourceVersion") for q in fake.list_queries] == ["0", None, None]
    assert [q.get("continue") for q in fake.list_queries] == [None, None, "c"]
    assert fake.watch_queries[0]["resourceVersion"] == "300"
    assert "listing it page by page" in caplog.text
    # Pages of the broken stream came before, as an abandoned list's do; the REPLACED decides.
    assert events[-1].type is EventType.ADDED


async def test_a_relist_after_410_is_paginated(streaming: tuple[FakeApiServer, KubernetesBackend]) -> None:
    fake, backend = streaming
    fake.lists = [
        Body(wire(page(PODS_LISTED[:3], 200))),
        (200, page(PODS_LISTED[3:5], 400)),
    ]
    fake.watches = [Watch([gone()]), Watch([line("ADDED", raw_pod("late", 401))], end="hang")]
    events = await until_watching(backend.watch(PODS))
    replaced = [e for e in events if e.type is EventType.REPLACED]
    assert [[p.metadata.name for p in e.objects] for e in replaced] == [["p0", "p1", "p2"], ["p3", "p4"]]
    assert [q.get("resourceVersion") for q in fake.list_queries] == ["0", None]
    assert fake.list_queries[1]["limit"] == "5"
    assert backend.stats.relists == 1


async def asked(fake: FakeApiServer, count: int) -> None:
    """Until the fake has been asked for ``count`` lists."""
    async with asyncio.timeout(5):
        while len(fake.list_queries) < count:  # noqa: ASYNC110 (the fake records, it signals nothing)
            await asyncio.sleep(0.01)


async def test_a_list_asked_for_ahead_is_the_one_the_first_watch_reads(
    streaming: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    fake, backend = streaming
    fake.lists = [Body(wire(page(PODS_LISTED, 200)), chunk=7)]
    fake.watches = [Watch([line("ADDED", raw_pod("late", 201))], end="hang")]
    backend.ask_first_list(PODS)
    await asked(fake, 1)  # before anyone watches
    events = await until_watching(backend.watch(PODS))
    replaced = [e for e in events if e.type is EventType.REPLACED]
    assert [p.metadata.name for p in replaced[0].objects] == [p["metadata"]["name"] for p in PODS_LISTED]
    assert fake.list_queries == [{"resourceVersion": "0"}]  # that one request, not another
    assert fake.watch_queries[0]["resourceVersion"] == "200"


async def test_a_list_asked_for_ahead_and_refused_falls_back_to_the_paginated_list(
    streaming: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    fake, backend = streaming
    fake.lists = [REFUSED, (200, page(PODS_LISTED, 300))]
    fake.watches = [Watch([line("ADDED", raw_pod("late", 301))], end="hang")]
    backend.ask_first_list(PODS)
    await asked(fake, 1)
    events = await until_watching(backend.watch(PODS))
    replaced = [e for e in events if e.type is EventType.REPLACED]
    assert [p.metadata.name for p in replaced[0].objects] == [p["metadata"]["name"] for p in PODS_LISTED]
    assert [q.get("resourceVersion") for q in fake.list_queries] == ["0", None]


async def test_a_list_asked_for_ahead_and_never_watched_is_closed_with_the_backend(
    streaming: tuple[FakeApiServer, KubernetesBackend],
) -> None:
    fake, backend = streaming
    fake.lists = [Body(wire(page(PODS_LISTED, 200)), chunk=7)]
    backend.ask_first_list(PODS)
    await asked(fake, 1)
    await asyncio.sleep(0.05)  # the response's head has come
    await backend.close()
    assert backend.closed
