"""NodeNUMAResource as a ``MemberRoom``: how many pods like a gang's member a node still holds by
NUMA node and CPU, on the issue's machine (2 sockets x 2 NUMA x 8 cores x 2 threads: NUMA node n
is cores 8n..8n+7 = CPUs 8n..8n+7 and 32+8n..32+8n+7, 16 CPUs and 64 GiB each). Every expected
room is worked out by hand in the test's docstring; the property checks the count against the
plugin's own Filter + Reserve run in a loop."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.backend import EventType, WatchEvent
from apis.topology import NodeResourceTopology
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.plugins.node_numa_resource import NodeNUMAResource, new
from tests.examples import examples
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.node_numa_resource.nrt_fixtures import nrt

POLICY = "node.koordinator.sh/numa-topology-policy"
RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
NUMA_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
REQUIRED_FULL_PCPUS = {RESOURCE_SPEC: json.dumps({"requiredCPUBindPolicy": "FullPCPUs"})}
REQUIRED_SPREAD = {RESOURCE_SPEC: json.dumps({"requiredCPUBindPolicy": "SpreadByPCPUs"})}


def setup(
    policy: str, kubelet: dict[str, str] | None = None, assigned: list[PodInfo] | None = None
) -> tuple[NodeNUMAResource, Snapshot]:
    node = make_node("n0").alloc(cpu="64", memory="256Gi", pods="110")
    if policy:
        node = node.label(POLICY, policy)
    snapshot = make_snapshot([node.obj()], [p.pod for p in assigned or ()])
    plugin = new(None, Handle(backend=None, snapshot=lambda: snapshot))  # type: ignore[arg-type]
    topology = NodeResourceTopology.model_validate(nrt("n0", kubelet=kubelet))
    plugin._on_nrt(WatchEvent(EventType.REPLACED, objects=[topology]))
    for pod in assigned or ():
        plugin._on_pod(WatchEvent(EventType.ADDED, obj=pod.pod))
    return plugin, snapshot


def member(
    name: str,
    cpu: str,
    memory: str = "1Gi",
    *,
    qos: str = "LSR",
    annotations: dict[str, str] | None = None,
    node: str | None = None,
) -> PodInfo:
    built = make_pod(name).uid(name).label("koordinator.sh/qosClass", qos).req(cpu=cpu, memory=memory)
    if node is not None:
        built = built.on(node)
    obj = built.obj()
    obj.metadata.annotations = dict(annotations or {})
    return PodInfo.of(obj)


def room(plugin: NodeNUMAResource, snapshot: Snapshot, pod: PodInfo, limit: int = 64) -> int | None:
    found = plugin.member_room(pod, snapshot, ["n0"], limit)
    return None if found is None else found.per_node.get("n0")


def place(plugin: NodeNUMAResource, snapshot: Snapshot, pod: PodInfo) -> bool:
    state = CycleState()
    if not plugin.pre_filter(state, pod, snapshot).status.ok:
        return False
    if not plugin.filter(state, pod, snapshot, snapshot.candidate_rows()).feasible[0]:
        return False
    return plugin.reserve(state, pod, "n0").ok


def trial(plugin: NodeNUMAResource, snapshot: Snapshot, like: PodInfo, limit: int = 64) -> int:
    """Pods like ``like`` the plugin's own Filter + Reserve place one after the other."""
    count = 0
    while count < limit:
        obj = like.pod.model_copy(deep=True)
        obj.metadata.uid = obj.metadata.name = f"trial-{count}"
        if not place(plugin, snapshot, PodInfo.of(obj)):
            break
        count += 1
    return count


def test_single_numa_members_of_12_cpus_fit_once_per_numa_node() -> None:
    """16 CPUs per NUMA node hold one 12-CPU member each (the node's 64 CPUs would say 5): 4."""
    plugin, snapshot = setup("SingleNUMANode")
    pod = member("m", "12", annotations=REQUIRED_FULL_PCPUS)
    found = plugin.member_room(pod, snapshot, ["n0"], 64)
    assert found is not None
    assert found.per_node == {"n0": 4}
    assert found.shape == "pods of cpu 12 + memory 1Gi with FullPCPUs cpuset by NUMA node"


