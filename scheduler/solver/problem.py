"""The gang placement problem, its answers, and the checks every answer must pass.

Problem: a gang (one PodGroup or a GangGroup) must be placed as a whole. Its members come grouped
by identical requests (`PodGroupSpec`); each group may only use the nodes that passed Filter for
it; each node has a free resource vector and a path in the network topology tree (one domain name
per layer, top-down, e.g. ``("s0", "b3")`` for SpineLayer > BlockLayer). Layers carry the gang's
gather strategy: MustGather (every member inside one domain of that layer), PreferGather (as few
domains as possible at that layer, nearest layer to the nodes first) and podCountMultiple (the
number of members inside each domain of that layer is a multiple of it). The answer is either one
node per member (`Plan`) or a typed `Infeasible` naming the binding constraint.

Everything here is a frozen dataclass of plain values (no scheduler cache types), so the solver
can run in a worker thread on a copy of the cycle's snapshot. `violations` and `objective` are
the single definition of "valid" and "better" shared by the solvers, the tests and the benchmark.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Literal

__all__ = [
    "Apart",
    "Infeasible",
    "InfeasibleReason",
    "ModelSize",
    "NodeSpec",
    "PlacementProblem",
    "Plan",
    "PlanStatus",
    "PodGroupSpec",
    "ResourceVector",
    "SolveOptions",
    "SpreadConstraint",
    "Strategy",
    "TopologyLayer",
    "domain_key",
    "domains_used",
    "objective",
    "violations",
]

GatherStrategy = Literal["MustGather", "PreferGather"]
Strategy = Literal["cpsat", "greedy"]
PlanStatus = Literal["OPTIMAL", "FEASIBLE", "GREEDY_FALLBACK", "GREEDY"]
InfeasibleReason = Literal[
    "INVALID",
    "NO_FEASIBLE_NODES",
    "CAPACITY",
    "MUST_GATHER",
    "POD_COUNT_MULTIPLE",
    "PACKING",
    "TOPOLOGY_SPREAD",
    "TIMEOUT",
]


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceVector:
    """Integer amounts over the problem's ``resources`` name tuple (millicores, bytes, counts)."""

    values: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.values)

    def __add__(self, other: ResourceVector) -> ResourceVector:
        return ResourceVector(tuple(a + b for a, b in zip(self.values, other.values, strict=True)))

    def __sub__(self, other: ResourceVector) -> ResourceVector:
        return ResourceVector(tuple(a - b for a, b in zip(self.values, other.values, strict=True)))

    def scaled(self, k: int) -> ResourceVector:
        return ResourceVector(tuple(a * k for a in self.values))

    def fits_in(self, free: ResourceVector) -> bool:
        return all(a <= b for a, b in zip(self.values, free.values, strict=True))

    @staticmethod
    def zeros(n: int) -> ResourceVector:
        return ResourceVector((0,) * n)


@dataclasses.dataclass(frozen=True, slots=True)
class PodGroupSpec:
    """A class of identical gang members: same request, same feasible nodes.

    ``member_ids`` are in rank order; ``ranks`` (network-topology-index) are optional and, when
    given, align with ``member_ids``.
    """

    name: str
    request: ResourceVector
    member_ids: tuple[str, ...]
    ranks: tuple[int, ...] | None = None

    @property
    def count(self) -> int:
        return len(self.member_ids)


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node after Filter: its free resources and its topology path (one name per layer, top-down)."""

    name: str
    free: ResourceVector
    path: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class TopologyLayer:
    """One topology layer between the cluster root and the nodes, with the gang's rule for it."""

    name: str
    strategy: GatherStrategy | None = None
    pod_count_multiple: int = 1


