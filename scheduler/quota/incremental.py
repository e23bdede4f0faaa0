"""One quota tree kept between changes: a change of some quotas' usage touches only their paths to
the root (Koordinator v1.4's incremental quota-tree updates).

``TreeState`` computes a tree once as ``compute_tree`` does, then ``update(changed, usage, specs)``
(quotas whose usage, or whose min, max, shared weight or lending, changed):

1. bottom-up, re-aggregates the changed quotas and their ancestors only (request, used,
   non-preemptible figures, and allocated / guaranteed under the guarantee gate);
2. top-down, re-shares the runtime among the children of those ancestors, and further down only
   below a child whose runtime (or scaled min) changed by that.

Everything else keeps its figures. The result is the one ``compute_tree`` gives on the same inputs
(``tests/scheduler/quota/test_incremental.py`` checks it on random trees and random changes).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from scheduler.quota.tree import (
    Figures,
    QuotaSpec,
    TreeInput,
    Usage,
    _aggregate,
    _figures,
    _guarantee,
    _linked,
    _Node,
    _share_among_children,
)

__all__ = ["TreeState"]


class TreeState:
    """The figures of one tree (``figures``), kept up to date by ``update``."""

    def __init__(
        self,
        quotas: Mapping[str, QuotaSpec],
        usage: Mapping[str, Usage],
        tree: TreeInput,
        *,
        scale_min: bool = True,
        guarantee: bool = False,
    ) -> None:
        self.tree = tree
        self.scale_min = scale_min
        self.guarantee = guarantee
        self.figures: dict[str, Figures] = {}
        self._nodes: dict[str, _Node] = {}
        self._rank: dict[str, int] = {}
        """Preorder position: a parent comes before its children."""
        if tree.root not in quotas:
            return
        nodes, order = _linked(quotas, tree.root)
        self._nodes = {name: nodes[name] for name in order}
        self._rank = {name: i for i, name in enumerate(order)}
        for name in reversed(order):
            self._aggregate(name, usage.get(name, Usage()))
        self._root_runtime()
        for name in order:
            _share_among_children(self._nodes[name], self._nodes, tree, scale_min, guarantee)
        self.figures = {name: _figures(self._nodes[name]) for name in order}

    def __contains__(self, name: str) -> bool:
        return name in self._nodes

    def _aggregate(self, name: str, usage: Usage) -> None:
        node = self._nodes[name]
        _aggregate(node, self._nodes, usage, self.tree, name == self.tree.root)
        if self.guarantee and name != self.tree.root:
            _guarantee(node, self._nodes)

    def _root_runtime(self) -> None:
        root = self._nodes[self.tree.root]
        outside = [self._nodes[c] for c in root.children if c in self.tree.outside]
        names = dict.fromkeys([*self.tree.total, *root.spec.max])
        root.runtime = {n: self.tree.total.get(n, 0) - sum(o.used.get(n, 0) for o in outside) for n in names}
        root.auto_scale_min = dict(root.spec.min)

    def update(
        self, changed: Iterable[str], usage: Mapping[str, Usage], specs: Mapping[str, QuotaSpec] | None = None
    ) -> set[str]:
        """The usage of ``changed`` quotas is now ``usage[name]``, and the quotas of ``specs`` have
        that spec now (same parent; their usage must be in ``usage`` too): refresh what depends on
        them; returns the quotas whose figures were recomputed."""
        for name, spec in (specs or {}).items():
            if name in self._nodes:
                self._nodes[name].spec = spec
        path: set[str] = set()
        for name in [*changed, *(specs or {})]:
            while name in self._nodes and name not in path:
                path.add(name)
                name = self._nodes[name].spec.parent
        if not path:
            return set()
        for name in sorted(path, key=self._rank.__getitem__, reverse=True):
            self._aggregate(name, usage.get(name, Usage()))
        self._root_runtime()
        touched = set(path)
        queue = [(self._rank[name], name) for name in path if self._nodes[name].children]
        heapq.heapify(queue)
        queued = {name for _, name in queue}
        while queue:
            _, name = heapq.heappop(queue)
            node = self._nodes[name]
            before = {
                c: (dict(self._nodes[c].runtime), dict(self._nodes[c].auto_scale_min)) for c in node.children
            }
            _share_among_children(node, self._nodes, self.tree, self.scale_min, self.guarantee)
            for child in node.children:
                after = self._nodes[child]
                if (after.runtime, after.auto_scale_min) == before[child]:
                    continue
                touched.add(child)
                if after.children and child not in queued:
                    queued.add(child)
                    heapq.heappush(queue, (self._rank[child], child))
        for name in touched:
            self.figures[name] = _figures(self._nodes[name])
        return touched