def test_a_held_core_takes_a_whole_member_from_its_numa_node_under_full_pcpus() -> None:
    """A 2-CPU pod holds one core of NUMA node 0, leaving it 7 whole cores = 14 CPUs: 3 members of
    4 CPUs there, 4 on each other NUMA node: 15. A member of 6 CPUs (preferred FullPCPUs): 14 // 6
    = 2 there and 16 // 6 = 2 elsewhere: 8."""
    plugin, snapshot = setup("SingleNUMANode")
    assert place(plugin, snapshot, member("held", "2", annotations=REQUIRED_FULL_PCPUS))
    assert plugin.store.records["held"].cpus == frozenset({0, 32})
    assert room(plugin, snapshot, member("m", "4", annotations=REQUIRED_FULL_PCPUS)) == 15
    assert room(plugin, snapshot, member("p", "6")) == 8


def test_a_held_cpu_breaks_a_core_for_full_pcpus_but_not_for_a_preferred_policy() -> None:
    """A 1-CPU pod (SpreadByPCPUs) holds CPU 0: NUMA node 0 has 15 free CPUs but 7 whole cores.
    Required FullPCPUs members of 2 CPUs: 7 + 3 x 8 = 31; preferred ones: 15 // 2 + 3 x 8 = 31 too,
    and of 3 CPUs: 15 // 3 + 3 x (16 // 3) = 5 + 15 = 20."""
    plugin, snapshot = setup("SingleNUMANode")
    assert place(plugin, snapshot, member("held", "1", annotations=REQUIRED_SPREAD))
    assert plugin.store.records["held"].cpus == frozenset({0})
    assert room(plugin, snapshot, member("f", "2", annotations=REQUIRED_FULL_PCPUS)) == 31
    assert room(plugin, snapshot, member("p", "3")) == 20


def test_memory_limits_single_numa_members_too() -> None:
    """40Gi of a NUMA node's 64Gi: one member per NUMA node whatever its CPUs: 4."""
    plugin, snapshot = setup("SingleNUMANode")
    assert room(plugin, snapshot, member("m", "2", "40Gi", qos="LS")) == 4


def test_kubelet_reserved_cpus_are_not_counted() -> None:
    """reservedCPUs 0-1,32-33 take cores 0 and 1 of NUMA node 0: 6 whole cores = 12 CPUs there.
    Members of 8 CPUs (FullPCPUs): 1 there, 2 on each other NUMA node: 7."""
    plugin, snapshot = setup("SingleNUMANode", kubelet={"policy": "static", "reservedCPUs": "0-1,32-33"})
    assert room(plugin, snapshot, member("m", "8", annotations=REQUIRED_FULL_PCPUS)) == 7


def test_a_preemptions_withdrawn_pods_count_as_gone() -> None:
    """A bound pod holds NUMA node 0's 16 CPUs: 3 members of 16 CPUs fit; with it withdrawn, 4."""
    running = member("running", "16", node="n0")
    running.pod.metadata.annotations = {
        "scheduling.koordinator.sh/resource-status": json.dumps(
            {"cpuset": "0-7,32-39", "numaNodeResources": [{"node": 0, "resources": {"cpu": "16"}}]}
        )
    }
    plugin, snapshot = setup("SingleNUMANode", assigned=[running])
    pod = member("m", "16", annotations=REQUIRED_FULL_PCPUS)
    assert room(plugin, snapshot, pod) == 3
    restore = snapshot.simulate_removal([running])
    try:
        assert room(plugin, snapshot, pod) == 4
    finally:
        restore()
    assert room(plugin, snapshot, pod) == 3


def test_numa_nodes_shared_with_a_spanning_pod_hold_no_exclusive_member() -> None:
    """On a node without policy a 20-CPU cpuset spans NUMA nodes 0 and 1 (CPUs 0-9 and siblings):
    both are shared. Members with the pod's own SingleNUMANode policy and the default Required
    ``singleNUMANodeExclusive``, 4 CPUs each, fit only NUMA nodes 2 and 3: 8. Preferred, NUMA node 1's
    6 whole free cores take 3 more: 11."""
    plugin, snapshot = setup("")
    assert place(plugin, snapshot, member("wide", "20", annotations=REQUIRED_FULL_PCPUS))
    assert plugin.store.records["wide"].cpus == frozenset([*range(10), *range(32, 42)])
    for exclusive, expected in ((None, 8), ("Required", 8), ("Preferred", 11)):
        spec = {"numaTopologyPolicy": "SingleNUMANode"}
        if exclusive is not None:
            spec["singleNUMANodeExclusive"] = exclusive
        annotations = {NUMA_SPEC: json.dumps(spec), **REQUIRED_FULL_PCPUS}
        assert room(plugin, snapshot, member("m", "4", annotations=annotations)) == expected, exclusive


def test_the_limit_caps_the_count() -> None:
    plugin, snapshot = setup("SingleNUMANode")
    assert room(plugin, snapshot, member("m", "2"), limit=5) == 5


