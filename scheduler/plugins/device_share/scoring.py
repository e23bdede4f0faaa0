"""Score's node ratings (Koordinator's ``deviceshare/scoring.go``): the card score of the scoring
strategy plus the NICs', or the Fragmentation strategy's 0..100 ratings across the nodes."""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.device_share.allocator import node_score
from scheduler.plugins.device_share.cycle import Cycle, host_capacity, host_free, host_take, memoizable
from scheduler.plugins.device_share.cycle_allocator import CycleAllocator
from scheduler.plugins.device_share.fragmentation_strategy import scaled
from scheduler.plugins.device_share.host_share import CardShares, FloatArray, card_shares, stranded_delta
from scheduler.plugins.device_share.node_memo import NodeAnswers, ShapeCache
from scheduler.plugins.device_share.rdma import Refusal, rdma_node_score, wanted
from scheduler.plugins.device_share.request import GPURequest

__all__ = ["NodeScorer"]


class NodeScorer:
    def __init__(self, allocator: CycleAllocator) -> None:
        self.allocator = allocator
        self.store = allocator.store
        self._scores: ShapeCache[NodeAnswers[int]] = ShapeCache(NodeAnswers)
        """The card score per request shape and node (MostAllocated / LeastAllocated)."""
        self._shares: NodeAnswers[tuple[int, float]] = NodeAnswers()
        """Each node's card count and free cards (``host_share.card_shares``)."""

    def scores(self, cycle: Cycle | None, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        scores = np.zeros(rows.size, dtype=np.int64)
        names = snapshot.table.names
        fragmentation = self.allocator.fragmentation
        if cycle is None:
            if not any(host_take(pod)):
                return scores
            # A pod without GPUs still takes the cpu and memory the GPUs' pods need: rated by
            # the cards it would strand (FGD's rating of CPU-only tasks), 0..100.
            take = np.asarray(host_take(pod), dtype=np.int64)
            free = host_free(snapshot, rows)
            stranded = stranded_delta(
                self.card_shares(snapshot, rows), host_capacity(snapshot, rows), free, take
            )
            if fragmentation is None:
                # Nothing to tell the nodes apart (no GPU node, or none stranded): no score, as
                # Koordinator gives pods without devices.
                return scores if stranded.size == 0 or np.ptp(stranded) <= 1e-9 else scaled(stranded)
            nodes = [names[row] for row in rows.tolist()]
            cards = [(self.store.gpus(n), self.store.usage(n)) for n in nodes]
            return fragmentation.host_scores(cards, free, host_take(pod), stranded)
        if fragmentation is not None and cycle.request is not None:
            return self._fragmentation_scores(cycle, pod, snapshot, rows)
        if memoizable(cycle):
            kept = self.table(cycle).by_node
            packed = np.fromiter((kept.get(names[row], 0) for row in rows.tolist()), np.int64, rows.size)
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

    def _stranded(self, request: GPURequest, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FloatArray:
        """(rows,) the cards the GPU pod's cpu and memory strand on each node beyond its cards'
        share (negative: the stranded cards it takes up), ``host_share.stranded_delta``."""
        taken = request.count * (1.0 if request.whole else min(request.core, 100) / 100)
        return stranded_delta(
            self.card_shares(snapshot, rows),
            host_capacity(snapshot, rows),
            host_free(snapshot, rows),
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
        names = snapshot.table.names
        nodes = [names[row] for row in rows.tolist()]
        any_card = [allocator.any_card(n, cycle) for n in nodes]
        return fragmentation.scores(
            cycle.request,
            [(allocator.gpus(n, cycle), allocator.gpu_usage(n, cycle)) for n in nodes],
            [None if free else allocator.allocate(n, cycle) for n, free in zip(nodes, any_card, strict=True)],
            any_card,
            host_free(snapshot, rows),
            host_take(pod),
            self._stranded(cycle.request, pod, snapshot, rows),
        )

    def card_shares(self, snapshot: Snapshot, rows: IntArray) -> CardShares:
        """The rows' card counts and free cards, asking again only the nodes changed since."""
        table = self._shares
        changed = self.store.changed_since(table.synced) if table.synced >= 0 else None
        if changed is None:
            table.by_node.clear()
            changed = set(self.store.has_device)
        for node in changed:
            gpus = self.store.gpus(node)
            if gpus:
                cards, free = card_shares([(gpus, self.store.usage(node))])
                table.by_node[node] = (int(cards[0]), float(free[0]))
            else:
                table.by_node.pop(node, None)
        table.synced = self.store.changes
        names, kept = snapshot.table.names, table.by_node
        pairs = [kept.get(names[row], (0, 0.0)) for row in rows.tolist()]
        return (
            np.fromiter((c for c, _ in pairs), np.float64, len(pairs)),
            np.fromiter((f for _, f in pairs), np.float64, len(pairs)),
        )

    def table(self, cycle: Cycle) -> NodeAnswers[int]:
        """Every node's card score for the cycle's request shape (the memoizable cycles': no RDMA,
        nothing left out), scoring again only the nodes changed since the shape was last scored."""
        assert cycle.request is not None
        allocator = self.allocator
        table = self._scores.of(cycle.request)
        changed = self.store.changed_since(table.synced) if table.synced >= 0 else None
        if changed is None:
            table.by_node.clear()
            changed = set(self.store.has_device)
        for node in changed:
            gpus = self.store.gpus(node)
            if gpus:
                usage = self.store.usage(node)
                table.by_node[node] = node_score(
                    gpus, usage, cycle.request, allocator.card_order, allocator.weights
                )
            else:
                table.by_node.pop(node, None)
        table.synced = self.store.changes
        return table

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
