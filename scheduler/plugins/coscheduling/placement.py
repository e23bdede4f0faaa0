"""From the scheduler's view to a solver problem: the pending members of a gang group, the nodes
each class of identical members passes Filter on, every node's free resources, and (for gangs with
a network-topology-spec) each node's path in the ClusterNetworkTopology named ``default``.

The tree follows Koordinator (api-reference 1.5): layers ordered by following
``parentTopologyLayer`` up from ``NodeTopologyLayer``; a node's domain at a layer is the value of the
first of the layer's ``labelKey`` present on it; a node missing only the label of the layer right
above the node layer gets a virtual domain named after itself; a node missing any other layer is
left out (it cannot host a topology gang).

Required pod anti-affinity among the members (``_apart``: members carrying the same term that
selects them, e.g. one worker per hostname) becomes an ``Apart`` rule of the problem: at most one
of them per domain of the term's topology key. Against running pods it is already in each class's
feasible nodes (Filter). Not modelled: required pod affinity among members (a gang whose members
must share a zone with each other; use a MustGather network topology instead), preferred terms
among members, and anti-affinity between members that do not both carry the term.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from apis.extension import networktopology as topology_ext
from apis.scheduling.networktopology import NODE_TOPOLOGY_LAYER, ClusterNetworkTopology, InvalidTopologyChain
from scheduler.cache.node_table import IntArray
from scheduler.cache.per_pod_version import PerPodVersion
from scheduler.cache.pod_info import DEFAULT_BIND_ALL_HOST_IP, PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.extensions import Room
from scheduler.plugins.helper.pod_affinity import AffinityTerm, required_terms
from scheduler.solver.problem import (
    Apart,
    NodeSpec,
    PlacementProblem,
    PodGroupSpec,
    ResourceVector,
    SolveOptions,
    SpreadConstraint,
    TopologyLayer,
)

__all__ = [
    "TopologyError",
    "build_problem",
    "layer_chain",
    "node_path",
    "problem_resources",
    "short_of_room",
]


FeasibleRows = Callable[[PodInfo], IntArray]
ScoreRows = Callable[[PodInfo, IntArray], IntArray]
MemberRooms = Callable[[PodInfo, Sequence[str], int], Sequence[Room]]
"""(a member, nodes, limit) -> what plugins that count more than totals say those nodes hold of
pods like it (``ProfileView.member_room``: DeviceShare's GPU sets, NodeNUMAResource's NUMA nodes)."""


class TopologyError(ValueError):
    """The ClusterNetworkTopology does not describe one chain of layers."""


def layer_chain(topology: ClusterNetworkTopology) -> list[tuple[str, tuple[str, ...]]]:
    """(layer, label keys) from the top layer down to the one right above NodeTopologyLayer."""
    if topology.spec is None:
        raise TopologyError(f"ClusterNetworkTopology has no {NODE_TOPOLOGY_LAYER}")
    try:
        layers = topology.spec.layer_chain()  # the walk koord-manager's status tree uses too
    except InvalidTopologyChain as exc:
        raise TopologyError(str(exc)) from exc
    return [(item.topology_layer, tuple(item.label_key or ())) for item in layers[:-1]]


def node_path(
    labels: dict[str, str], node: str, chain: Sequence[tuple[str, tuple[str, ...]]]
) -> tuple[str, ...] | None:
    path: list[str] = []
    for index, (_, keys) in enumerate(chain):
        value = next((labels[k] for k in keys if labels.get(k)), None)
        if value is None:
            if index == len(chain) - 1:
                value = node  # a virtual domain keeps every leaf at the same depth
            else:
                return None
        path.append(value)
    return tuple(path)


def node_paths(
    snapshot: Snapshot, rows: Sequence[int], chain: Sequence[tuple[str, tuple[str, ...]]]
) -> list[tuple[str, ...] | None]:
    """`node_path` of every row at once, from the cache's per-label domains (a preemption's
    problem walks every node of the cluster)."""
    at = np.asarray(rows, dtype=np.int64)
    names = snapshot.table.names
    layers: list[npt.NDArray[np.object_]] = []
    for index, (_, keys) in enumerate(chain):
        values = np.full(at.size, None, dtype=object)
        for key in keys:
            ids, domain_values = snapshot.label_domains(key)
            lookup = np.array([*domain_values, ""], dtype=object)  # -1 (no label) reads ""
            found = lookup[ids[at]] if at.size else np.empty(0, dtype=object)
            take = (values == None) & (found != "")  # noqa: E711 (elementwise on object arrays)
            values[take] = found[take]
        if index == len(chain) - 1:  # a virtual domain keeps every leaf at the same depth
            missing = np.flatnonzero(values == None)  # noqa: E711
            values[missing] = [names[int(r)] for r in at[missing]]
        layers.append(values)
    if not layers:
        return [() for _ in rows]
    return [None if None in path else path for path in zip(*(v.tolist() for v in layers), strict=True)]


def _filter_signature(pod: PodInfo) -> str:
    spec = pod.pod.spec
    parts = (
        spec.node_name or "",
        json.dumps(spec.node_selector or {}, sort_keys=True),
        spec.affinity.model_dump_json(exclude_none=True) if spec.affinity else "",
        json.dumps([t.model_dump(exclude_none=True) for t in spec.tolerations or ()], sort_keys=True),
    )
    return "\x00".join(parts)


_filter_signature_of = PerPodVersion(_filter_signature)


def _placement_signature(pod: PodInfo, spread: Sequence[SpreadConstraint]) -> str:
    """What the Filters read of a pod besides its requests: node name, selector, affinity,
    tolerations (a member pinned to one node is not interchangeable with one pinned to another),
    and which of the gang's topology spread constraints it carries or is counted by."""
    carried = "".join(f"{int(pod.uid in c.constrained)}{int(pod.uid in c.matching)}" for c in spread)
    return f"{_filter_signature_of(pod)}\x00{carried}"


