"""The first descheduling round waits until the caches hold what a list of the API server returns:
Kopf delivers its first listing object by object, and a round that ran on half of it decided on
half the cluster (the full tier's LowNodeLoad dry run once saw none of the hot nodes' pods)."""

from __future__ import annotations

import asyncio

import pytest

from operators.descheduler import app as app_module
from operators.descheduler.app import Descheduler
from operators.descheduler.config import DeschedulerConfiguration
from operators.descheduler.informers import SYNCED_KINDS
from tests.operators.descheduler.helpers import pod_body

Keys = set[tuple[str, str]]


class ListingApi:
    """What the API server lists now, per collection path; counts the lists."""

    def __init__(self, listed: dict[str, Keys]) -> None:
        self.listed = listed
        self.calls = 0

    async def listed_keys(self, path: str) -> Keys:
        self.calls += 1
        kind = next(k for k, p in SYNCED_KINDS.items() if p == path)
        return set(self.listed.get(kind, set()))


def descheduler(api: ListingApi) -> Descheduler:
    app = Descheduler(DeschedulerConfiguration(), kubeconfig=None, leader_elect=False, initial_delay=0)
    app._api = api  # type: ignore[assignment]
    return app


async def test_the_first_round_waits_for_every_listed_pod_and_node() -> None:
    api = ListingApi({"pods": {("ns", "a"), ("ns", "b")}, "nodes": {("", "n1")}})
    app = descheduler(api)
    gate = asyncio.create_task(app._caches_synced())
    app.store.upsert_pod(pod_body("a", namespace="ns"))
    await asyncio.sleep(0.5)
    assert not gate.done()  # pod b and node n1 are listed but not delivered
    app.store.upsert_pod(pod_body("b", namespace="ns"))
    app.store.upsert_node({"metadata": {"name": "n1"}})
    await asyncio.wait_for(gate, timeout=2)


async def test_an_object_deleted_before_its_event_arrived_does_not_hold_the_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(app_module, "SYNC_RELIST", 0.3)
    api = ListingApi({"pods": {("ns", "gone")}})
    app = descheduler(api)
    gate = asyncio.create_task(app._caches_synced())
    await asyncio.sleep(0.5)
    assert not gate.done()
    api.listed = {}  # deleted: a fresh list no longer has it
    await asyncio.wait_for(gate, timeout=2)
    assert api.calls >= 2 * len(SYNCED_KINDS)


async def test_after_the_timeout_the_round_runs_and_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(app_module, "SYNC_TIMEOUT", 0.3)
    app = descheduler(ListingApi({"nodes": {("", "n1"), ("", "n2")}}))
    await asyncio.wait_for(app._caches_synced(), timeout=2)
    assert "the caches still miss 2 nodes" in caplog.text
