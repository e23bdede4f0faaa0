"""Properties of NodeNUMAResource over sequences of pods (hypothesis), and its answers to bad input.

The plugin runs alone on one node of the issue's machine (2 sockets x 2 NUMA x 8 cores x 2 threads):
PreFilter, Filter, Reserve for each pod, a random one of them released now and then (deleted).
"""

from __future__ import annotations

import asyncio
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.backend import EventRecord, EventType, WatchEvent
from apis.extension.reservation import ANNOTATION_RESERVE_POD
from apis.topology import NodeResourceTopology
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins.node_numa_resource import NodeNUMAResource, new
from scheduler.plugins.node_numa_resource.cpu_topology import CPUSet
from tests.examples import examples
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.node_numa_resource.nrt_fixtures import nrt

REQUIRED_FULL_PCPUS = {
    "scheduling.koordinator.sh/resource-spec": json.dumps({"requiredCPUBindPolicy": "FullPCPUs"})
}


def numa_of(cpu: int) -> int:
    return (cpu % 32) // 8


def setup(policy: str) -> tuple[NodeNUMAResource, Snapshot]:
    node = make_node("n0").alloc(cpu="64", memory="256Gi", pods="110")
    if policy:
        node = node.label("node.koordinator.sh/numa-topology-policy", policy)
    snapshot = make_snapshot([node.obj()])
    handle = Handle(backend=None, snapshot=lambda: snapshot)  # type: ignore[arg-type]
    plugin = new(None, handle)
    plugin._on_nrt(WatchEvent(EventType.REPLACED, objects=[NodeResourceTopology.model_validate(nrt("n0"))]))
    return plugin, snapshot


def lsr(name: str, cpus: int, annotations: dict[str, str] | None = None) -> PodInfo:
    obj = (
        make_pod(name)
        .uid(name)
        .label("koordinator.sh/qosClass", "LSR")
        .req(cpu=str(cpus), memory="1Gi")
        .obj()
    )
    obj.metadata.annotations = annotations or {}
    return PodInfo.of(obj)


def place(plugin: NodeNUMAResource, snapshot: Snapshot, pod: PodInfo) -> tuple[CycleState, bool]:
    state = CycleState()
    assert plugin.pre_filter(state, pod, snapshot).status.ok
    rows = snapshot.candidate_rows()
    if not plugin.filter(state, pod, snapshot, rows).feasible[0]:
        return state, False
    return state, plugin.reserve(state, pod, "n0").ok


@settings(max_examples=examples(40), deadline=None)
@given(
    policy=st.sampled_from(["SingleNUMANode", "Restricted", ""]),
    steps=st.lists(st.tuples(st.integers(min_value=1, max_value=12), st.booleans()), min_size=1, max_size=14),
)
def test_no_cpu_is_given_twice_and_single_numa_pods_never_span_numa_nodes(
    policy: str, steps: list[tuple[int, bool]]
) -> None:
    plugin, snapshot = setup(policy)
    held: dict[str, frozenset[int]] = {}
    for i, (cores, release) in enumerate(steps):
        pod = lsr(f"p{i}", 2 * cores, REQUIRED_FULL_PCPUS)
        _, placed = place(plugin, snapshot, pod)
        if placed:
            record = plugin.store.records[pod.uid]
            cpus = record.cpus
            assert len(cpus) == 2 * cores
            for other in held.values():
                assert not cpus & other, "a CPU given twice"
            # Required FullPCPUs gives whole cores, also split over NUMA nodes: each CPU with its sibling.
            assert all((c + 32) % 64 in cpus for c in cpus)
            if policy == "SingleNUMANode":
                assert len({numa_of(c) for c in cpus}) == 1
                assert list(record.numa_resources) == [numa_of(next(iter(cpus)))]
            held[pod.uid] = cpus
        elif policy == "SingleNUMANode":
            # Refused only when no NUMA node has that many whole free cores.
            free = set(range(64)) - set().union(*held.values())
            best = max(
                sum(1 for c in free if numa_of(c) == n and c < 32 and c + 32 in free) for n in range(4)
            )
            assert best < cores
        if release and held:
            victim = sorted(held)[0]
            plugin._delete_pod(make_pod(victim).uid(victim).obj())
            del held[victim]
    allocated = plugin.store.ledger("n0").allocated_cpus()
    assert allocated == frozenset().union(*held.values()) if held else not allocated


def test_a_released_reservation_gives_the_cpus_back() -> None:
    plugin, snapshot = setup("SingleNUMANode")
    pod = lsr("a", 4)
    state, placed = place(plugin, snapshot, pod)
    assert placed
    plugin.unreserve(state, pod, "n0")
    assert not plugin.store.ledger("n0").allocated_cpus()


def test_a_malformed_resource_spec_is_refused_naming_the_annotation() -> None:
    plugin, snapshot = setup("")
    pod = lsr("bad", 4, {"scheduling.koordinator.sh/resource-spec": "{not json"})
    result = plugin.pre_filter(CycleState(), pod, snapshot)
    assert result.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "scheduling.koordinator.sh/resource-spec" in result.status.message()


