"""The Reservation plugin through the whole scheduler on the in-memory backend: reservations are
placed as reserve pods, hold their room against everyone else, and give it to their owners."""

from __future__ import annotations

import json

from apis.client.backend import NODES, PODS, RESERVATIONS
from apis.extension.reservation import ANNOTATION_RESERVATION_ALLOCATED
from scheduler.backend.memory import MemoryBackend
from tests.scheduler.reservation.harness import (
    affinity,
    bound,
    get_reservation,
    node,
    placed,
    pod,
    reservation,
    settle,
    start,
    stop_app,
    until,
)


async def test_a_reservation_is_placed_and_its_status_written() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("r1", cpu="2"))
        await until(lambda: placed(backend, "r1") == "n1")
        status = get_reservation(backend, "r1").status
        assert status is not None
        assert status.allocatable is not None
        assert str(status.allocatable["cpu"]) == "2"
        kinds = {(c.type, c.status) for c in status.conditions or ()}
        assert ("Scheduled", "True") in kinds
        assert ("Ready", "True") in kinds
    finally:
        await stop_app(stop, task)


async def test_reserved_room_is_kept_from_other_pods_and_given_to_the_owner() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="4"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(
            RESERVATIONS,
            reservation("r1", cpu="3", owners=[{"labelSelector": {"matchLabels": {"app": "job"}}}]),
        )
        await until(lambda: placed(backend, "r1") == "n1")
        backend.apply(PODS, pod("stranger", cpu="2"))
        await settle()
        assert "stranger" not in bound(backend)
        backend.apply(PODS, pod("owner", cpu="3", labels={"app": "job"}))
        await until(lambda: bound(backend).get("owner") == "n1")
        owner = backend.get(PODS, "default", "owner")
        assert owner is not None
        allocated = json.loads((owner.metadata.annotations or {})[ANNOTATION_RESERVATION_ALLOCATED])
        assert allocated == {"name": "r1", "uid": "uid-r1"}
        await settle()
        assert "stranger" not in bound(backend)  # 4 - 3 left: 1 CPU
    finally:
        await stop_app(stop, task)


async def test_an_owner_larger_than_its_reservation_takes_the_rest_from_the_node() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="4"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("r1", cpu="2"))
        await until(lambda: placed(backend, "r1") == "n1")
        backend.apply(PODS, pod("owner", cpu="3", labels={"app": "r1"}))
        await until(lambda: bound(backend).get("owner") == "n1")
        backend.apply(PODS, pod("small", cpu="1"))
        await until(lambda: bound(backend).get("small") == "n1")
        backend.apply(PODS, pod("more", cpu="1"))
        await settle()
        assert "more" not in bound(backend)
    finally:
        await stop_app(stop, task)


async def test_owner_pods_go_to_the_reserved_node() -> None:
    backend = MemoryBackend()
    for name in ("n1", "n2", "n3"):
        backend.apply(NODES, node(name, cpu="8"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("r1", cpu="2", node_name="n2"))
        await until(lambda: placed(backend, "r1") == "n2")
        backend.apply(PODS, pod("owner", cpu="2", labels={"app": "r1"}))
        await until(lambda: "owner" in bound(backend))
        assert bound(backend)["owner"] == "n2"
    finally:
        await stop_app(stop, task)


async def test_interchangeable_reservations_are_used_in_their_order() -> None:
    """Reservations of one owner fit its pods equally well (each exactly): the lowest
    reservation-order goes first every time, not whichever node a tie favours."""
    backend = MemoryBackend()
    nodes = ("n1", "n2", "n3", "n4")
    for name in nodes:
        backend.apply(NODES, node(name, cpu="8"))
    _app, stop, task = await start(backend)
    owners = [{"labelSelector": {"matchLabels": {"app": "web"}}}]
    # Orders against the nodes' names: n4 first, then n2, n3, n1.
    orders = {"n4": "1", "n2": "2", "n3": "3", "n1": "4"}
    try:
        for name, order in orders.items():
            backend.apply(
                RESERVATIONS,
                reservation(
                    f"r-{name}",
                    cpu="2",
                    owners=owners,
                    node_name=name,
                    labels={"scheduling.koordinator.sh/reservation-order": order},
                    allocateOnce=True,
                ),
            )
        await until(lambda: all(placed(backend, f"r-{n}") == n for n in nodes))
        for i, expected in enumerate(orders):
            backend.apply(PODS, pod(f"web-{i}", cpu="2", labels={"app": "web"}))
            await until(lambda i=i: f"web-{i}" in bound(backend))
            assert bound(backend)[f"web-{i}"] == expected, (i, bound(backend))
    finally:
        await stop_app(stop, task)


async def test_reservation_affinity_by_name_requires_that_reservation() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="8"))
    backend.apply(NODES, node("n2", cpu="8"))
    app, stop, task = await start(backend)
    try:
        backend.apply(
            RESERVATIONS, reservation("r1", cpu="2", node_name="n1", owners=[{"labelSelector": {}}])
        )
        backend.apply(
            RESERVATIONS, reservation("r2", cpu="2", node_name="n2", owners=[{"labelSelector": {}}])
        )
        await until(lambda: placed(backend, "r1") == "n1" and placed(backend, "r2") == "n2")
        backend.apply(PODS, pod("p", cpu="1", annotations=affinity(name="r2")))
        await until(lambda: "p" in bound(backend))
        assert bound(backend)["p"] == "n2"
        backend.apply(PODS, pod("q", cpu="1", annotations=affinity(name="missing")))
        await settle()
        assert "q" not in bound(backend)
        explanation = app.explanations.get("default", "q")
        assert explanation is not None
        assert "no reservations match reservation affinity" in explanation.message
    finally:
        await stop_app(stop, task)


