"""Score's node ratings (Koordinator's ``deviceshare/scoring.go``): the card score of the scoring
strategy plus the NICs', or the Fragmentation strategy's 0..100 ratings across the nodes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.device_share.allocator import node_score
from scheduler.plugins.device_share.card_table import TableRows
from scheduler.plugins.device_share.cycle import Cycle, host_capacity, host_free, host_take, memoizable
from scheduler.plugins.device_share.cycle_allocator import CycleAllocator
from scheduler.plugins.device_share.fragmentation import CardRows, cards_of, moves_of
from scheduler.plugins.device_share.fragmentation_strategy import scaled
from scheduler.plugins.device_share.host_share import CardShares, FloatArray, stranded_delta
from scheduler.plugins.device_share.node_memo import NodeAnswers, ShapeCache
from scheduler.plugins.device_share.placements import Placements
from scheduler.plugins.device_share.rdma import Refusal, rdma_node_score, wanted
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.row_answers import node_scores

__all__ = ["NodeScorer"]


@dataclass(slots=True)
class _ScoreColumn:
    by_row: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Card row -> the card score."""
    synced: int = -1
    layout: int = -1


class NodeScorer:
    def __init__(self, allocator: CycleAllocator) -> None:
        self.allocator = allocator
        self.store = allocator.store
        self._scores: ShapeCache[_ScoreColumn] = ShapeCache(_ScoreColumn)
        """The card score per request shape and card row (MostAllocated / LeastAllocated)."""
        self.placements = Placements(allocator)

    def card_rows(self, snapshot: Snapshot, rows: IntArray) -> IntArray:
        """The card-table row of each node-table row (``card_table.CardTable.index``)."""
        table = snapshot.table
        return self.store.cards().index(table.names, table.layout)[rows]

    def scores(self, cycle: Cycle | None, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        scores = np.zeros(rows.size, dtype=np.int64)
        names = snapshot.table.names
        fragmentation = self.allocator.fragmentation
        if cycle is None:
            if not any(host_take(pod)):
                return scores
            cards = self.store.cards()
            # (No card in the cluster: the nodes' card rows are not looked up.)
            at = self.card_rows(snapshot, rows) if self.store.has_device else None
            if at is None or not cards.count[at].any():
                # No card on any of the nodes: none is stranded, and the Fragmentation strategy
                # rates every node alike.
                return scores if fragmentation is None else scaled(np.zeros(rows.size, dtype=np.float64))
            # A pod without GPUs still takes the cpu and memory the GPUs' pods need: rated by
            # the cards it would strand (FGD's rating of CPU-only tasks), 0..100.
            take = np.asarray(host_take(pod), dtype=np.int64)
            free = host_free(snapshot, rows)
            stranded = stranded_delta(self._card_shares(at), host_capacity(snapshot, rows), free, take)
            if fragmentation is None:
                # Nothing to tell the nodes apart (no GPU node, or none stranded): no score, as
                # Koordinator gives pods without devices.
                return scores if stranded.size == 0 or np.ptp(stranded) <= 1e-9 else scaled(stranded)
            return fragmentation.host_scores_of(TableRows(cards, at), free, host_take(pod), stranded, at)
        if fragmentation is not None and cycle.request is not None:
            return self._fragmentation_scores(cycle, pod, snapshot, rows)
        if memoizable(cycle):
            packed = self.score_column(cycle)[self.card_rows(snapshot, rows)]
            return self._less_stranding(packed, cycle, pod, snapshot, rows)
        allocator = self.allocator
        for i, row in enumerate(rows.tolist()):
            node = names[row]
            gpus = self.store.gpus(node)
            if gpus and cycle.request is not None:
                usage = allocator.gpu_usage(node, cycle)
                scores[i] = node_score(gpus, usage, cycle.request, allocator.card_order, allocator.weights)
            scores[i] += self.rdma_score(node, cycle)
        return self._less_stranding(scores, cycle, pod, snapshot, rows)

    def _stranded(
        self,
        request: GPURequest,
        pod: PodInfo,
        snapshot: Snapshot,
        rows: IntArray,
        free: IntArray | None = None,
    ) -> FloatArray:
        """(rows,) the cards the GPU pod's cpu and memory strand on each node beyond its cards'
        share (negative: the stranded cards it takes up), ``host_share.stranded_delta``; ``free``:
        ``host_free`` of the rows, when the caller has it."""
        taken = request.count * (1.0 if request.whole else min(request.core, 100) / 100)
        return stranded_delta(
            self.card_shares(snapshot, rows),
            host_capacity(snapshot, rows),
            host_free(snapshot, rows) if free is None else free,
            np.asarray(host_take(pod), dtype=np.int64),
            taken,
        )

    def _less_stranding(
        self, scores: IntArray, cycle: Cycle, pod: PodInfo, snapshot: Snapshot, rows: IntArray
    ) -> IntArray:
        """The card scores less 100 per card the pod's cpu and memory strand on the node (plus 100
        per stranded card it takes up), floored at 0."""
        if cycle.request is None or not any(host_take(pod)):
            return scores
        delta = self._stranded(cycle.request, pod, snapshot, rows)
        adjusted: IntArray = np.maximum(scores - np.rint(delta * 100).astype(np.int64), 0)
        return adjusted

    def _fragmentation_scores(
        self, cycle: Cycle, pod: PodInfo, snapshot: Snapshot, rows: IntArray
    ) -> IntArray:
        """Already 0..100 across the nodes (NICs are not rated under it)."""
        fragmentation, allocator = self.allocator.fragmentation, self.allocator
        assert fragmentation is not None
        assert cycle.request is not None
        card_rows: IntArray | None = None
        cards: CardRows
        if memoizable(cycle):
            at = card_rows = self.card_rows(snapshot, rows)
            cards = TableRows(self.store.cards(), at)  # where every card is a choice, none is read
            free_choice = self._any_card(cycle, snapshot, rows, at)
            if free_choice.all():
                fixed = np.zeros((rows.size, 1, cards.width, 3), dtype=np.int64)
                fixed_ok = np.zeros((rows.size, 1), dtype=np.bool_)
            else:
                fixed, fixed_ok = self.placements.moves(cycle, at, cards.width)
        else:
            names = snapshot.table.names
            nodes = [names[row] for row in rows.tolist()]
            any_card = [allocator.any_card(n, cycle) for n in nodes]
            cards = cards_of([(allocator.gpus(n, cycle), allocator.gpu_usage(n, cycle)) for n in nodes])
            fixed, fixed_ok = moves_of(
                cards,
                [
                    None if free else allocator.allocate(n, cycle)
                    for n, free in zip(nodes, any_card, strict=True)
                ],
            )
            free_choice = np.asarray(any_card, dtype=np.bool_)
        free = host_free(snapshot, rows)
        return fragmentation.scores_of(
            cycle.request,
            cards,
            fixed,
            fixed_ok,
            free_choice,
            free,
            host_take(pod),
            self._stranded(cycle.request, pod, snapshot, rows, free),
            card_rows,
        )

    def _any_card(self, cycle: Cycle, snapshot: Snapshot, rows: IntArray, at: IntArray) -> BoolArray:
        """``CycleAllocator.any_card`` of each row for a memoizable cycle (no hint, no partition
        spec): one card, on a node that does not give the request a partition."""
        request = cycle.request
        assert request is not None
        if request.count != 1:
            return np.zeros(rows.size, dtype=np.bool_)
        free_choice = np.ones(rows.size, dtype=np.bool_)
        if request.whole:
            names = snapshot.table.names
            for i in np.flatnonzero(self.store.cards().partitions[at]).tolist():
                free_choice[i] = not self.allocator.partitioned(names[int(rows[i])], cycle)
        return free_choice

    def _card_shares(self, at: IntArray) -> CardShares:
        """Card rows' card counts and free cards (``host_share.card_shares``)."""
        cards = self.store.cards()
        return cards.count[at].astype(np.float64), cards.free_cards[at]

    def card_shares(self, snapshot: Snapshot, rows: IntArray) -> CardShares:
        """The rows' card counts and free cards (``host_share.card_shares``)."""
        return self._card_shares(self.card_rows(snapshot, rows))

    def score_column(self, cycle: Cycle) -> IntArray:
        """Every card row's card score for the cycle's request shape (the memoizable cycles': no
        RDMA, nothing left out; 0 for a node without cards), scoring again only the nodes changed
        since the shape was last scored."""
        assert cycle.request is not None
        allocator, store, cards = self.allocator, self.store, self.store.cards()
        kept = self._scores.of(cycle.request)
        if kept.layout != cards.layout:
            kept.by_row = np.zeros(cards.count.shape, dtype=np.int64)
            kept.layout, kept.synced = cards.layout, -1
        changed = store.changed_since(kept.synced) if kept.synced >= 0 else None
        if changed is None:
            kept.by_row[:] = 0
            changed = set(store.has_device)
        if changed:
            rows = np.fromiter((cards.row[node] for node in changed), np.int64, len(changed))
            request, order = cycle.request, allocator.card_order
            kept.by_row[rows] = node_scores(cards, rows, request, order, allocator.weights)
        kept.synced = store.changes
        return kept.by_row

    def table(self, cycle: Cycle) -> NodeAnswers[int]:
        """``score_column`` by node, for the nodes with cards."""
        column, cards = self.score_column(cycle), self.store.cards()
        return NodeAnswers(
            {node: int(column[row]) for node, row in cards.row.items() if cards.count[row] > 0},
            self.store.changes,
        )

    def rdma_score(self, node: str, cycle: Cycle) -> int:
        """Koordinator adds each device type's node score."""
        ask = cycle.rdma
        if ask is None or (ask.secondary and self.store.secondary_well_planned(node)):
            return 0
        nics = self.store.rdmas(node)
        per_nic = wanted(ask.quantity, ask.hint, nics)
        if isinstance(per_nic, Refusal):
            return 0
        usage = self.allocator.rdma_usage(node, cycle)
        return rdma_node_score(nics, usage, per_nic[0], self.allocator.card_order, self.allocator.rdma_weight)