def _selects_fellow(term: AffinityTerm, pod: PodInfo) -> bool:
    """Whether ``term`` selects ``pod``, judged without namespace labels (Coscheduling does not
    watch namespaces): a namespaceSelector other than ``{}`` selects no fellow member here."""
    selector = term.namespace_selector
    everywhere = not selector.nothing and not selector.requirements
    return (pod.namespace in term.namespaces or everywhere) and term.selector.matches(pod.labels)


def _apart(members: Sequence[PodInfo]) -> list[tuple[str, frozenset[str]]]:
    """(topology key, member uids) per distinct required pod anti-affinity term that two or more
    members carry and that selects each of them: at most one of them per domain of the key (one
    worker per node). Pairs beyond that (a member selected by a term it does not carry) are left
    to each member's own Filter when it takes its place."""
    carried: dict[AffinityTerm, set[str]] = {}
    for pod in members:
        affinity = pod.pod.spec.affinity
        for term in required_terms(affinity.pod_anti_affinity if affinity else None, pod):
            if _selects_fellow(term, pod):
                carried.setdefault(term, set()).add(pod.uid)
    rules = [(term.topology_key, frozenset(uids)) for term, uids in carried.items() if len(uids) > 1]
    return rules + _port_apart(members)


SAME_NODE = ""
"""The "topology key" of an apart rule whose domains are the nodes themselves."""


def _port_apart(members: Sequence[PodInfo]) -> list[tuple[str, frozenset[str]]]:
    """Members whose host ports conflict (same protocol and port, and the same IP or either bound
    to every IP: NodePorts' rule) cannot share a node: one rule per clique of them, so a gang of
    workers that all take ``hostPort: 8080`` is planned one per node instead of being planned
    together and refused by NodePorts member by member."""
    by_port: dict[tuple[str, int], dict[str, set[str]]] = {}
    for pod in members:
        for ip, protocol, port in pod.host_ports:
            by_port.setdefault((protocol, port), {}).setdefault(ip, set()).add(pod.uid)
    rules: list[tuple[str, frozenset[str]]] = []
    for by_ip in by_port.values():
        everywhere = by_ip.get(DEFAULT_BIND_ALL_HOST_IP, set())
        specific = [uids for ip, uids in by_ip.items() if ip != DEFAULT_BIND_ALL_HOST_IP]
        for clique in [everywhere | uids for uids in specific] or [everywhere]:
            if len(clique) > 1:
                rules.append((SAME_NODE, frozenset(clique)))
    return list(dict.fromkeys(rules))


def _rooms(
    member_rooms: MemberRooms | None,
    classes: Sequence[Sequence[PodInfo]],
    feasible: Mapping[str, frozenset[str]],
    limit: int,
) -> tuple[tuple[str, ...], list[frozenset[str]], dict[str, dict[str, int]]]:
    """(the shapes, each class's shapes in class order, shape -> node -> members it holds)."""
    room_of: dict[str, dict[str, int]] = {}
    class_shapes: list[frozenset[str]] = []
    for pods, names in zip(classes, feasible.values(), strict=True):
        rooms = member_rooms(pods[0], sorted(names), limit) if member_rooms is not None and names else ()
        for found in rooms:
            per_node = room_of.setdefault(found.shape, {})
            for node, count in found.per_node.items():
                per_node[node] = min(count, per_node.get(node, count))
        class_shapes.append(frozenset(found.shape for found in rooms))
    return tuple(sorted(room_of)), class_shapes, room_of


