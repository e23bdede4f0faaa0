"""The first pod list handled page by page (LISTED events, ``KubernetesBackend``'s ``paged_lists``,
paginated or streamed) ends in exactly the state the whole list handled at once ends in: the
cache, the queue (active, gated, nominations), Coscheduling's gangs and ElasticQuota's ledger; and
a relist after it, which drops pods, replaces that state as it replaces the whole-list path's."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from apis.client.backend import EventType, WatchEvent
from apis.client.liststream import ListCutter
from apis.core import Node, Pod
from apis.extension.gang import gang_id
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.elastic_quota.plugin import ElasticQuota

GANG = "gang.scheduling.koordinator.sh/name"
MIN = "gang.scheduling.koordinator.sh/min-available"


def node(name: str) -> Node:
    return Node.model_validate(
        {
            "metadata": {"name": name, "uid": f"uid-{name}"},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
        }
    )


def pod(
    name: str,
    *,
    on: str | None = None,
    gang: tuple[str, int] | None = None,
    scheduler: str = "koord-scheduler",
    phase: str | None = None,
    nominated: str | None = None,
    version: int = 1,
) -> Pod:
    annotations = {GANG: gang[0], MIN: str(gang[1])} if gang else {}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
    }
    if on:
        spec["nodeName"] = on
    status: dict[str, Any] = {"phase": phase or ("Running" if on else "Pending")}
    if nominated:
        status["nominatedNodeName"] = nominated
    meta = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "resourceVersion": str(version),
        "annotations": annotations,
    }
    return Pod.model_validate({"metadata": meta, "spec": spec, "status": status})


def first_list() -> list[Pod]:
    """Bound and pending pods interleaved over the pages; a gang whose members span pages (ready
    only with the last), a gang left short (gated), other schedulers' pods, a finished pod."""
    return [
        pod("bound-0", on="n0"),
        pod("full-0", gang=("full", 3)),
        pod("pending-0"),
        pod("short-0", gang=("short", 3)),
        pod("bound-1", on="n1"),
        pod("full-1", gang=("full", 3), on="n1"),
        pod("other-0", scheduler="default-scheduler"),
        pod("done-0", on="n0", phase="Succeeded"),
        pod("pending-1", nominated="n1"),
        pod("full-2", gang=("full", 3)),
        pod("bound-2", on="n2"),
    ]


def relist() -> list[Pod]:
    """A relist: some pods gone (one of each kind), some bound since, one new."""
    kept = {"bound-0", "full-0", "pending-0", "full-1", "other-0", "full-2"}
    pods = [p for p in first_list() if p.metadata.name in kept]
    pods.append(pod("pending-0", on="n2", version=2))  # bound meanwhile (same uid, last wins)
    pods.append(pod("late-0", gang=("short", 3)))
    return pods


def app() -> SchedulerApp:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    made = SchedulerApp(
        AppSettings(profiles=tuple(config.profiles)), MemoryBackend(), DEFAULT_REGISTRY, SchedulerMetrics()
    )
    made.handlers.handle_node_event(WatchEvent(EventType.REPLACED, objects=[node(f"n{i}") for i in range(3)]))
    return made


def state(a: SchedulerApp) -> dict[str, Any]:
    fwk = next(iter(a.frameworks.values()))
    gangs = fwk.plugin("Coscheduling")
    quota = fwk.plugin("ElasticQuota")
    assert isinstance(gangs, Coscheduling)
    assert isinstance(quota, ElasticQuota)
    ledger = quota.ledger
    return {
        "assigned": sorted((p.uid, p.node_name) for p in a.cache.assigned_pods()),
        "node pods": {n: sorted(info.pods) for n, info in a.cache.nodes.items()},
        "requested": {
            n: {r: a.cache.table.requested_exact(info.row, r) for r in a.cache.table.resources}
            for n, info in a.cache.nodes.items()
        },
        "queue": sorted((qp.pod.uid, qp.gated_by, qp.attempts) for qp in a.queue.pending()),
        "counts": a.queue.counts(),
        "nominated": {p.uid: a.cache.nominated_node(p.uid) for p in (qp.pod for qp in a.queue.pending())},
        "gangs": [
            (
                gang.id,
                sorted(gang.children),
                sorted(gang.bound),
                gang.min_member,
                gangs.gangs.check(gang),
            )
            for gang in (gangs.gangs.gang(gang_id("default", name)) for name in ("full", "short"))
            if gang is not None
        ],
        "ledger": sorted(
            (uid, c.quota, c.assigned) for uid in ledger.uids() if (c := ledger.charge(uid)) is not None
        ),
        "synced": a.handlers.synced_pods.is_set(),
    }


def whole(a: SchedulerApp, pods: Sequence[Pod]) -> None:
    a.handlers.handle_pod_event(WatchEvent(EventType.REPLACED, objects=tuple(pods)))