async def test_reservation_taints_need_the_pods_toleration() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="2"))
    app, stop, task = await start(backend)
    taint = {"key": "team", "value": "a", "effect": "NoSchedule"}
    try:
        backend.apply(
            RESERVATIONS, reservation("r1", cpu="2", owners=[{"labelSelector": {}}], taints=[taint])
        )
        await until(lambda: placed(backend, "r1") == "n1")
        backend.apply(PODS, pod("plain", cpu="1", annotations=affinity()))
        await settle()
        assert "plain" not in bound(backend)
        explanation = app.explanations.get("default", "plain")
        assert explanation is not None
        assert explanation.notes == [
            "reservation(s) the pod's owners match but it may not use: r1 (reservation affinity, "
            "unschedulable or taints)"
        ]
        tolerating = affinity(
            tolerations=[{"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}]
        )
        backend.apply(PODS, pod("tolerating", cpu="1", annotations=tolerating))
        await until(lambda: bound(backend).get("tolerating") == "n1")
    finally:
        await stop_app(stop, task)


async def test_reservation_ignored_pods_fill_the_unused_room() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="2"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("r1", cpu="2"))
        await until(lambda: placed(backend, "r1") == "n1")
        backend.apply(PODS, pod("plain", cpu="1"))
        backend.apply(
            PODS, pod("backfill", cpu="1", labels={"scheduling.koordinator.sh/reservation-ignored": "true"})
        )
        await until(lambda: bound(backend).get("backfill") == "n1")
        assert "plain" not in bound(backend)
    finally:
        await stop_app(stop, task)


async def test_exact_match_reservation_needs_equal_amounts() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="2"))
    _app, stop, task = await start(backend)
    exact = {"scheduling.koordinator.sh/exact-match-reservation": json.dumps({"resourceNames": ["cpu"]})}
    try:
        backend.apply(RESERVATIONS, reservation("r1", cpu="2"))
        await until(lambda: placed(backend, "r1") == "n1")
        backend.apply(
            PODS, pod("smaller", cpu="1", labels={"app": "r1"}, annotations={**exact, **affinity()})
        )
        await settle()
        assert "smaller" not in bound(backend)
        backend.apply(PODS, pod("equal", cpu="2", labels={"app": "r1"}, annotations={**exact, **affinity()}))
        await until(lambda: bound(backend).get("equal") == "n1")
    finally:
        await stop_app(stop, task)


async def test_a_reservation_deleted_frees_its_room() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="2"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("r1", cpu="2"))
        await until(lambda: placed(backend, "r1") == "n1")
        backend.apply(PODS, pod("plain", cpu="2"))
        await settle()
        assert "plain" not in bound(backend)
        backend.delete(RESERVATIONS, None, "r1")
        await until(lambda: bound(backend).get("plain") == "n1")
    finally:
        await stop_app(stop, task)


async def test_a_malformed_reservation_affinity_is_refused_with_the_key() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1"))
    app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("r1", cpu="1"))
        await until(lambda: placed(backend, "r1") == "n1")
        bad = {"scheduling.koordinator.sh/reservation-affinity": "{not json"}
        backend.apply(PODS, pod("bad", cpu="1", annotations=bad))
        backend.apply(PODS, pod("fine", cpu="1"))
        await until(lambda: "fine" in bound(backend))
        explanation = app.explanations.get("default", "bad")
        assert explanation is not None
        assert "reservation-affinity" in explanation.message
    finally:
        await stop_app(stop, task)