def short_of_room(
    members: Sequence[PodInfo], assignment: Mapping[str, str], member_rooms: MemberRooms
) -> list[str]:
    """Planned nodes where a plugin's room (GPU sets) no longer holds the members planned there."""
    alike: dict[tuple[str, frozenset[object], frozenset[object]], list[PodInfo]] = {}
    for member in members:
        node = assignment.get(member.uid)
        if node is not None:
            key = (node, frozenset(member.requests.items()), frozenset(member.annotations.items()))
            alike.setdefault(key, []).append(member)
    # One ask per kind of member over all its nodes (a node's room does not depend on the others
    # asked with it): a gang of 256 on 256 nodes asked each node alone. Each node's members are
    # asked about as the first of them, as before; nodes whose first members look alike to a
    # plugin (requests, annotations, labels, priority) share one ask.
    classes: dict[tuple[object, ...], dict[str, int]] = {}
    first: dict[tuple[object, ...], PodInfo] = {}
    for (node, requests, notes), pods in alike.items():
        labels = frozenset(pods[0].labels.items())
        alike_kind: tuple[object, ...] = (requests, notes, labels, pods[0].priority)
        classes.setdefault(alike_kind, {})[node] = len(pods)
        first.setdefault(alike_kind, pods[0])
    need: dict[tuple[str, str], int] = {}
    have: dict[tuple[str, str], int] = {}
    for kind, counts in classes.items():
        for found in member_rooms(first[kind], list(counts), len(members)):
            for node, count in counts.items():
                if node in found.per_node:
                    need[node, found.shape] = need.get((node, found.shape), 0) + count
                    have[node, found.shape] = found.per_node[node]
    return sorted({node for (node, shape), count in need.items() if count > have[node, shape]})


def problem_resources(members: Sequence[PodInfo]) -> tuple[str, ...]:
    """The resources of a placement problem (and the order of its vectors): what members ask for."""
    return tuple(sorted({r for m in members for r in m.requests}))