@dataclasses.dataclass(frozen=True)
class SpreadConstraint:
    """A ``DoNotSchedule`` topology spread constraint that members of the gang carry.

    ``domains`` maps each node that takes part in the constraint (upstream's eligible nodes) to
    its domain; ``existing`` counts the matching pods already in each of those domains (every
    domain listed, zeros included). After placement, with ``count(d)`` = existing plus the
    ``matching`` members placed in d and ``low`` the smallest count (0 when there are fewer
    domains than ``min_domains``), every domain that receives a ``constrained`` member must have
    ``count(d) - low <= max_skew``: the state kube-scheduler's Filter keeps when it places pods
    one by one into the least loaded domains first."""

    name: str
    max_skew: int
    domains: Mapping[str, str]
    existing: Mapping[str, int]
    constrained: frozenset[str]
    matching: frozenset[str]
    min_domains: int = 1

    def counts(self, placed: Mapping[str, str]) -> dict[str, int]:
        """Matching pods per domain once ``placed`` (member -> node) are added."""
        counts = {d: self.existing.get(d, 0) for d in set(self.domains.values())}
        for member, node in placed.items():
            domain = self.domains.get(node)
            if domain is not None and member in self.matching:
                counts[domain] += 1
        return counts

    def low(self, counts: Mapping[str, int]) -> int:
        return min(counts.values()) if counts and len(counts) >= self.min_domains else 0