def test_a_malformed_cpu_topology_is_reported_and_the_zones_still_used() -> None:
    """Garbage in ``cpu-topology``: the NRT's zones still count (an LS pod under SingleNUMANode is
    placed on a NUMA node), a cpuset pod finds no valid CPU topology, and the problem is logged."""
    plugin, snapshot = setup("SingleNUMANode")
    broken = nrt("n0")
    broken["metadata"]["annotations"]["node.koordinator.sh/cpu-topology"] = "{oops"
    plugin._on_nrt(WatchEvent(EventType.MODIFIED, obj=NodeResourceTopology.model_validate(broken)))
    assert plugin.store.options["n0"].problems
    ls = PodInfo.of(make_pod("ls").uid("ls").label("koordinator.sh/qosClass", "LS").req(cpu="2").obj())
    assert place(plugin, snapshot, ls)[1]
    state = CycleState()
    pod = lsr("cpuset", 2)
    assert plugin.pre_filter(state, pod, snapshot).status.ok
    result = plugin.filter(state, pod, snapshot, snapshot.candidate_rows())
    assert not result.feasible[0]
    assert [reason for reason, rows in result.rejections if rows[0]] == ["node(s) invalid CPU Topology"]


def test_a_pod_bound_before_its_nodes_nrt_arrived_is_counted_once_it_does() -> None:
    """Koordinator drops such a pod until its next event (11.7 item 10); here the ledger is rebuilt
    from the records when the NRT comes."""
    node = make_node("n0").alloc(cpu="64", memory="256Gi").obj()
    snapshot = make_snapshot([node])
    plugin = new(None, Handle(backend=None, snapshot=lambda: snapshot))  # type: ignore[arg-type]
    bound = make_pod("old").uid("old").req(cpu="4").on("n0").obj()
    bound.metadata.annotations = {
        "scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": "0-1,32-33"})
    }
    plugin._on_pod(WatchEvent(EventType.ADDED, obj=bound))
    plugin._on_nrt(WatchEvent(EventType.ADDED, obj=NodeResourceTopology.model_validate(nrt("n0"))))
    assert plugin.store.ledger("n0").allocated_cpus() == CPUSet.parse("0-1,32-33")


class EventBackend:
    def __init__(self) -> None:
        self.events: list[EventRecord] = []

    async def record_event(self, event: EventRecord) -> None:
        self.events.append(event)


async def test_a_malformed_nrt_annotation_is_a_warning_event_on_the_nrt_once() -> None:
    backend = EventBackend()
    plugin = new(None, Handle(backend=backend, snapshot=lambda: make_snapshot([])))  # type: ignore[arg-type]
    broken = nrt("n0", kubelet=None, annotations={"kubelet.koordinator.sh/cpu-manager-policy": "[1]"})
    for _ in range(2):
        plugin._on_nrt(WatchEvent(EventType.MODIFIED, obj=NodeResourceTopology.model_validate(broken)))
    await asyncio.sleep(0.01)
    assert len(backend.events) == 1
    event = backend.events[0]
    assert (event.regarding.kind, event.regarding.name, event.type) == (
        "NodeResourceTopology",
        "n0",
        "Warning",
    )
    assert "kubelet.koordinator.sh/cpu-manager-policy" in event.message


def test_a_reservations_stand_in_holds_cpus_for_its_reservation() -> None:
    """The stand-in's uid is its Reservation's: its CPUs are held as the reservation's (for its
    owners), and a stand-in no NUMA node can hold is refused like any pod."""
    plugin, snapshot = setup("SingleNUMANode")
    stand_in = lsr("reserve", 4, {ANNOTATION_RESERVE_POD: "true"})
    _, placed = place(plugin, snapshot, stand_in)
    assert placed
    record = plugin.store.records[stand_in.uid]
    assert record.reservation
    assert record.cpus == CPUSet.parse("0-1,32-33")
    too_big = lsr("reserve-big", 20, {ANNOTATION_RESERVE_POD: "true"})
    assert not place(plugin, snapshot, too_big)[1]


async def test_a_bound_pods_malformed_resource_status_is_a_warning_event_on_the_pod_once() -> None:
    backend = EventBackend()
    plugin = new(None, Handle(backend=backend, snapshot=lambda: make_snapshot([])))  # type: ignore[arg-type]
    bound = make_pod("odd").uid("odd").req(cpu="4").on("n0").obj()
    bound.metadata.annotations = {"scheduling.koordinator.sh/resource-status": '{"cpuset": "3-1"}'}
    for _ in range(2):
        plugin._on_pod(WatchEvent(EventType.MODIFIED, obj=bound))
    await asyncio.sleep(0.01)
    assert [(e.regarding.kind, e.regarding.name, e.type) for e in backend.events] == [
        ("Pod", "odd", "Warning")
    ]
    assert "scheduling.koordinator.sh/resource-status" in backend.events[0].message
    assert "3-1" in backend.events[0].message
    assert "odd" not in plugin.store.records
