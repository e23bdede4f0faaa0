"""NodeNUMAResource leaves a plain pod on a node without NUMA topology or policy labels untouched,
without asking the placer: Filter answers all rows feasible at once when no row is interesting,
and Reserve on such a node (no placement from Filter) succeeds without placing. Over random
nodes (an NRT or not, either label or not, any value) and pods (a cpuset, a NUMA policy or
neither), each shortcut must give what the placer would have: every row feasible, nothing held."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.backend import EventType, WatchEvent
from apis.extension.numa import LABEL_NODE_CPU_BIND_POLICY, LABEL_NUMA_TOPOLOGY_POLICY
from apis.topology import NodeResourceTopology
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Status
from scheduler.plugins.node_numa_resource import new
from scheduler.plugins.node_numa_resource.cycle import CYCLE
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.node_numa_resource.nrt_fixtures import nrt

label_values = st.one_of(st.none(), st.sampled_from(["", "SingleNUMANode", "FullPCPUsOnly", "odd"]))
nodes = st.tuples(st.booleans(), label_values, label_values)
"""Whether the node has an NRT, and its NUMA policy and CPU bind policy labels (None: absent)."""


@settings(max_examples=120, deadline=None)
@given(
    described=st.lists(nodes, min_size=1, max_size=4),
    qos=st.sampled_from(["LS", "LSR"]),
    bind=st.booleans(),
    numa_policy=st.booleans(),
)
def test_the_shortcuts_answer_as_the_placer_does(
    described: list[tuple[bool, str | None, str | None]], qos: str, bind: bool, numa_policy: bool
) -> None:
    built = []
    for i, (_, numa_label, bind_label) in enumerate(described):
        node = make_node(f"n{i}").alloc(cpu="64", memory="256Gi", pods="110")
        if numa_label is not None:
            node = node.label(LABEL_NUMA_TOPOLOGY_POLICY, numa_label)
        if bind_label is not None:
            node = node.label(LABEL_NODE_CPU_BIND_POLICY, bind_label)
        built.append(node.obj())
    snapshot = make_snapshot(built)
    plugin = new(None, Handle(backend=None, snapshot=lambda: snapshot))  # type: ignore[arg-type]
    topologies = [
        NodeResourceTopology.model_validate(nrt(f"n{i}")) for i, (has, _, _) in enumerate(described) if has
    ]
    plugin._on_nrt(WatchEvent(EventType.REPLACED, objects=topologies))
    annotations = {}
    if bind:
        annotations["scheduling.koordinator.sh/resource-spec"] = json.dumps(
            {"preferredCPUBindPolicy": "FullPCPUs"}
        )
    if numa_policy:
        annotations["scheduling.koordinator.sh/numa-topology-spec"] = json.dumps(
            {"numaTopologyPolicy": "SingleNUMANode"}
        )
    obj = make_pod("p").uid("p").label("koordinator.sh/qosClass", qos).req(cpu="2", memory="1Gi").obj()
    obj.metadata.annotations = annotations
    pod = PodInfo.of(obj)
    state = CycleState()
    assert plugin.pre_filter(state, pod, snapshot).status.ok
    cycle = state.get(CYCLE)
    assert cycle is not None
    rows = snapshot.candidate_rows()
    interesting = plugin._interesting(cycle, snapshot, rows)
    for i, row in enumerate(rows.tolist()):
        name = snapshot.table.names[row]
        info = snapshot.node(name)
        assert info is not None
        assert plugin._interesting_node(cycle, name, info.labels) == bool(interesting[i])
        if not interesting[i]:
            placed = plugin.placer.place(CycleState(), pod, cycle, name, info.labels)
            assert not isinstance(placed, Status)
            assert placed.allocation is None  # what Reserve then does: nothing
    if not interesting.any():
        assert plugin.filter(state, pod, snapshot, rows).feasible.tolist() == [True] * rows.size
        for name in (snapshot.table.names[row] for row in rows.tolist()):
            assert plugin.reserve(state, pod, name).ok
        assert pod.uid not in plugin.store.records