async def test_backfill_in_reserved_room_is_evicted_when_the_owner_arrives_and_never_before() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="6"))
    app, stop, task = await start(backend)
    ignored = {"scheduling.koordinator.sh/reservation-ignored": "true"}
    try:
        backend.apply(RESERVATIONS, reservation("r1", cpu="3"))
        await until(lambda: placed(backend, "r1") == "n1")
        backend.apply(PODS, pod("backfill-0", cpu="2", labels=ignored))
        backend.apply(PODS, pod("backfill-1", cpu="2", labels=ignored))
        await until(lambda: {"backfill-0", "backfill-1"} <= set(bound(backend)))
        backend.apply(PODS, pod("stranger", cpu="1"))  # 6 - 3 reserved - 4 backfill: no room
        await settle()
        assert "stranger" not in bound(backend)
        assert {"backfill-0", "backfill-1"} <= {
            p.metadata.name for p in backend.list(PODS)
        }  # never otherwise
        # The owner (3 CPUs) needs the reserved room: evicting one backfill pod (2 CPUs) is enough.
        backend.apply(PODS, pod("owner", cpu="3", labels={"app": "r1"}))
        await until(lambda: bound(backend).get("owner") == "n1")
        left = {p.metadata.name for p in backend.list(PODS)}
        assert len(left & {"backfill-0", "backfill-1"}) == 1, left
        explanation = app.explanations.get("default", "owner")  # what `koordctl explain pod` shows
        assert explanation is not None
        assert "allocated from reservation r1 on n1" in explanation.notes
    finally:
        await stop_app(stop, task)


async def test_allocate_once_false_shares_the_room_among_owners_and_true_gives_it_once() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="4"))
    app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("shared", cpu="4", allocateOnce=False))
        await until(lambda: placed(backend, "shared") == "n1")
        for name in ("a", "b"):
            backend.apply(PODS, pod(name, cpu="2", labels={"app": "shared"}))
        await until(lambda: {"a", "b"} <= set(bound(backend)))
        notes = [app.explanations.get("default", name) for name in ("a", "b")]
        assert all(n is not None and "allocated from reservation shared on n1" in n.notes for n in notes)
    finally:
        await stop_app(stop, task)

    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="4"))
    app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("once", cpu="3"))
        await until(lambda: placed(backend, "once") == "n1")
        backend.apply(PODS, pod("first", cpu="1", labels={"app": "once"}))
        await until(lambda: "first" in bound(backend))
        # Used once: the second owner may not take the 2 CPUs left in it (1 CPU free on the node).
        backend.apply(PODS, pod("second", cpu="2", labels={"app": "once"}))
        await settle()
        assert "second" not in bound(backend)
    finally:
        await stop_app(stop, task)


async def test_restricted_reservations_give_only_what_they_hold() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="8"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("strict", cpu="2", allocatePolicy="Restricted"))
        await until(lambda: placed(backend, "strict") == "n1")
        # 3 CPUs would fit the node (6 free + 2 reserved) but a Restricted reservation caps the
        # reserved resources at what it holds: the owner waits.
        backend.apply(PODS, pod("big", cpu="3", labels={"app": "strict"}, annotations=affinity()))
        await settle()
        assert "big" not in bound(backend)
        backend.apply(PODS, pod("fits", cpu="2", labels={"app": "strict"}, annotations=affinity()))
        await until(lambda: bound(backend).get("fits") == "n1")
    finally:
        await stop_app(stop, task)


async def test_owners_by_controller_and_by_object() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="2"))
    backend.apply(NODES, node("n2", cpu="2"))
    _app, stop, task = await start(backend)
    controller = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "rs",
        "uid": "rs-uid",
        "namespace": "default",
    }
    try:
        backend.apply(
            RESERVATIONS, reservation("by-rs", cpu="2", node_name="n1", owners=[{"controller": controller}])
        )
        backend.apply(
            RESERVATIONS,
            reservation(
                "by-pod",
                cpu="2",
                node_name="n2",
                owners=[{"object": {"name": "exact", "namespace": "default"}}],
            ),
        )
        await until(lambda: placed(backend, "by-rs") == "n1" and placed(backend, "by-pod") == "n2")
        backend.apply(PODS, pod("replica", cpu="2", owner_uid="rs-uid"))
        backend.apply(PODS, pod("exact", cpu="2"))
        backend.apply(PODS, pod("other", cpu="2", owner_uid="another-rs"))
        await until(lambda: {"replica", "exact"} <= set(bound(backend)))
        assert bound(backend)["replica"] == "n1"
        assert bound(backend)["exact"] == "n2"
        assert "other" not in bound(backend)
    finally:
        await stop_app(stop, task)


