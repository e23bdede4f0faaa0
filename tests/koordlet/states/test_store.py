"""NodeStates' store: pods indexed by node, and the "changed" notifications the loops wait on."""

from __future__ import annotations

import asyncio

from apis.core import Node
from koordlet.states.node_states import ClusterStates, NodeStates
from koordlet.states.resources import Kind
from koordlet.states.store import States
from tests.koordlet.qos.podfactory import pod
from tests.koordlet.states.fake_api import FakeListWatch


def _node(name: str) -> Node:
    return Node.model_validate({"metadata": {"name": name}})


async def test_a_subscriber_wakes_for_its_kinds_only() -> None:
    states = States()
    pods = states.subscribe(Kind.POD, Kind.NODE)
    slos = states.subscribe(Kind.NODE_SLO)
    assert not await pods.wait(0)
    waiter = asyncio.create_task(pods.wait(5))
    await asyncio.sleep(0)
    states.upsert(Kind.POD, pod("a", node="n1"))
    assert await asyncio.wait_for(waiter, 1)  # woken at once, not after its timeout
    assert not await pods.wait(0)  # the change was consumed
    assert not await slos.wait(0)
    states.upsert(Kind.NODE, _node("n1"))
    assert await pods.wait(0)


async def test_deleting_what_is_not_there_is_no_change() -> None:
    states = States()
    changes = states.subscribe(Kind.POD)
    states.delete(Kind.POD, "default/nothing")
    assert not await changes.wait(0)


def test_pods_are_indexed_by_node_and_move_with_it() -> None:
    states = States()
    states.replace(Kind.POD, [pod("a", node="n1"), pod("b", node="n1"), pod("c", node="n2")])
    assert sorted(p.metadata.name or "" for p in states.pods("n1")) == ["a", "b"]
    states.upsert(Kind.POD, pod("a", node="n2"))
    assert [p.metadata.name for p in states.pods("n1")] == ["b"]
    assert sorted(p.metadata.name or "" for p in states.pods("n2")) == ["a", "c"]
    states.delete(Kind.POD, "default/b")
    assert states.pods("n1") == []
    assert len(states.pods()) == 2


async def test_wait_synced_returns_once_each_kind_is_listed() -> None:
    states = States()
    waiter = asyncio.create_task(states.wait_synced(Kind.NODE, Kind.POD))
    states.replace(Kind.NODE, [])
    await asyncio.sleep(0)
    assert not waiter.done()
    states.replace(Kind.POD, [])
    await asyncio.wait_for(waiter, 1)
    assert states.synced(Kind.NODE, Kind.POD)
    assert not states.synced()


def test_a_node_watches_its_own_objects_and_the_simulation_all_bound_pods() -> None:
    node = NodeStates(FakeListWatch(), "n1")
    selectors = {kind: informer.field_selector for kind, informer in node.informers.items()}
    assert selectors == {
        Kind.NODE: "metadata.name=n1",
        Kind.POD: "spec.nodeName=n1",
        Kind.NODE_SLO: "metadata.name=n1",
        Kind.NODE_METRIC: "metadata.name=n1",
        Kind.TOPOLOGY: "metadata.name=n1",
    }
    cluster = ClusterStates(FakeListWatch())
    assert cluster.informers[Kind.POD].field_selector == "spec.nodeName!="
    assert cluster.informers[Kind.NODE].field_selector is None