def paged(a: SchedulerApp, pods: Sequence[Pod], size: int, pages: int | None = None) -> None:
    """The list's first ``pages`` pages of ``size`` as LISTED events (all unless told), then its REPLACED."""
    starts = list(range(0, len(pods), size))[:pages]
    for start in starts:
        a.handlers.handle_pod_event(WatchEvent(EventType.LISTED, objects=tuple(pods[start : start + size])))
    whole(a, pods)


def test_a_paged_first_list_ends_in_the_state_of_the_whole_list() -> None:
    pods = first_list()
    expected = app()
    whole(expected, pods)
    for size in (1, 2, 4, len(pods)):
        for pages in (None, 1, 2):  # every page, or the backend held the later ones back
            got = app()
            paged(got, pods, size, pages)
            assert state(got) == state(expected), (size, pages)
    assert state(expected)["counts"].gated == 1  # short-0 waits for its gang; full-* do not


def test_pages_account_bound_pods_at_once_and_queue_nothing_before_the_list_ends() -> None:
    pods = first_list()
    a = app()
    a.handlers.handle_pod_event(WatchEvent(EventType.LISTED, objects=tuple(pods[:5])))
    assert sorted(p.uid for p in a.cache.assigned_pods()) == ["uid-bound-0", "uid-bound-1"]
    assert list(a.queue.pending()) == []  # PreEnqueue waits for every gang member
    assert not a.handlers.synced_pods.is_set()


def test_a_relist_after_a_paged_first_list_replaces_state_as_after_a_whole_one() -> None:
    expected = app()
    whole(expected, first_list())
    whole(expected, relist())
    got = app()
    paged(got, first_list(), 3)
    # A relist's pages are not handled ahead: its REPLACED reconciles everything.
    paged(got, relist(), 2)
    assert state(got) == state(expected)
    assert "uid-bound-1" not in {p.uid for p in got.cache.assigned_pods()}
    assert ("uid-pending-0", "n2") in state(got)["assigned"]


def test_a_first_list_that_started_over_drops_what_only_its_abandoned_pages_had() -> None:
    """The backend emits an abandoned list's pages too (its continue token expired): the REPLACED of
    the list that completed still decides what exists."""
    abandoned = [pod("bound-9", on="n0"), pod("pending-9"), pod("bound-0", on="n0")]
    pods = first_list()
    expected = app()
    whole(expected, pods)
    got = app()
    got.handlers.handle_pod_event(WatchEvent(EventType.LISTED, objects=tuple(abandoned)))
    paged(got, pods, 4)
    assert state(got) == state(expected)


def streamed_pages(pods: Sequence[Pod], sizes: list[int], batch_bytes: int) -> list[list[Pod]]:
    """``pods`` as the API server writes a list, fed in chunks of ``sizes`` (cycled) to the cutter of
    the backend's streamed first list; its pages as decoded, the last (``end``'s) included."""
    items = [p.model_dump(mode="json", by_alias=True, exclude_unset=True) for p in pods]
    body = json.dumps(
        {"kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": items}, separators=(",", ":")
    )
    cutter, data, pos, i = ListCutter(batch_bytes), body.encode(), 0, 0
    pages: list[list[Pod]] = []
    while pos < len(data):
        cutter.feed(data[pos : pos + sizes[i % len(sizes)]])
        pos, i = pos + sizes[i % len(sizes)], i + 1
        while (page := cutter.page()) is not None:
            pages.append([Pod.model_validate(raw) for raw in json.loads(page)["items"]])
    pages.append([Pod.model_validate(raw) for raw in json.loads(cutter.end())["items"]])
    return pages


@pytest.mark.parametrize(
    ("sizes", "batch_bytes"), [([1], 1), ([7, 300, 1], 200), ([5000], 900), ([64], 1 << 20)]
)
def test_a_streamed_first_list_ends_in_the_state_of_the_whole_list(
    sizes: list[int], batch_bytes: int
) -> None:
    """The backend's streamed first list: pages of whatever items the chunks completed, each but
    the last handed out as LISTED, the REPLACED carrying the very same objects."""
    expected = app()
    whole(expected, first_list())
    pages = streamed_pages(first_list(), sizes, batch_bytes)
    listed = [pod for page in pages for pod in page]
    assert [p.metadata.name for p in listed] == [p.metadata.name for p in first_list()]
    got = app()
    for page in pages[:-1]:
        got.handlers.handle_pod_event(WatchEvent(EventType.LISTED, objects=tuple(page)))
    whole(got, listed)
    assert state(got) == state(expected)


def test_a_broken_stream_then_the_paginated_list_ends_in_the_state_of_the_whole_list() -> None:
    """A stream that broke after some pages (the backend falls back to the paginated list): its
    pages were handed out, then the paginated list's; the REPLACED of the latter decides."""
    expected = app()
    whole(expected, first_list())
    got = app()
    broken = streamed_pages(first_list()[:6], [3], 1)[:-1]  # the stream broke within the 6th pod
    for page in broken:
        got.handlers.handle_pod_event(WatchEvent(EventType.LISTED, objects=tuple(page)))
    paged(got, first_list(), 4)
    assert state(got) == state(expected)