async def test_an_unschedulable_reservation_is_used_only_with_the_toleration() -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="2"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("paused", cpu="2"))
        await until(lambda: placed(backend, "paused") == "n1")
        body = reservation("paused", cpu="2", unschedulable=True)
        body["status"] = backend.get(RESERVATIONS, None, "paused").status.to_wire()  # type: ignore[union-attr]
        backend.apply(RESERVATIONS, body)
        backend.apply(PODS, pod("owner", cpu="2", labels={"app": "paused"}))
        await settle()
        assert "owner" not in bound(backend)
        tolerant = affinity(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
        backend.apply(PODS, pod("tolerant", cpu="2", labels={"app": "paused"}, annotations=tolerant))
        await until(lambda: bound(backend).get("tolerant") == "n1")
    finally:
        await stop_app(stop, task)


async def test_a_restarted_scheduler_rebuilds_the_allocation_from_the_owners_annotation() -> None:
    """A placed reservation and its owner already bound when koord-scheduler starts: the owner's
    ``reservation-allocated`` is the record, so the reservation holds nothing more (whichever of
    pods and reservations the watches list first)."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="4"))
    body = reservation("r1", cpu="3")
    body["status"] = {"phase": "Available", "nodeName": "n1", "allocatable": {"cpu": "3", "memory": "2Gi"}}
    backend.apply(RESERVATIONS, body)
    allocated = {ANNOTATION_RESERVATION_ALLOCATED: json.dumps({"name": "r1", "uid": "uid-r1"})}
    backend.apply(PODS, pod("owner", cpu="3", labels={"app": "r1"}, annotations=allocated, node_name="n1"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("small", cpu="1"))
        await until(lambda: bound(backend).get("small") == "n1")
    finally:
        await stop_app(stop, task)


async def test_owners_find_their_reservation_when_the_cycle_samples_the_nodes() -> None:
    """200 nodes: a cycle scores only 100 of them (percentageOfNodesToScore); the node holding the
    pod's reservation is scored all the same, so every owner lands on its reservation."""
    backend = MemoryBackend()
    for i in range(200):
        backend.apply(NODES, node(f"n{i:03d}", cpu="8"))
    _app, stop, task = await start(backend)
    try:
        pinned = {f"r{i}": f"n{i * 19:03d}" for i in range(10)}
        for name, where in pinned.items():
            backend.apply(RESERVATIONS, reservation(name, cpu="2", node_name=where))
        await until(lambda: all(placed(backend, name) == where for name, where in pinned.items()))
        for name in pinned:
            backend.apply(PODS, pod(f"owner-{name}", cpu="2", labels={"app": name}))
        await until(lambda: all(f"owner-{name}" in bound(backend) for name in pinned))
        assert {name: bound(backend)[f"owner-{name}"] for name in pinned} == pinned
    finally:
        await stop_app(stop, task)


async def test_an_unknown_toleration_operator_is_accepted_with_one_warning_and_a_bogus_selector_refused() -> (
    None
):
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="2"))
    app, stop, task = await start(backend)
    try:
        backend.apply(RESERVATIONS, reservation("r1", cpu="2", owners=[{"labelSelector": {}}]))
        await until(lambda: placed(backend, "r1") == "n1")
        odd = affinity(tolerations=[{"key": "team", "operator": "Bogus", "effect": "Sometimes"}])
        backend.apply(PODS, pod("odd", cpu="1", annotations=odd))
        await until(lambda: bound(backend).get("odd") == "n1")  # accepted, as Koordinator does
        warnings = [
            e.message or "" for e in backend.events if e.regarding.name == "odd" and e.type == "Warning"
        ]
        assert warnings == [
            "scheduling.koordinator.sh/reservation-affinity: tolerations[0].operator 'Bogus' is unknown; "
            "tolerations[0].effect 'Sometimes' is unknown (it tolerates nothing)"
        ]
        bogus = affinity(
            requiredDuringSchedulingIgnoredDuringExecution={
                "reservationSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Bogus"}]}]
            }
        )
        backend.apply(PODS, pod("bogus", cpu="1", annotations=bogus))
        await settle()
        assert "bogus" not in bound(backend)
        explanation = app.explanations.get("default", "bogus")
        assert explanation is not None
        assert "matchExpressions[0].operator: 'Bogus' is not one of" in str(explanation)
    finally:
        await stop_app(stop, task)
