"""The informer against an in-memory API server: the first list, events applied, 410 Gone relisted,
failures backed off and resumed from the last resourceVersion, bookmarks moving it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from apis.client.watch import Backoff
from koordlet.states.informer import Informer
from koordlet.states.resources import RESOURCES, Kind
from koordlet.states.store import States
from tests.koordlet.states.fake_api import FakeListWatch, event, gone, named


def _pod(name: str, node: str, rv: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}", "resourceVersion": rv},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
    }


def _informer(server: FakeListWatch, kind: Kind, states: States, selector: str | None = None) -> Informer:
    return Informer(server, RESOURCES[kind], states, field_selector=selector, backoff_initial=0.01)


async def _run_until_watches(informer: Informer, server: FakeListWatch, count: int) -> None:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(server.wait_watches(count), 5)
    finally:
        task.cancel()


async def test_the_first_list_fills_the_states_and_the_watch_starts_at_its_version() -> None:
    server = FakeListWatch([_pod("a", "n1", "5"), _pod("b", "n1", "6")], resource_version="7")
    states = States()
    informer = _informer(server, Kind.POD, states, "spec.nodeName=n1")
    assert not states.synced(Kind.POD)
    await _run_until_watches(informer, server, 1)
    assert states.synced(Kind.POD)
    assert sorted(p.metadata.name or "" for p in states.pods("n1")) == ["a", "b"]
    assert server.lists == ["spec.nodeName=n1"]
    assert server.watches == ["7"]


async def test_events_are_applied_and_the_pods_follow_their_node() -> None:
    server = FakeListWatch([_pod("a", "n1", "5")], resource_version="7")
    server.watch_scripts = [
        [
            event("ADDED", _pod("b", "n1", "8")),
            event("MODIFIED", _pod("a", "n2", "9")),
            event("DELETED", _pod("b", "n1", "10")),
        ]
    ]
    states = States()
    informer = _informer(server, Kind.POD, states)
    await _run_until_watches(informer, server, 2)
    assert states.pods("n1") == []
    assert [p.metadata.name for p in states.pods("n2")] == ["a"]
    assert server.watches == ["7", "10"]  # resumed where the first watch ended
    assert server.lists == [None]  # no relist for a watch the server ended


async def test_410_gone_relists_and_drops_what_was_deleted_meanwhile() -> None:
    server = FakeListWatch([named("n1", "5"), named("n2", "6")], resource_version="7")
    server.watch_scripts = [[gone()]]
    server.relists = [([named("n1", "20")], "21")]  # n2 deleted while the watch was gone
    states = States()
    informer = _informer(server, Kind.NODE, states)
    await _run_until_watches(informer, server, 2)
    assert [n.metadata.name for n in states.nodes()] == ["n1"]
    assert server.watches == ["7", "21"]
    assert informer.stats.relists == 1
    assert informer.stats.lists == 2


async def test_a_410_error_event_relists_too() -> None:
    server = FakeListWatch([named("n1", "5")], resource_version="7")
    server.watch_scripts = [[{"type": "ERROR", "object": {"code": 410, "message": "too old"}}]]
    informer = _informer(server, Kind.NODE, States())
    await _run_until_watches(informer, server, 2)
    assert informer.stats.relists == 1
    assert len(server.lists) == 2


async def test_a_failure_backs_off_and_resumes_from_the_last_version(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = FakeListWatch([named("n1", "5")], resource_version="7")
    server.list_failures = [ConnectionError("refused")]
    server.watch_scripts = [[event("MODIFIED", named("n1", "8")), OSError("connection reset")]]
    states = States()
    informer = _informer(server, Kind.NODE, states)
    with caplog.at_level(logging.WARNING, "koordlet.states"):
        await _run_until_watches(informer, server, 2)
    assert server.lists == [None, None]  # the failed list retried, then never again
    assert server.watches == ["7", "8"]  # resumed from the event seen before the failure
    assert informer.stats.reconnects == 2
    assert "list nodes failed at resourceVersion None: refused" in caplog.text
    assert "watch nodes failed at resourceVersion 8: connection reset" in caplog.text
    node = states.node("n1")
    assert node is not None
    assert node.metadata.resource_version == "8"


async def test_bookmarks_move_the_version_without_changing_the_objects() -> None:
    server = FakeListWatch([named("n1", "5")], resource_version="7")
    server.watch_scripts = [[event("BOOKMARK", {"metadata": {"resourceVersion": "42"}})]]
    states = States()
    changes = states.subscribe(Kind.NODE)
    informer = _informer(server, Kind.NODE, states)
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(server.wait_watches(1), 5)
    assert await changes.wait(0)  # the list
    await asyncio.wait_for(server.wait_watches(2), 5)
    task.cancel()
    assert server.watches == ["7", "42"]
    assert not await changes.wait(0)  # a bookmark is no change
    assert [n.metadata.name for n in states.nodes()] == ["n1"]


async def test_an_object_that_does_not_validate_keeps_the_last_good_one_on_relist(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = named("n1", "5", spec={"resourceUsedThresholdWithBE": {"enable": True}})
    server = FakeListWatch([good], resource_version="7")
    server.watch_scripts = [[gone()]]
    bad = named("n1", "9", spec={"resourceUsedThresholdWithBE": {"enable": "sometimes"}})
    server.relists = [([bad], "10")]
    states = States()
    informer = _informer(server, Kind.NODE_SLO, states)
    with caplog.at_level(logging.WARNING, "koordlet.states"):
        await _run_until_watches(informer, server, 2)
    slo = states.node_slo("n1")
    assert slo is not None
    assert slo.metadata.resource_version == "5"
    assert "spec.resourceUsedThresholdWithBE.enable" in caplog.text
    assert informer.stats.decode_errors == 1


def test_the_backoff_doubles_up_to_its_cap_and_resets() -> None:
    backoff = Backoff(1.0, 4.0)
    delays = [backoff.next_delay() for _ in range(4)]
    assert [int(d) for d in delays] == [1, 2, 4, 4]
    assert all(d <= base * 1.2 for d, base in zip(delays, [1, 2, 4, 4], strict=True))
    backoff.reset()
    assert backoff.next_delay() < 1.2
