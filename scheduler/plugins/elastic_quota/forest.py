"""Every quota tree at once: the default tree and one tree per ElasticQuotaProfile (algorithms.md 4.8).

A profile's tree is rooted at a quota labelled ``is-root=true``; its total is the allocatable of the
nodes its profile's ``nodeSelector`` selects, times ``resourceRatio``, taken from the scheduler's own
node view (a root with no known profile falls back to its ``total-resource`` annotation, and so
does a root whose profile is invalid: a malformed ``resourceRatio`` is logged and that profile
ignored). The
default tree (``koordinator-root-quota``) shares the cluster total minus every other tree's total
(unless that root says ``ignore-default-tree``), less what the system and default quotas use.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from apis.errors import InvalidSpec
from apis.extension import quota as quota_ext
from apis.meta import selects
from scheduler.plugins.elastic_quota.quotas import QuotaIndex, QuotaInfo
from scheduler.quota import Figures, QuotaSpec, TreeInput, Usage, compute_tree
from scheduler.quota.incremental import TreeState
from scheduler.quota.tree import Resources

__all__ = ["Forest", "ForestState", "NodeView", "Totals", "compute_forest", "compute_totals"]

log = logging.getLogger(__name__)

OUTSIDE = frozenset({quota_ext.SYSTEM_QUOTA_NAME, quota_ext.DEFAULT_QUOTA_NAME})


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    allocatable: Resources


@dataclass(frozen=True, slots=True)
class Forest:
    figures: Mapping[str, Figures]
    """Every quota in some tree, by name."""
    tree_of: Mapping[str, str]
    """Quota name -> the root of its tree."""
    tree_nodes: Mapping[str, frozenset[str]]
    """Profile tree root -> the nodes of that tree (the default tree is not listed: all nodes)."""
    totals: Mapping[str, Resources]
    """Tree root -> the total it shares."""


def _sum(nodes: Sequence[NodeView]) -> dict[str, int]:
    total: dict[str, int] = {}
    for node in nodes:
        for name, amount in node.allocatable.items():
            total[name] = total.get(name, 0) + amount
    return total


def _tree_total(
    index: QuotaIndex, root: QuotaInfo, nodes: Sequence[NodeView]
) -> tuple[Resources, frozenset[str] | None]:
    profile = index.profile_of(root)
    if profile is None or profile.spec is None:
        return dict(root.total_resource), None
    try:
        ratio = profile.spec.ratio()
    except InvalidSpec as error:
        log.warning(
            "ElasticQuotaProfile %s/%s ignored: %s", profile.metadata.namespace, profile.metadata.name, error
        )
        return dict(root.total_resource), None
    selected = [n for n in nodes if selects(profile.spec.node_selector, n.labels)]
    total = {name: math.floor(amount * ratio) for name, amount in _sum(selected).items()}
    return total, frozenset(n.name for n in selected)


@dataclass(frozen=True, slots=True)
class Totals:
    """What each tree shares and which nodes a profile's tree owns: depends on the nodes and the
    quota objects only, so it is computed once per node or quota change, not per pod."""

    trees: tuple[TreeInput, ...]
    tree_nodes: Mapping[str, frozenset[str]]


def compute_totals(index: QuotaIndex, nodes: Sequence[NodeView]) -> Totals:
    """Every tree's total (see the module docstring), the default tree first."""
    default_total = _sum(nodes)
    trees: list[TreeInput] = []
    tree_nodes: dict[str, frozenset[str]] = {}
    for name, info in sorted(index.quotas.items()):
        if not info.is_tree_root:
            continue
        total, selected = _tree_total(index, info, nodes)
        trees.append(TreeInput(name, total))
        if selected is not None:
            tree_nodes[name] = selected
        if not info.ignore_default_tree:
            for resource, amount in total.items():
                default_total[resource] = max(default_total.get(resource, 0) - amount, 0)
    trees.insert(0, TreeInput(quota_ext.ROOT_QUOTA_NAME, default_total, outside=OUTSIDE))
    return Totals(tuple(trees), tree_nodes)


