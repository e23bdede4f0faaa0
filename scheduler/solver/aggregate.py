"""Fold identical nodes and identical pods into counted classes, with per-node packing patterns.

Problem: a 1,024-member gang on 5,000 nodes must stay a small model. Members with the same request
and the same feasible nodes are interchangeable, and so are nodes with the same free vector, the
same topology path (down to the lowest layer), the same feasibility for every group and the same
score. Folding both sides turns "which node for which member" into "how many members of pod class
g on node class c": a few hundred integers instead of millions of booleans.

Capacity of a node class is per node, not per class: ``cap(c, g)`` pods of g fit on one node
(integer division per resource, min over requested resources). When several pod classes may
share the nodes of a class with more than one node, the sum of independent per-class bounds
overstates what fits (bin packing), so the class also carries its maximal per-node *patterns*:
vectors ``k`` with ``sum_g k_g * request_g <= free`` that cannot take one more pod of any class.
The model then counts nodes per pattern, which is exact. Nodes are folded on (path, caps, score,
patterns), not on the raw free vector: two nodes that pack the gang's pods the same way are
interchangeable even if their free CPU differs. A node whose patterns exceed
`SolveOptions.max_patterns_per_class` stays a class of its own, where the per-resource vector
constraint is exact by itself.

`DomainCapacity` gives counting upper bounds per topology domain (per pod class, and in total
with podCountMultiple flooring, as in Koordinator's offer slots), used to decide by counting
which domains can hold the gang at all.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from scheduler.solver.problem import NodeSpec, PlacementProblem, ResourceVector

__all__ = ["Aggregate", "DomainCapacity", "NodeClass", "PodClass", "aggregate", "per_node_capacity"]


def per_node_capacity(free: ResourceVector, request: ResourceVector, limit: int) -> int:
    """How many pods of ``request`` fit on one node with ``free`` (at most ``limit``)."""
    cap = limit
    for f, r in zip(free.values, request.values, strict=True):
        if r > 0:
            cap = min(cap, max(f, 0) // r)
    return max(cap, 0)


@dataclasses.dataclass(frozen=True, slots=True)
class PodClass:
    """Identical members: same request and same feasible nodes (one or more input groups)."""

    index: int
    request: ResourceVector
    groups: tuple[int, ...]
    count: int
    name: str
    apart: tuple[int, ...] = ()
    """Indexes of the problem's ``apart`` rules its members are under."""


@dataclasses.dataclass(frozen=True, slots=True)
class NodeClass:
    """Identical nodes in one lowest-layer domain. ``caps[g]`` is per node (0 = infeasible)."""

    index: int
    free: ResourceVector
    path: tuple[str, ...]
    score: int
    nodes: tuple[str, ...]
    caps: tuple[int, ...]
    patterns: tuple[tuple[int, ...], ...]
    """Maximal per-node packings when more than one pod class fits; empty when one pod class fits
    (``caps`` is exact) or when there were too many (a single node: the vector constraint on
    ``free`` is exact)."""
    max_pods_per_node: int
    domains: tuple[str | None, ...] = ()
    """The nodes' domain for each of the problem's ``apart`` rules (None: no such label)."""

    @property
    def multiplicity(self) -> int:
        return len(self.nodes)


@dataclasses.dataclass(frozen=True, slots=True)
class Aggregate:
    pod_classes: tuple[PodClass, ...]
    node_classes: tuple[NodeClass, ...]


def _fold_pods(problem: PlacementProblem) -> tuple[PodClass, ...]:
    by_key: dict[
        tuple[tuple[int, ...], frozenset[str] | None, tuple[int, ...], tuple[bool, ...]], list[int]
    ] = {}
    for gi, g in enumerate(problem.pod_groups):
        feasible = problem.feasible_nodes.get(g.name)
        apart = tuple(i for i, rule in enumerate(problem.apart) if g.name in rule.groups)
        first = g.member_ids[0] if g.member_ids else ""
        spread = tuple(b for c in problem.spread for b in (first in c.constrained, first in c.matching))
        by_key.setdefault((g.request.values, feasible, apart, spread), []).append(gi)
    out = []
    for idx, (key, groups) in enumerate(by_key.items()):
        out.append(
            PodClass(
                index=idx,
                request=ResourceVector(key[0]),
                groups=tuple(groups),
                count=sum(problem.pod_groups[i].count for i in groups),
                name="+".join(problem.pod_groups[i].name for i in groups),
                apart=key[2],
            )
        )
    return tuple(out)


def _patterns(
    free: ResourceVector, pods: tuple[PodClass, ...], caps: tuple[int, ...], limit: int
) -> list[tuple[int, ...]] | None:
    """Maximal per-node packings, or None when there are more than ``limit``."""
    active = [p.index for p in pods if caps[p.index] > 0]
    found: list[tuple[int, ...]] = []
    k = [0] * len(pods)

    def rec(pos: int, left: ResourceVector) -> bool:
        if pos == len(active):
            if any(caps[g] > k[g] and pods[g].request.fits_in(left) for g in active):
                return True  # not maximal
            found.append(tuple(k))
            return len(found) <= limit
        g = active[pos]
        most = per_node_capacity(left, pods[g].request, caps[g])
        for n in range(most, -1, -1):
            k[g] = n
            if not rec(pos + 1, left - pods[g].request.scaled(n)):
                k[g] = 0
                return False
        k[g] = 0
        return True

    if not rec(0, free):
        return None
    return found