def build_problem(
    gang_id: str,
    members: Sequence[PodInfo],
    snapshot: Snapshot,
    feasible_rows: FeasibleRows,
    *,
    topology: ClusterNetworkTopology | None,
    spec: topology_ext.NetworkTopologySpec | None,
    options: SolveOptions,
    score_rows: ScoreRows | None = None,
    held: Mapping[str, Sequence[int]] | None = None,
    also_nodes: Sequence[str] = (),
    spread: Sequence[SpreadConstraint] = (),
    member_rooms: MemberRooms | None = None,
) -> PlacementProblem:
    """The placement problem of ``members`` (a gang group's pending pods, in rank order).

    For preemption, the snapshot has the candidate victims removed (so Filter sees the room they
    would free) and ``held`` gives, per node, what those victims hold (in ``problem_resources``
    order): a node's free room in the problem is what it has with the victims still there, and the
    solver adds back what it evicts. ``also_nodes`` are kept in the problem although no member
    passes Filter on them (their victims only count towards a quota release); not with layers.
    ``spread``: the DoNotSchedule topology spread the members carry (``ProfileView.gang_spread``).
    ``member_rooms``: each shape a plugin counts (GPU sets) becomes one more resource of the
    problem, a member of the shape asking 1 and a node offering the members it holds (with the
    victims gone, for preemption: which victims free the right cards is checked after the solve)."""
    table = snapshot.table
    resources = problem_resources(members)
    cols = np.fromiter((table.column_of(r) for r in resources), dtype=np.int64, count=len(resources))

    # Members are alike when their requests, everything Filter reads of them and the members
    # they must stay apart from are equal; one member per class is evaluated against the nodes.
    apart = _apart(members)
    classes: dict[tuple[tuple[int, ...], str, tuple[int, ...]], list[PodInfo]] = {}
    for pod in members:
        apart_of = tuple(i for i, (_, uids) in enumerate(apart) if pod.uid in uids)
        key = (tuple(pod.requests.get(r, 0) for r in resources), _placement_signature(pod, spread), apart_of)
        classes.setdefault(key, []).append(pod)

    chain: list[tuple[str, tuple[str, ...]]] = []
    layers: tuple[TopologyLayer, ...] = ()
    if topology is not None and spec is not None:
        chain = layer_chain(topology)
        rules = {rule.layer: rule for rule in spec.gather_strategy or ()}
        known = {name for name, _ in chain}
        unknown = sorted(set(rules) - known - {NODE_TOPOLOGY_LAYER})
        if unknown:
            raise TopologyError(
                f"gatherStrategy names layers {unknown} that the ClusterNetworkTopology lacks"
            )
        layers = tuple(
            TopologyLayer(
                name,
                strategy=rules[name].strategy if name in rules else None,
                pod_count_multiple=(rules[name].pod_count_multiple or 1) if name in rules else 1,
            )
            for name, _ in chain
        )

    pod_groups: list[PodGroupSpec] = []
    feasible: dict[str, frozenset[str]] = {}
    candidate_rows: set[int] = set()
    apart_groups: list[set[str]] = [set() for _ in apart]
    for request, pods in classes.items():
        name = pods[0].name if len(pods) == 1 else f"{pods[0].name} and {len(pods) - 1} alike"
        rows = feasible_rows(pods[0])
        names = frozenset(table.names[int(r)] for r in rows)
        feasible[name] = names
        candidate_rows.update(int(r) for r in rows)
        pod_groups.append(PodGroupSpec(name, ResourceVector(request[0]), tuple(p.uid for p in pods)))
        for i in request[2]:
            apart_groups[i].add(name)

    shapes, class_shapes, room_of = _rooms(member_rooms, list(classes.values()), feasible, len(members))
    resources = (*resources, *shapes)
    for i, shaped in enumerate(class_shapes):
        group = pod_groups[i]
        flags = tuple(int(shape in shaped) for shape in shapes)
        pod_groups[i] = PodGroupSpec(
            group.name, ResourceVector(group.request.values + flags), group.member_ids
        )

    nodes: list[NodeSpec] = []
    labels: dict[str, dict[str, str]] = {}
    ordered = np.array(sorted(candidate_rows), dtype=np.int64)
    extra = (
        [] if layers else [table.row[n] for n in dict.fromkeys(also_nodes) if table.row.get(n) is not None]
    )
    extra = [r for r in extra if r not in candidate_rows]
    rows_all = np.concatenate([ordered, np.array(extra, dtype=np.int64)])
    free = table.free(rows_all, cols) if rows_all.size else np.zeros((0, len(resources)), dtype=np.int64)
    row_list = rows_all.tolist()
    paths = node_paths(snapshot, row_list, chain) if chain else [() for _ in row_list]
    for row, vector, path in zip(row_list, np.maximum(free, 0).tolist(), paths, strict=True):
        if path is None:
            continue  # outside the topology tree: cannot host a topology gang
        info = snapshot.node_at(row)
        labels[info.name] = info.labels
        values = vector
        if held is not None and info.name in held:
            values = [v - h for v, h in zip(values, held[info.name], strict=True)]
        values += [room_of[shape].get(info.name, len(members)) for shape in shapes]
        nodes.append(NodeSpec(info.name, ResourceVector(tuple(values)), path))
    present = {n.name for n in nodes}
    node_scores: dict[str, int] = {}
    if score_rows is not None and ordered.size:
        # The score plugins' view (binpacking, NodeResourcesFitPlus ...) for the largest class of
        # members, scaled to 0..100: the solver's second objective after the topology.
        largest = max(classes.values(), key=len)[0]
        totals = score_rows(largest, ordered)
        top = int(totals.max()) if totals.size else 0
        if top > 0:
            node_scores = {
                table.names[int(r)]: int(t) * 100 // top
                for r, t in zip(ordered.tolist(), totals.tolist(), strict=True)
                if table.names[int(r)] in present
            }
    feasible = {g: frozenset(n for n in names if n in present) for g, names in feasible.items()}
    apart_rules = tuple(
        Apart(
            key or "node (host ports)",
            frozenset(groups),
            {n.name: n.name for n in nodes}
            if key == SAME_NODE
            else {n.name: labels[n.name][key] for n in nodes if key in labels[n.name]},
        )
        for (key, _), groups in zip(apart, apart_groups, strict=True)
    )
    return PlacementProblem(
        gang=gang_id,
        resources=resources,
        pod_groups=tuple(pod_groups),
        nodes=tuple(nodes),
        feasible_nodes=feasible,
        layers=layers,
        node_scores=node_scores,
        options=options,
        apart=apart_rules,
        spread=tuple(spread),
    )
