"""DeviceShare with reservations, through its extension points: what Reservation hands it
(``RESERVATIONS_MATCHED``, ``RESERVATION_NOMINATED``) decides which cards an owner gets, the
Restricted policy keeps an owner within the reserved amounts, and no card is ever overcommitted
between reservations and pods across add, remove and restart (hypothesis)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.backend import EventType, WatchEvent
from apis.core import Pod
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED, get_device_allocations
from apis.extension.reservation import ANNOTATION_RESERVATION_ALLOCATED, ANNOTATION_RESERVE_POD
from apis.scheduling.reservation import Reservation
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import RESERVATION_NOMINATED, RESERVATIONS_MATCHED, ReservationView
from scheduler.framework.status import Code
from scheduler.plugins.device_share import DeviceShare
from scheduler.plugins.device_share.allocator import Allocation, GPUUsage
from scheduler.plugins.device_share.plugin import ERR_INSUFFICIENT_GPU, allocated_annotation
from scheduler.plugins.device_share.store import allocations_of
from tests.examples import examples
from tests.scheduler.builders import make_pod
from tests.scheduler.plugins.device_share_fixtures import GIB, device, gpu
from tests.scheduler.plugins.test_device_share import plugin, req, snapshot

NODE = "g0"
CARD = GPUUsage(100, 80 * GIB, 100)


def share(minor: int, percent: int) -> Allocation:
    return Allocation(minor, GPUUsage(percent, percent * 80 * GIB // 100, percent))


def reservation_obj(uid: str, allocations: list[Allocation], policy: str | None = None) -> Reservation:
    spec: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": "c"}]}},
        "owners": [{"labelSelector": {"matchLabels": {"app": uid}}}],
    }
    if policy:
        spec["allocatePolicy"] = policy
    return Reservation.model_validate(
        {
            "metadata": {
                "name": uid,
                "uid": uid,
                "annotations": {ANNOTATION_DEVICE_ALLOCATED: allocated_annotation(allocations)},
            },
            "spec": spec,
            "status": {"phase": "Available", "nodeName": NODE},
        }
    )


def view(uid: str, policy: str = "") -> ReservationView:
    return ReservationView(uid, uid, NODE, {}, {}, {}, policy)


def owner_cycle(p: DeviceShare, pod: PodInfo, uid: str, policy: str = "") -> tuple[CycleState, Code]:
    """An owner's cycle as the Reservation plugin drives it: matched at PreFilter, asked about the
    reservation at Filter, nominated for Reserve."""
    state = CycleState()
    state.write(RESERVATIONS_MATCHED, {NODE: (view(uid, policy),)})
    assert p.pre_filter(state, pod, snapshot(NODE)).status.ok
    status = p.filter_reservation(state, pod, view(uid, policy))
    if not status.ok:
        return state, status.code
    state.write(RESERVATION_NOMINATED, {NODE: uid})
    return state, p.reserve(state, pod, NODE).code


def held_minors(p: DeviceShare, uid: str) -> list[int]:
    held = p.store.held(uid)
    assert held is not None
    return [a.minor for a in held[1]]


def test_restricted_owners_stay_within_the_reserved_amounts_default_ones_may_exceed_them() -> None:
    p, _ = plugin(device(NODE, gpu(0), gpu(1)))
    p._on_reservation(
        WatchEvent(EventType.ADDED, obj=reservation_obj("strict", [share(0, 50)], "Restricted"))
    )
    p._on_reservation(WatchEvent(EventType.ADDED, obj=reservation_obj("loose", [share(1, 50)])))
    _, code = owner_cycle(
        p, make_pod("big").uid("big").req(req(core=60, ratio=60)).info(), "strict", "Restricted"
    )
    assert code is Code.UNSCHEDULABLE
    _, code = owner_cycle(
        p, make_pod("fits").uid("fits").req(req(core=50, ratio=50)).info(), "strict", "Restricted"
    )
    assert code is Code.SUCCESS
    assert held_minors(p, "fits") == [0]
    # A Default reservation's owner takes the reserved half and the card's free half with it.
    _, code = owner_cycle(p, make_pod("more").uid("more").req(req(core=60, ratio=60)).info(), "loose")
    assert code is Code.SUCCESS
    assert held_minors(p, "more") == [1]
    assert p.store.usage(NODE)[1] == share(1, 60).usage  # the reservation's 50 are used up


def test_a_restricted_owner_gets_only_the_reserved_card_even_when_another_is_free() -> None:
    p, _ = plugin(device(NODE, gpu(0), gpu(1), gpu(2)))
    p._on_reservation(WatchEvent(EventType.ADDED, obj=reservation_obj("r", [share(2, 100)], "Restricted")))
    pod = make_pod("o").uid("o").req(req(nvidia=1)).info()
    _, code = owner_cycle(p, pod, "r", "Restricted")
    assert code is Code.SUCCESS
    assert held_minors(p, "o") == [2]
    two = make_pod("two").uid("two").req(req(nvidia=2)).info()
    state = CycleState()
    state.write(RESERVATIONS_MATCHED, {NODE: (view("r", "Restricted"),)})
    assert p.pre_filter(state, two, snapshot(NODE)).status.ok
    assert p.filter_reservation(state, two, view("r", "Restricted")).message() == ERR_INSUFFICIENT_GPU


def test_strangers_never_get_reserved_cards() -> None:
    p, _ = plugin(device(NODE, gpu(0), gpu(1)))
    p._on_reservation(WatchEvent(EventType.ADDED, obj=reservation_obj("r", [share(0, 100)])))
    stranger = make_pod("s").uid("s").req(req(nvidia=2)).info()
    state = CycleState()
    assert p.pre_filter(state, stranger, snapshot(NODE)).status.ok
    rows = snapshot(NODE).candidate_rows()
    assert not p.filter(state, stranger, snapshot(NODE), rows).feasible.any()
    p._on_reservation(WatchEvent(EventType.DELETED, obj=reservation_obj("r", [share(0, 100)])))
    state = CycleState()
    assert p.pre_filter(state, stranger, snapshot(NODE)).status.ok
    assert p.filter(state, stranger, snapshot(NODE), rows).feasible.all()


# ---- no card overcommitted, across add / remove / restart ------------------------------------

CARDS = 3
_requests = st.one_of(
    st.integers(1, 2).map(lambda n: req(nvidia=n)),
    st.sampled_from([10, 30, 50, 70]).map(lambda pct: req(core=pct, ratio=pct)),
)
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("reservation"), _requests, st.sampled_from(["", "Restricted"])),
        st.tuples(st.just("owner"), st.integers(0, 5), _requests),
        st.tuples(st.just("pod"), _requests),
        st.tuples(st.just("remove-pod"), st.integers(0, 9)),
        st.tuples(st.just("remove-reservation"), st.integers(0, 5)),
        st.tuples(st.just("restart"), st.booleans()),
    ),
    max_size=14,
)


@dataclass
class _World:
    """What the API server holds: Reservations and bound pods with their annotations."""

    reservations: dict[str, Reservation] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    count: int = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"


def _bound(pod: PodInfo, allocations: tuple[Allocation, ...], reservation: str | None) -> Pod:
    annotations = {ANNOTATION_DEVICE_ALLOCATED: allocated_annotation(allocations)}
    if reservation is not None:
        annotations[ANNOTATION_RESERVATION_ALLOCATED] = json.dumps({"name": reservation, "uid": reservation})
    obj = pod.pod.model_copy(deep=True)
    obj.metadata.annotations = annotations
    obj.spec.node_name = NODE
    return obj


def _reservation_of(pod: Pod) -> str | None:
    raw = (pod.metadata.annotations or {}).get(ANNOTATION_RESERVATION_ALLOCATED)
    return str(json.loads(raw)["uid"]) if raw else None


def _gpu_entries(annotations: dict[str, str] | None) -> list[Allocation]:
    allocated = get_device_allocations(annotations)
    return allocations_of(allocated) if allocated is not None else []


def _check(world: _World, p: DeviceShare) -> None:
    """Per card: every pod's share plus each reservation's part its owners have not taken fits the
    card, and is exactly what the plugin counts."""
    expected = [GPUUsage() for _ in range(CARDS)]
    for pod in world.pods.values():
        for a in _gpu_entries(pod.metadata.annotations):
            expected[a.minor] = expected[a.minor] + a.usage
    for uid, reservation in world.reservations.items():
        owners = [pod for pod in world.pods.values() if _reservation_of(pod) == uid]
        for a in _gpu_entries(reservation.metadata.annotations):
            taken = GPUUsage()
            for owner in owners:
                for o in _gpu_entries(owner.metadata.annotations):
                    if o.minor == a.minor:
                        taken = taken + o.usage
            left = a.usage - taken
            expected[a.minor] = expected[a.minor] + GPUUsage(
                max(0, left.core), max(0, left.memory), max(0, left.ratio)
            )
    for minor, used in enumerate(expected):
        assert (used - CARD).core <= 0, (minor, used)
        assert (used - CARD).memory <= 0, (minor, used)
        assert (used - CARD).ratio <= 0, (minor, used)
        assert p.store.usage(NODE).get(minor, GPUUsage()) == used, (minor, dict(p.store.usage(NODE)))


def _restart(world: _World, reservations_first: bool = False) -> DeviceShare:
    """A new scheduler listing the API server (the informers may deliver either list first)."""
    p, _ = plugin(device(NODE, *(gpu(m) for m in range(CARDS))))
    pods = WatchEvent(EventType.REPLACED, objects=list(world.pods.values()))
    reservations = WatchEvent(EventType.REPLACED, objects=list(world.reservations.values()))
    if reservations_first:
        p._on_reservation(reservations)
    p._on_pod(pods)
    if not reservations_first:
        p._on_reservation(reservations)
    return p


@settings(max_examples=examples(150), deadline=None)
@given(_ops)
def test_no_card_is_overcommitted_between_reservations_and_pods(ops: list[tuple[Any, ...]]) -> None:
    world = _World()
    p = _restart(world)
    for op in ops:
        kind = op[0]
        if kind == "reservation":
            uid = world.name("r")
            pod = make_pod(uid).uid(uid).req(op[1]).obj()
            pod.metadata.annotations = {ANNOTATION_RESERVE_POD: "true"}
            info = PodInfo.of(pod)
            state = CycleState()
            assert p.pre_filter(state, info, snapshot(NODE)).status.ok
            if p.reserve(state, info, NODE).ok:
                held = p.store.held(uid)
                assert held is not None
                obj = reservation_obj(uid, list(held[1]), op[2] or None)
                world.reservations[uid] = obj
                p._on_reservation(WatchEvent(EventType.ADDED, obj=obj))
        elif kind == "owner" and world.reservations:
            uids = sorted(world.reservations)
            target = uids[op[1] % len(uids)]
            spec = world.reservations[target].spec
            policy = (spec.allocate_policy if spec is not None else None) or ""
            name = world.name("o")
            info = make_pod(name).uid(name).req(op[2]).info()
            state, code = owner_cycle(p, info, target, policy)
            if code is Code.SUCCESS:
                held = p.store.held(name)
                assert held is not None
                world.pods[name] = _bound(info, held[1], target)
                p._on_pod(WatchEvent(EventType.MODIFIED, obj=world.pods[name]))
        elif kind == "pod":
            name = world.name("p")
            info = make_pod(name).uid(name).req(op[1]).info()
            state = CycleState()
            assert p.pre_filter(state, info, snapshot(NODE)).status.ok
            rows = snapshot(NODE).candidate_rows()
            if p.filter(state, info, snapshot(NODE), rows).feasible.all():
                assert p.reserve(state, info, NODE).ok
                held = p.store.held(name)
                assert held is not None
                world.pods[name] = _bound(info, held[1], None)
                p._on_pod(WatchEvent(EventType.MODIFIED, obj=world.pods[name]))
        elif kind == "remove-pod" and world.pods:
            name = sorted(world.pods)[op[1] % len(world.pods)]
            p._on_pod(WatchEvent(EventType.DELETED, obj=world.pods.pop(name)))
        elif kind == "remove-reservation" and world.reservations:
            uid = sorted(world.reservations)[op[1] % len(world.reservations)]
            p._on_reservation(WatchEvent(EventType.DELETED, obj=world.reservations.pop(uid)))
        elif kind == "restart":
            p = _restart(world, op[1])
        _check(world, p)