def aggregate(problem: PlacementProblem, nodes: tuple[str, ...] | None = None) -> Aggregate:
    """Fold the problem (optionally only the named nodes) into pod classes and node classes."""
    pods = _fold_pods(problem)
    limit_total = problem.member_count
    wanted = None if nodes is None else set(nodes)
    limit = problem.options.max_patterns_per_class
    pattern_cache: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], ...] | None] = {}
    # Nodes are interchangeable when their per-node packings are: same path, score, caps and
    # maximal patterns (the free vector itself only matters through those).
    classes: dict[tuple[object, ...], list[NodeSpec]] = defaultdict(list)
    for node in problem.nodes:
        if wanted is not None and node.name not in wanted:
            continue
        caps = tuple(
            per_node_capacity(node.free, pc.request, min(pc.count, limit_total))
            if problem.feasible(problem.pod_groups[pc.groups[0]], node)
            else 0
            for pc in pods
        )
        if not any(caps):
            continue
        patterns: tuple[tuple[int, ...], ...] | None = ()
        if sum(1 for c in caps if c > 0) > 1:
            pkey = (node.free.values, caps)
            if pkey not in pattern_cache:
                found = _patterns(node.free, pods, caps, limit)
                pattern_cache[pkey] = None if found is None else tuple(sorted(found, reverse=True))
            patterns = pattern_cache[pkey]
        domains = tuple(rule.domains.get(node.name) for rule in problem.apart)
        spread = tuple(c.domains.get(node.name) for c in problem.spread)
        key: tuple[object, ...] = (node.path, caps, problem.score(node.name), patterns, domains, spread)
        if patterns is None:
            key = (*key, node.name)  # too many packings: a class of its own, vector constraint
        classes[key].append(node)
    out: list[NodeClass] = []
    for members in sorted(classes.values(), key=lambda ns: (ns[0].path, min(n.name for n in ns))):
        first = members[0]
        names = tuple(sorted(n.name for n in members))
        caps = tuple(
            per_node_capacity(first.free, pc.request, min(pc.count, limit_total))
            if problem.feasible(problem.pod_groups[pc.groups[0]], first)
            else 0
            for pc in pods
        )
        pats = pattern_cache.get((first.free.values, caps), ()) or ()
        max_pods = max(sum(p) for p in pats) if pats else sum(caps)
        domains = tuple(rule.domains.get(first.name) for rule in problem.apart)
        out.append(
            NodeClass(
                len(out),
                first.free,
                first.path,
                problem.score(first.name),
                names,
                caps,
                pats,
                max_pods,
                domains,
            )
        )
    return Aggregate(pods, tuple(out))


@dataclasses.dataclass(frozen=True, slots=True)
class DomainCapacity:
    """Counting upper bounds per domain (path prefix; ``()`` is the cluster root).

    ``per_class[d][g]``: members of pod class g that the domain's nodes can hold, ignoring the
    others. ``total[d]``: members of any class, floored to podCountMultiple bottom-up.
    ``holds[d]``: at most how many gang members the domain can hold.
    """

    per_class: dict[tuple[str, ...], tuple[int, ...]]
    total: dict[tuple[str, ...], int]
    holds: dict[tuple[str, ...], int]

    @staticmethod
    def build(problem: PlacementProblem, agg: Aggregate) -> DomainCapacity:
        n_layers = len(problem.layers)
        n_pods = len(agg.pod_classes)
        per_class: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0] * n_pods)
        raw_total: dict[tuple[str, ...], int] = defaultdict(int)
        for c in agg.node_classes:
            for depth in range(n_layers + 1):
                key = c.path[:depth]
                pc = per_class[key]
                for g in range(n_pods):
                    pc[g] += c.caps[g] * c.multiplicity
            raw_total[c.path] += c.max_pods_per_node * c.multiplicity
        # podCountMultiple flooring, bottom-up: a domain's bound is the sum of its children's.
        total: dict[tuple[str, ...], int] = {}
        for depth in range(n_layers, -1, -1):
            sums: dict[tuple[str, ...], int] = defaultdict(int)
            if depth == n_layers:
                sums.update(raw_total)
            else:
                for key, v in total.items():
                    if len(key) == depth + 1:
                        sums[key[:depth]] += v
            k = problem.layers[depth - 1].pod_count_multiple if depth > 0 else 1
            for key, v in sums.items():
                total[key] = v - v % k
        counts = [p.count for p in agg.pod_classes]
        holds = {
            key: min(total.get(key, 0), sum(min(c, v) for c, v in zip(counts, pc, strict=True)))
            for key, pc in per_class.items()
        }
        return DomainCapacity({k: tuple(v) for k, v in per_class.items()}, total, holds)

    def can_hold(self, key: tuple[str, ...], counts: tuple[int, ...]) -> bool:
        pc = self.per_class.get(key)
        if pc is None:
            return False
        total_need = sum(counts)
        return self.total.get(key, 0) >= total_need and all(v >= c for v, c in zip(pc, counts, strict=True))