@dataclasses.dataclass(frozen=True, slots=True)
class Apart:
    """Members that must not share a domain of a node label: at most one member of ``groups`` per
    domain (required pod anti-affinity among a gang's members, e.g. one worker per hostname).
    ``domains`` maps a node to its domain; a node absent from it lacks the label and is free of
    the rule (as kube-scheduler treats a node without the term's topology key)."""

    key: str
    groups: frozenset[str]
    domains: Mapping[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class SolveOptions:
    """How to solve. Defaults keep a gang decision inside one scheduling cycle's budget."""

    time_limit_seconds: float = 1.0
    """Wall-clock limit for all CP-SAT solves of one problem; the greedy answer is used past it."""
    workers: int = 2
    """CP-SAT subsolvers. The search is interleaved (deterministic) for a fixed count and seed."""
    seed: int = 0
    """CP-SAT random seed."""
    strategy: Strategy = "cpsat"
    """``cpsat`` (the model, greedy as hint and fallback) or ``greedy`` (Koordinator's plan only)."""
    score_weight: int = 1
    """Weight of the node-score term; it always ranks after the topology terms. 0 ignores scores."""
    max_patterns_per_class: int = 64
    """Per-node packing patterns kept for a node class before it is split into single nodes."""
    relative_gap: float = 0.01
    """Stop as soon as the answer is proven within this relative gap of the best possible one
    (on the first objective term not yet proven optimal); 0 asks for a proof of optimality.
    Such an answer is reported OPTIMAL, with its gap."""


@dataclasses.dataclass(frozen=True)
class PlacementProblem:
    """One gang to place. ``feasible_nodes[group]`` lists the nodes that passed Filter for a group
    (a group absent from the mapping may use every node). ``node_scores`` are the configured
    score plugins' sums per node, 0..100 (absent = 0). ``layers`` run top-down and exclude the
    cluster root and the node layer; every node's path has one name per layer."""

    gang: str
    resources: tuple[str, ...]
    pod_groups: tuple[PodGroupSpec, ...]
    nodes: tuple[NodeSpec, ...]
    feasible_nodes: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    layers: tuple[TopologyLayer, ...] = ()
    node_scores: Mapping[str, int] = dataclasses.field(default_factory=dict)
    options: SolveOptions = SolveOptions()
    apart: tuple[Apart, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    """DoNotSchedule topology spread constraints of the members; every member of a pod group is
    alike for each (constrained or not, matching or not)."""

    def __post_init__(self) -> None:
        n = len(self.resources)
        for g in self.pod_groups:
            if len(g.request) != n:
                raise ValueError(f"pod group {g.name}: request has {len(g.request)} values, want {n}")
            if any(v < 0 for v in g.request.values):
                raise ValueError(f"pod group {g.name}: negative request")
            if g.ranks is not None and len(g.ranks) != g.count:
                raise ValueError(f"pod group {g.name}: {len(g.ranks)} ranks for {g.count} members")
        for node in self.nodes:
            if len(node.free) != n:
                raise ValueError(f"node {node.name}: free has {len(node.free)} values, want {n}")
            if len(node.path) != len(self.layers):
                raise ValueError(
                    f"node {node.name}: path {node.path} does not match {len(self.layers)} layers"
                )
        if len({g.name for g in self.pod_groups}) != len(self.pod_groups):
            raise ValueError("pod group names must be unique")
        if len({node.name for node in self.nodes}) != len(self.nodes):
            raise ValueError("node names must be unique")
        members = [m for g in self.pod_groups for m in g.member_ids]
        if len(set(members)) != len(members):
            raise ValueError("member ids must be unique")
        for layer in self.layers:
            if layer.pod_count_multiple < 1:
                raise ValueError(f"layer {layer.name}: podCountMultiple must be >= 1")
        for spread in self.spread:
            for g in self.pod_groups:
                for ids in (spread.constrained, spread.matching):
                    if len({m in ids for m in g.member_ids}) > 1:
                        raise ValueError(f"spread {spread.name}: pod group {g.name} mixes members")

    @property
    def member_count(self) -> int:
        return sum(g.count for g in self.pod_groups)

    def feasible(self, group: PodGroupSpec, node: NodeSpec) -> bool:
        allowed = self.feasible_nodes.get(group.name)
        return allowed is None or node.name in allowed

    def score(self, node_name: str) -> int:
        return self.node_scores.get(node_name, 0)

    @property
    def must_gather_index(self) -> int | None:
        """The deepest MustGather layer (MustGather at a block implies it at its spine)."""
        found = [i for i, layer in enumerate(self.layers) if layer.strategy == "MustGather"]
        return max(found) if found else None

    @functools.cached_property
    def must_gather_domains(self) -> Mapping[tuple[str, ...], tuple[NodeSpec, ...]]:
        """The nodes of each domain of the deepest MustGather layer, domains in sorted order (one
        domain ``()`` of every node without MustGather)."""
        must = self.must_gather_index
        found: dict[tuple[str, ...], list[NodeSpec]] = {} if must is not None else {(): []}
        for node in self.nodes:
            found.setdefault(() if must is None else domain_key(node.path, must), []).append(node)
        return {key: tuple(found[key]) for key in sorted(found)}

    @property
    def prefer_gather_order(self) -> tuple[int, ...]:
        """PreferGather layers below the MustGather layer, nearest to the nodes first."""
        must = self.must_gather_index
        return tuple(
            i
            for i in reversed(range(len(self.layers)))
            if self.layers[i].strategy == "PreferGather" and (must is None or i > must)
        )

    @property
    def has_topology_spec(self) -> bool:
        return any(layer.strategy is not None or layer.pod_count_multiple > 1 for layer in self.layers)


@dataclasses.dataclass(frozen=True, slots=True)
class ModelSize:
    """How big the solved models were (summed over candidate domains)."""

    variables: int = 0
    constraints: int = 0
    node_classes: int = 0
    candidates: int = 0
    solved_candidates: int = 0


@dataclasses.dataclass(frozen=True)
class Plan:
    """One node per member. ``objective`` is `objective(problem, assignment)`."""

    assignment: Mapping[str, str]
    strategy: Strategy
    status: PlanStatus
    domains_used: tuple[tuple[str, int], ...]
    objective: tuple[int, ...]
    solve_seconds: float
    model_size: ModelSize = ModelSize()
    gap: float | None = 0.0
    """Proven relative gap of the first objective term not proven optimal (0: optimal; at most
    ``SolveOptions.relative_gap`` when OPTIMAL); None when nothing bounds it (greedy)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Infeasible:
    """No placement: the reason code, a human message and the binding constraint."""

    reason: InfeasibleReason
    message: str
    layer: str | None = None
    groups: tuple[str, ...] = ()
    solve_seconds: float = 0.0
    strategy: Strategy = "cpsat"


def domain_key(path: tuple[str, ...], layer_index: int) -> tuple[str, ...]:
    """Domains are path prefixes, so equal names under different parents stay distinct."""
    return path[: layer_index + 1]


def domains_used(problem: PlacementProblem, assignment: Mapping[str, str]) -> tuple[tuple[str, int], ...]:
    """Number of domains holding at least one member, per layer (top-down)."""
    by_name = {n.name: n for n in problem.nodes}
    out = []
    for i, layer in enumerate(problem.layers):
        used = {domain_key(by_name[node].path, i) for node in assignment.values()}
        out.append((layer.name, len(used)))
    return tuple(out)


def objective(problem: PlacementProblem, assignment: Mapping[str, str]) -> tuple[int, ...]:
    """The lexicographic cost of an assignment (smaller is better): domains used at each
    PreferGather layer, nearest to the nodes first, then minus the weighted node-score sum."""
    by_name = {n.name: n for n in problem.nodes}
    costs = []
    for i in problem.prefer_gather_order:
        costs.append(len({domain_key(by_name[node].path, i) for node in assignment.values()}))
    score = sum(problem.score(node) for node in assignment.values())
    costs.append(-problem.options.score_weight * score)
    return tuple(costs)


def violations(problem: PlacementProblem, assignment: Mapping[str, str]) -> list[str]:
    """Every rule an assignment breaks (empty = valid): completeness, feasibility, capacity,
    MustGather, podCountMultiple, members kept apart and topology spread."""
    out: list[str] = []
    by_name = {n.name: n for n in problem.nodes}
    used: dict[str, ResourceVector] = {}
    for group in problem.pod_groups:
        for member in group.member_ids:
            node_name = assignment.get(member)
            if node_name is None:
                out.append(f"member {member} has no node")
                continue
            node = by_name.get(node_name)
            if node is None:
                out.append(f"member {member} on unknown node {node_name}")
                continue
            if not problem.feasible(group, node):
                out.append(f"member {member} on node {node_name} that failed Filter for {group.name}")
            used[node_name] = (
                used.get(node_name, ResourceVector.zeros(len(problem.resources))) + group.request
            )
    known = {m for g in problem.pod_groups for m in g.member_ids}
    out.extend(f"unknown member {m}" for m in sorted(set(assignment) - known))
    for node_name in sorted(used):
        if not used[node_name].fits_in(by_name[node_name].free):
            out.append(
                f"node {node_name} overcommitted: {used[node_name].values} > {by_name[node_name].free.values}"
            )
    placed = [by_name[n] for n in assignment.values() if n in by_name]
    for i, layer in enumerate(problem.layers):
        counts: dict[tuple[str, ...], int] = {}
        for node in placed:
            key = domain_key(node.path, i)
            counts[key] = counts.get(key, 0) + 1
        must = problem.must_gather_index
        if must is not None and i <= must and len(counts) > 1:
            out.append(f"MustGather {layer.name}: members in {len(counts)} domains")
        k = layer.pod_count_multiple
        for key in sorted(counts):
            if counts[key] % k:
                out.append(f"podCountMultiple {k} at {layer.name}: {'/'.join(key)} holds {counts[key]}")
    group_of = {m: g.name for g in problem.pod_groups for m in g.member_ids}
    for apart in problem.apart:
        together: dict[str, int] = {}
        for member, node_name in assignment.items():
            domain = apart.domains.get(node_name)
            if domain is not None and group_of.get(member) in apart.groups:
                together[domain] = together.get(domain, 0) + 1
        for domain in sorted(d for d, n in together.items() if n > 1):
            out.append(f"anti-affinity on {apart.key}: {domain} holds {together[domain]} members")
    out.extend(spread_violations(problem, assignment))
    return out


def spread_violations(problem: PlacementProblem, assignment: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for spread in problem.spread:
        counts = spread.counts(assignment)
        low = spread.low(counts)
        receiving = {
            spread.domains[node]
            for member, node in assignment.items()
            if member in spread.constrained and node in spread.domains
        }
        for domain in sorted(receiving):
            if counts[domain] - low > spread.max_skew:
                out.append(
                    f"topology spread {spread.name}: {domain} holds {counts[domain]}, "
                    f"{counts[domain] - low} above the least loaded domain (maxSkew {spread.max_skew})"
                )
    return out