def compute_forest(
    index: QuotaIndex,
    usage: Mapping[str, Usage],
    totals: Totals,
    *,
    scale_min: bool = True,
    guarantee: bool = False,
) -> Forest:
    """The figures of every tree over ``totals`` (``compute_totals``)."""
    specs = {name: info.spec for name, info in index.quotas.items()}
    figures: dict[str, Figures] = {}
    tree_of: dict[str, str] = {}
    for tree in totals.trees:
        for name, fig in compute_tree(specs, usage, tree, scale_min=scale_min, guarantee=guarantee).items():
            is_profile_root = name == tree.root and name != quota_ext.ROOT_QUOTA_NAME
            figures[name] = _as_child_of_the_tree_total(fig, tree.total) if is_profile_root else fig
            tree_of[name] = tree.root
    return Forest(figures, tree_of, totals.tree_nodes, {tree.root: tree.total for tree in totals.trees})


class ForestState:
    """``compute_forest`` kept between changes: ``update`` refreshes the trees for the quotas whose
    usage changed, touching only their paths to their roots (``scheduler.quota.incremental``)."""

    def __init__(
        self,
        index: QuotaIndex,
        usage: Mapping[str, Usage],
        totals: Totals,
        *,
        scale_min: bool = True,
        guarantee: bool = False,
    ) -> None:
        specs = {name: info.spec for name, info in index.quotas.items()}
        self._totals = totals
        self._trees = [
            TreeState(specs, usage, tree, scale_min=scale_min, guarantee=guarantee) for tree in totals.trees
        ]
        self._figures: dict[str, Figures] = {}
        self._tree_of: dict[str, str] = {}
        for state in self._trees:
            self._publish(state, state.figures)
            self._tree_of.update(dict.fromkeys(state.figures, state.tree.root))
        self.forest = self._forest()

    def _publish(self, state: TreeState, names: Iterable[str]) -> None:
        root, total = state.tree.root, state.tree.total
        for name in names:
            fig = state.figures[name]
            is_profile_root = name == root and name != quota_ext.ROOT_QUOTA_NAME
            self._figures[name] = _as_child_of_the_tree_total(fig, total) if is_profile_root else fig

    def _forest(self) -> Forest:
        totals = {tree.root: tree.total for tree in self._totals.trees}
        return Forest(dict(self._figures), self._tree_of, self._totals.tree_nodes, totals)

    def update(
        self, changed: Collection[str], usage: Mapping[str, Usage], specs: Mapping[str, QuotaSpec]
    ) -> Forest:
        """The usage of ``changed`` is now ``usage[name]``, the quotas of ``specs`` have that spec
        (and their usage in ``usage``); the other quotas are unchanged."""
        for state in self._trees:
            mine = [name for name in changed if name in state]
            respecced = {name: spec for name, spec in specs.items() if name in state}
            if mine or respecced:
                self._publish(state, state.update(mine, usage, respecced))
        self.forest = self._forest()
        return self.forest


def _as_child_of_the_tree_total(root: Figures, total: Resources) -> Figures:
    """A profile's root as Koordinator reports it: the only child of its tree's own root, which
    holds the tree's total; so its figures cover its max's resources and its runtime is what it
    asks for, up to the total (its children were given their shares of the whole total already)."""
    keys = list(root.max)

    def masked(amounts: Resources) -> dict[str, int]:
        return {k: amounts.get(k, 0) for k in keys}

    return replace(
        root,
        child_request=masked(root.child_request),
        request=masked(root.request),
        used=masked(root.used),
        non_preemptible_request=masked(root.non_preemptible_request),
        non_preemptible_used=masked(root.non_preemptible_used),
        runtime={k: min(root.request.get(k, 0), root.max[k], total.get(k, 0)) for k in keys},
    )
