"""NodePorts: kube-scheduler's node_ports_test table, GetHostPorts, and the property that pods bound
one after another through the Filter never share a host port on a node."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.cache.cache import Cache
from scheduler.cache.host_ports import conflicts
from scheduler.cache.pod_info import HostPort, PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.status import Code
from scheduler.plugins import node_ports
from tests.examples import examples
from tests.scheduler.builders import PodBuilder, make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import filter_reasons

ERR = "node(s) didn't have free ports for the requested pod ports"


def with_ports(builder: PodBuilder, *ports: str) -> PodBuilder:
    """Ports written as upstream's test writes them: "PROTOCOL/HOSTIP/PORT"."""
    for text in ports:
        protocol, host_ip, port = text.split("/")
        builder.host_port(int(port), protocol, host_ip)
    return builder


# (name, the incoming pod's ports, the ports of the pod on the node, rejected) from node_ports_test.go
UPSTREAM = [
    ("other port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], False),
    ("same udp port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], True),
    ("same tcp port", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], True),
    ("different host ip", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], False),
    ("different protocol", ["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], False),
    ("second udp port conflict", ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], True),
    (
        "first tcp port conflict",
        ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
        ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
        True,
    ),
    ("first tcp port conflict due to 0.0.0.0 hostIP", ["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], True),
    (
        "TCP hostPort conflict due to 0.0.0.0 hostIP",
        ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
        ["TCP/127.0.0.1/8001"],
        True,
    ),
    ("second tcp port conflict to 0.0.0.0 hostIP", ["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], True),
    ("second different protocol", ["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], False),
    (
        "UDP hostPort conflict due to 0.0.0.0 hostIP",
        ["UDP/127.0.0.1/8001"],
        ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
        True,
    ),
]


@pytest.mark.parametrize(
    ("wanted", "used", "rejected"), [c[1:] for c in UPSTREAM], ids=[c[0] for c in UPSTREAM]
)
def test_upstream_cases(wanted: list[str], used: list[str], rejected: bool) -> None:
    snapshot = make_snapshot(
        [make_node("m1").alloc(cpu="4").obj()], assigned=[with_ports(make_pod("old").on("m1"), *used).obj()]
    )
    pod = with_ports(make_pod("new"), *wanted).info()
    assert filter_reasons(node_ports.new(None, None), pod, snapshot) == {"m1": [ERR] if rejected else []}  # type: ignore[arg-type]


def test_a_pod_without_host_ports_skips_the_filter() -> None:
    snapshot = make_snapshot([make_node("m1").obj()])
    pod = make_pod("p").info()  # containerPort without hostPort is no node port either
    result = node_ports.new(None, None).pre_filter(CycleState(), pod, snapshot)  # type: ignore[arg-type]
    assert result.status.code == Code.SKIP


def test_unset_protocol_is_tcp_and_unset_ip_is_every_ip() -> None:
    snapshot = make_snapshot(
        [make_node("a").obj(), make_node("b").obj()],
        assigned=[make_pod("old").host_port(80).on("a").obj()],
    )
    plugin = node_ports.new(None, None)  # type: ignore[arg-type]
    assert filter_reasons(plugin, make_pod("p").host_port(80, "TCP", "10.0.0.1").info(), snapshot) == {
        "a": [ERR],
        "b": [],
    }
    assert filter_reasons(plugin, make_pod("p").host_port(80, "UDP").info(), snapshot) == {"a": [], "b": []}


def test_sidecar_ports_count_on_both_sides() -> None:
    snapshot = make_snapshot(
        [make_node("a").obj(), make_node("b").obj()],
        assigned=[make_pod("old").host_port(9100, sidecar=True).on("a").obj()],
    )
    pod = make_pod("p").host_port(9100, sidecar=True).info()
    assert filter_reasons(node_ports.new(None, None), pod, snapshot) == {"a": [ERR], "b": []}  # type: ignore[arg-type]


def test_events() -> None:
    events = node_ports.new(None, None).events_to_register()  # type: ignore[arg-type]
    assert events == ClusterEvent.NODE_ADD | ClusterEvent.POD_DELETE


# ---- the property: a set bound through the Filter never has a conflict ----------------------------

port_st = st.tuples(
    st.sampled_from(["0.0.0.0", "10.0.0.1", "10.0.0.2"]),
    st.sampled_from(["TCP", "UDP"]),
    st.sampled_from([80, 81]),
)
step_st = st.one_of(
    st.tuples(st.just("create"), st.lists(port_st, min_size=0, max_size=3, unique=True)),
    st.tuples(st.just("delete"), st.integers(0, 30)),
)


def reference_rejects(wanted: tuple[HostPort, ...], held: list[tuple[HostPort, ...]]) -> bool:
    return any(conflicts(w, u) for w in wanted for ports in held for u in ports)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_count=st.integers(1, 3), steps=st.lists(step_st, max_size=30))
def test_pods_bound_through_the_filter_never_share_a_port(
    node_count: int, steps: list[tuple[str, object]]
) -> None:
    cache = Cache()
    for i in range(node_count):
        cache.upsert_node(make_node(f"n{i}").obj())
    plugin = node_ports.new(None, None)  # type: ignore[arg-type]
    bound: dict[str, str] = {}
    for k, (action, arg) in enumerate(steps):
        if action == "delete":
            if bound:
                uid = sorted(bound)[int(arg) % len(bound)]  # type: ignore[call-overload]
                cache.remove_pod(uid)
                del bound[uid]
            continue
        builder = make_pod(f"p{k}")
        for ip, protocol, port in arg:  # type: ignore[attr-defined]
            builder.host_port(port, protocol, ip)
        pod = builder.info()
        snapshot = Snapshot(cache)
        rows = snapshot.candidate_rows()
        result = plugin.filter(CycleState(), pod, snapshot, rows)
        for i, row in enumerate(rows.tolist()):
            name = snapshot.table.names[row]
            held = [p.host_ports for p in snapshot.pods_on(name)]
            assert bool(result.feasible[i]) == (not reference_rejects(pod.host_ports, held)), name
        feasible = rows[result.feasible]
        if feasible.size:
            node = snapshot.table.names[int(feasible[k % feasible.size])]
            if k % 2:
                cache.assume(pod, node)
            else:
                cache.upsert_pod(PodInfo.of(builder.on(node).obj()))
            bound[pod.uid] = node
    for name in cache.nodes:
        pods = list(Snapshot(cache).pods_on(name))
        for i, a in enumerate(pods):
            for b in pods[i + 1 :]:
                assert not reference_rejects(a.host_ports, [b.host_ports]), (name, a.key, b.key)
