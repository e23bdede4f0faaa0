"""Every quota's figures now, kept between cycles: rebuilt after a quota is added, removed or moved,
or a profile or node changes; after pod changes and changes of quotas' min, max, shared weight or
lending, refreshed along the changed quotas' paths to their roots (``ForestState``)."""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.elastic_quota.forest import (
    Forest,
    ForestState,
    NodeView,
    Totals,
    compute_forest,
    compute_totals,
)
from scheduler.plugins.elastic_quota.ledger import Ledger
from scheduler.plugins.elastic_quota.quotas import QuotaIndex, QuotaInfo
from scheduler.plugins.elastic_quota.writer import Payload, payload_of
from scheduler.quota import Figures, Usage

__all__ = ["FiguresCache", "payloads"]


class FiguresCache:
    def __init__(self, index: QuotaIndex, ledger: Ledger, *, scale_min: bool, guarantee: bool) -> None:
        self.index = index
        self.ledger = ledger
        self.scale_min = scale_min
        self.guarantee = guarantee
        self._nodes: tuple[int, list[NodeView]] | None = None
        self._forest: tuple[tuple[int, int, int, int], Forest] | None = None
        self.state: tuple[tuple[int, int], ForestState] | None = None
        """The kept trees, valid for one (quota index version, snapshot generation)."""
        self._totals: tuple[tuple[int, int], Totals] | None = None

    def current(self, snapshot: Snapshot) -> Forest:
        key = (self.index.version, self.index.spec_version, self.ledger.version, snapshot.generation)
        if self._forest is not None and self._forest[0] == key:
            return self._forest[1]
        changed = self.ledger.drain_changed()
        respecced, self.index.respecced = self.index.respecced, set()
        if self.state is not None and self.state[0] == (self.index.version, snapshot.generation):
            specs = {q: self.index.quotas[q].spec for q in respecced if q in self.index.quotas}
            usage = {q: self.ledger.usage_of(q) for q in changed | respecced}
            forest = self.state[1].update(changed, usage, specs)
        else:
            state = ForestState(
                self.index,
                self.ledger.usage(),
                self._totals_for(snapshot),
                scale_min=self.scale_min,
                guarantee=self.guarantee,
            )
            self.state = ((self.index.version, snapshot.generation), state)
            forest = state.forest
        self._forest = (key, forest)
        return forest

    def compute(self, usage: Mapping[str, Usage], snapshot: Snapshot) -> Forest:
        """The figures from scratch over ``usage`` (what-if computations of preemption)."""
        return compute_forest(
            self.index,
            usage,
            self._totals_for(snapshot),
            scale_min=self.scale_min,
            guarantee=self.guarantee,
        )

    def _totals_for(self, snapshot: Snapshot) -> Totals:
        key = (self.index.version, snapshot.generation)
        if self._totals is None or self._totals[0] != key:
            self._totals = (key, compute_totals(self.index, self._node_views(snapshot)))
        return self._totals[1]

    def _node_views(self, snapshot: Snapshot) -> list[NodeView]:
        if self._nodes is not None and self._nodes[0] == snapshot.generation:
            return self._nodes[1]
        table = snapshot.table
        views = []
        for row in snapshot.candidate_rows().tolist():
            values = table.allocatable[row]
            allocatable = {name: int(values[col]) for name, col in table.column.items() if values[col]}
            views.append(NodeView(table.names[row], snapshot.node_at(row).labels, allocatable))
        self._nodes = (snapshot.generation, views)
        return views


def payloads(
    figures: Mapping[str, Figures], quotas: Mapping[str, QuotaInfo], *, guarantee: bool
) -> list[tuple[Payload, Mapping[str, str]]]:
    """What to write on every quota object that exists, with what its annotations say now."""
    out = []
    for name, info in sorted(quotas.items()):
        got = figures.get(name)
        if info.exists and got is not None:
            out.append((payload_of(got, info.namespace, guarantee=guarantee), info.observed))
    return out
