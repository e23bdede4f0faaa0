"""A quota tree's figures: requests aggregated bottom-up, runtime computed top-down (algorithms.md 4.2-4.4).

Pure data in, pure data out: ``QuotaSpec`` (what the ElasticQuota objects say), ``Usage`` (what a
leaf's pods ask for and hold), ``TreeInput`` (a root and the total it shares) go into
``compute_tree``, which returns every reachable quota's ``Figures``. Nothing here knows about pods,
nodes or the scheduler; ``scheduler.plugins.elastic_quota`` builds the inputs.

Only the resources named in a quota's ``max`` are tracked for it (its requests and use are masked
to those names), as in Koordinator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.quota import runtime as sharing

__all__ = ["Figures", "QuotaSpec", "Resources", "TreeInput", "Usage", "compute_tree"]

Resources = Mapping[str, int]
"""Resource name -> amount in integer units (milli-CPU for cpu, bytes or counts otherwise)."""


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    name: str
    parent: str
    """The parent's name; "" for the top of a tree."""
    min: Resources = field(default_factory=dict)
    max: Resources = field(default_factory=dict)
    shared_weight: Resources = field(default_factory=dict)
    """Already resolved: the annotation, or ``max`` when it is absent (``resolve_shared_weight``)."""
    lends: bool = True
    """``allow-lent-resource`` is not ``"false"``."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What the pods charged to one quota ask for (pending and assigned) and hold (assigned)."""

    request: Resources = field(default_factory=dict)
    used: Resources = field(default_factory=dict)
    non_preemptible_request: Resources = field(default_factory=dict)
    non_preemptible_used: Resources = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TreeInput:
    root: str
    total: Resources
    """What the tree shares: the cluster total (default tree) or its nodes' total (a profile's tree)."""
    outside: frozenset[str] = frozenset()
    """Children of the root kept out of sharing (system and default quotas, 4.1 and 4.10): their
    runtime is their max and their use is taken off the total before anyone else shares it."""


@dataclass(frozen=True, slots=True)
class Figures:
    """Every number of one quota, per resource; each mapping holds only the quota's max names."""

    name: str
    parent: str
    min: Resources
    max: Resources
    auto_scale_min: Resources
    """Min after scaling down to what the parent has (4.4); equal to min when it fits."""
    shared_weight: Resources
    child_request: Resources
    """Its pods' requests (a leaf) or its children's capped requests (an inner quota)."""
    request: Resources
    """child_request, raised to min when it does not lend, capped at max: what the parent sees."""
    used: Resources
    non_preemptible_request: Resources
    non_preemptible_used: Resources
    runtime: Resources
    """What it may use right now."""
    allocated: Resources = field(default_factory=dict)
    """ElasticQuotaGuaranteeUsage only (else empty): its pods' use (a leaf) or the sum of its
    children's ``guaranteed`` (an inner quota)."""
    guaranteed: Resources = field(default_factory=dict)
    """ElasticQuotaGuaranteeUsage only (else empty): ``max(min, allocated)``, what it is promised:
    its runtime never drops below it when siblings share."""


def _mask(amounts: Resources, names: Iterable[str]) -> dict[str, int]:
    return {name: amounts.get(name, 0) for name in names}


def _sum(parts: Iterable[Resources], names: Iterable[str]) -> dict[str, int]:
    total = dict.fromkeys(names, 0)
    for part in parts:
        for name in total:
            total[name] += part.get(name, 0)
    return total


@dataclass
class _Node:
    spec: QuotaSpec
    children: list[str] = field(default_factory=list)
    child_request: dict[str, int] = field(default_factory=dict)
    request: dict[str, int] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    np_request: dict[str, int] = field(default_factory=dict)
    np_used: dict[str, int] = field(default_factory=dict)
    auto_scale_min: dict[str, int] = field(default_factory=dict)
    runtime: dict[str, int] = field(default_factory=dict)
    allocated: dict[str, int] = field(default_factory=dict)
    guaranteed: dict[str, int] = field(default_factory=dict)


def compute_tree(
    quotas: Mapping[str, QuotaSpec],
    usage: Mapping[str, Usage],
    tree: TreeInput,
    *,
    scale_min: bool = True,
    guarantee: bool = False,
) -> dict[str, Figures]:
    """The figures of ``tree.root`` and every quota reachable from it through ``parent`` links.

    1. Bottom-up (4.2): a leaf's child_request is its pods' request; an inner quota's is the sum of
       its children's requests; request = child_request, raised to min if it does not lend, capped
       at max. Used and non-preemptible figures add up unchanged.
    2. The root's runtime is ``tree.total`` minus what the ``outside`` children use; theirs is their max.
    3. Top-down (4.3/4.4), per resource: the children of each quota share its runtime (``share``),
       their mins scaled down first when ``scale_min`` and the mins do not fit.

    With ``guarantee`` (Koordinator's ElasticQuotaGuaranteeUsage), step 1 also sets ``allocated``
    (a leaf's used; an inner quota's children's ``guaranteed`` summed) and ``guaranteed =
    max(min, allocated)`` below the root, and in step 3 a child's floor is ``max(its min after
    scaling, guaranteed)``, as in Koordinator's ``redistribution``: what a quota holds is not
    shared out from under it.
    """
    if tree.root not in quotas:
        return {}
    nodes, order = _linked(quotas, tree.root)
    for name in reversed(order):
        _aggregate(nodes[name], nodes, usage.get(name, Usage()), tree, name == tree.root)
        if guarantee and name != tree.root:
            _guarantee(nodes[name], nodes)
    root = nodes[tree.root]
    outside = [nodes[name] for name in root.children if name in tree.outside]
    names = dict.fromkeys([*tree.total, *root.spec.max])
    root.runtime = {n: tree.total.get(n, 0) - sum(o.used.get(n, 0) for o in outside) for n in names}
    root.auto_scale_min = dict(root.spec.min)
    for name in order:
        _share_among_children(nodes[name], nodes, tree, scale_min, guarantee)
    return {name: _figures(nodes[name]) for name in order}