def test_a_cpuset_without_numa_policy_counts_the_nodes_whole_cores() -> None:
    """No NUMA policy: 32 free cores hold 5 members of 12 CPUs (FullPCPUs), not one per NUMA node."""
    plugin, snapshot = setup("")
    assert room(plugin, snapshot, member("m", "12", annotations=REQUIRED_FULL_PCPUS)) == 5


def test_restricted_members_may_span_numa_nodes() -> None:
    """Restricted (counted by trial): 4 members of 12 CPUs take 12 of each NUMA node; a fifth takes
    the 4 left on each of three NUMA nodes: 5."""
    plugin, snapshot = setup("Restricted")
    assert room(plugin, snapshot, member("m", "12", annotations=REQUIRED_FULL_PCPUS)) == 5


def test_best_effort_members_without_cpuset_count_the_numa_nodes_together() -> None:
    """BestEffort admits a pod on all NUMA nodes when no narrower set holds it: LS members of 40Gi
    fit while the 4 x 64Gi hold them, 6 times (one NUMA node alone would hold only one)."""
    plugin, snapshot = setup("BestEffort")
    assert room(plugin, snapshot, member("m", "2", "40Gi", qos="LS")) == 6


def test_the_plugin_does_not_limit_a_pod_without_policy_or_cpuset() -> None:
    plugin, snapshot = setup("")
    assert plugin.member_room(member("ls", "12", qos="LS"), snapshot, ["n0"], 64) is None


def test_a_pod_level_policy_limits_on_a_node_without_one() -> None:
    """The pod's own numa-topology-spec: SingleNUMANode on a node labelled with nothing."""
    plugin, snapshot = setup("")
    pod = member(
        "m", "12", qos="LS", annotations={NUMA_SPEC: json.dumps({"numaTopologyPolicy": "SingleNUMANode"})}
    )
    assert room(plugin, snapshot, pod) == 4


HELD_SPECS = [REQUIRED_FULL_PCPUS, REQUIRED_SPREAD, {}]


@settings(max_examples=examples(40, full=600), deadline=None)
@given(
    policy=st.sampled_from(["SingleNUMANode", "Restricted", "BestEffort", ""]),
    held=st.lists(st.tuples(st.integers(1, 12), st.sampled_from(range(len(HELD_SPECS)))), max_size=6),
    cpus=st.integers(1, 16),
    memory=st.sampled_from(["1Gi", "20Gi", "40Gi"]),
    spec=st.sampled_from(["required", "preferred", "spread", "ls"]),
    own=st.sampled_from([None, "SingleNUMANode", "SingleNUMANode/Preferred", "Restricted"]),
)
def test_room_is_what_repeated_filter_and_reserve_place(
    policy: str, held: list[tuple[int, int]], cpus: int, memory: str, spec: str, own: str | None
) -> None:
    """Whatever the node already holds (on a node without policy, cpusets that span NUMA nodes),
    the room is never above what the plugin's own Filter + Reserve place one member after the
    other, and equal to it (SingleNUMANode and FullPCPUs counted greedily per NUMA node, a
    Required ``singleNUMANodeExclusive``, the default, too; the other policies by the same trial).
    ``own``: the member's numa-topology-spec (a policy other than the node's fits nowhere)."""
    plugin, snapshot = setup(policy)
    for i, (size, which) in enumerate(held):
        place(plugin, snapshot, member(f"held-{i}", str(size), annotations=HELD_SPECS[which]))
    annotations: dict[str, str] = {}
    if own is not None:
        numa_policy, _, exclusive = own.partition("/")
        numa_spec = {"numaTopologyPolicy": numa_policy}
        if exclusive:
            numa_spec["singleNUMANodeExclusive"] = exclusive
        annotations[NUMA_SPEC] = json.dumps(numa_spec)
    if spec == "required":
        cpus += cpus % 2  # FullPCPUs: whole cores of 2 CPUs
        pod = member("m", str(cpus), memory, annotations={**annotations, **REQUIRED_FULL_PCPUS})
    elif spec == "spread":
        pod = member("m", str(cpus), memory, annotations={**annotations, **REQUIRED_SPREAD})
    else:
        pod = member("m", str(cpus), memory, qos="LS" if spec == "ls" else "LSR", annotations=annotations)
    counted = room(plugin, snapshot, pod)
    placed = trial(plugin, snapshot, pod)
    if counted is None:
        assert (policy, spec, own) == ("", "ls", None)
        return
    assert counted <= placed
    assert counted == placed