def _guarantee(node: _Node, nodes: Mapping[str, _Node]) -> None:
    keys = list(node.spec.max)
    if node.children:
        node.allocated = _sum((nodes[c].guaranteed for c in node.children), keys)
    else:
        node.allocated = _mask(node.used, keys)
    node.guaranteed = {k: max(node.spec.min.get(k, 0), node.allocated.get(k, 0)) for k in keys}


def _linked(quotas: Mapping[str, QuotaSpec], root: str) -> tuple[dict[str, _Node], list[str]]:
    """A node per quota, each parent listing its children (by name), and the preorder from
    ``root`` (a parent before its children; quotas not reachable from ``root`` are left out)."""
    nodes = {name: _Node(spec) for name, spec in quotas.items()}
    for name, node in sorted(nodes.items()):
        parent = nodes.get(node.spec.parent)
        if parent is not None and name != root:
            parent.children.append(name)
    return nodes, _preorder(nodes, root)


def _preorder(nodes: Mapping[str, _Node], root: str) -> list[str]:
    order: list[str] = []
    seen: set[str] = set()
    stack = [root]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        order.append(name)
        stack.extend(reversed(nodes[name].children))
    return order


def _aggregate(node: _Node, nodes: Mapping[str, _Node], usage: Usage, tree: TreeInput, is_root: bool) -> None:
    spec = node.spec
    keys = list(spec.max) if not is_root else list(dict.fromkeys([*spec.max, *tree.total]))
    inside = [nodes[c] for c in node.children if not (is_root and c in tree.outside)]
    if node.children:
        node.child_request = _sum((c.request for c in inside), keys)
        node.used = _sum((c.used for c in _children_of(node, nodes)), keys)
        node.np_request = _sum((c.np_request for c in _children_of(node, nodes)), keys)
        node.np_used = _sum((c.np_used for c in _children_of(node, nodes)), keys)
    else:
        node.child_request = _mask(usage.request, keys)
        node.used = _mask(usage.used, keys)
        node.np_request = _mask(usage.non_preemptible_request, keys)
        node.np_used = _mask(usage.non_preemptible_used, keys)
    request = dict(node.child_request)
    if not spec.lends:
        for name, amount in spec.min.items():
            if name in request:
                request[name] = max(request[name], amount)
    node.request = request if is_root else {n: min(request[n], spec.max[n]) for n in keys}


def _children_of(node: _Node, nodes: Mapping[str, _Node]) -> list[_Node]:
    return [nodes[c] for c in node.children]


def _share_among_children(
    node: _Node, nodes: Mapping[str, _Node], tree: TreeInput, scale_min: bool, guarantee: bool
) -> None:
    is_root = node.spec.name == tree.root
    children = [nodes[c] for c in node.children]
    sharing_children = [c for c in children if not (is_root and c.spec.name in tree.outside)]
    for child in children:
        if child not in sharing_children:
            child.runtime = dict(child.spec.max)
            child.auto_scale_min = dict(child.spec.min)
    names = dict.fromkeys(n for c in sharing_children for n in c.spec.max)
    for child in sharing_children:
        child.auto_scale_min = {n: child.spec.min[n] for n in child.spec.max if n in child.spec.min}
    for resource in names:
        members = [c for c in sharing_children if resource in c.spec.max]
        total = node.runtime.get(resource, 0)
        mins = {c.spec.name: c.spec.min.get(resource, 0) for c in members}
        floors = sharing.scale_mins(total, mins) if scale_min else mins
        runtime = sharing.share(
            total,
            [
                sharing.Child(
                    name=c.spec.name,
                    min=max(floors[c.spec.name], c.guaranteed.get(resource, 0))
                    if guarantee
                    else floors[c.spec.name],
                    request=c.request.get(resource, 0),
                    weight=c.spec.shared_weight.get(resource, 0),
                    lends=c.spec.lends,
                )
                for c in members
            ],
        )
        for child in members:
            child.runtime[resource] = min(runtime[child.spec.name], child.spec.max[resource])
            if resource in child.spec.min:
                child.auto_scale_min[resource] = floors[child.spec.name]


def _figures(node: _Node) -> Figures:
    spec = node.spec
    return Figures(
        name=spec.name,
        parent=spec.parent,
        min=dict(spec.min),
        max=dict(spec.max),
        auto_scale_min=dict(node.auto_scale_min),
        shared_weight=dict(spec.shared_weight),
        child_request=dict(node.child_request),
        request=dict(node.request),
        used=dict(node.used),
        non_preemptible_request=dict(node.np_request),
        non_preemptible_used=dict(node.np_used),
        runtime=dict(node.runtime),
        allocated=dict(node.allocated),
        guaranteed=dict(node.guaranteed),
    )
