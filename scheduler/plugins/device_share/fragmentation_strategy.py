"""The ``Fragmentation`` scoring strategy of DeviceShare (ours, in the spirit of FGD, ATC'23).

Nodes are scored by how little the pod's placement raises their GPU fragmentation for the recent
request mix (``fragmentation.py``); for a one-card request, every card that fits is a candidate
and the node's best card counts, and Reserve takes that card. Requests the allocator places by
topology (several cards, a required scope, partitions) are rated on the cards it chooses. The mix
is fed by the pods that ask DeviceShare for GPUs, each once (``request_mix.py``).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.framework.interfaces import MAX_NODE_SCORE
from scheduler.plugins.device_share.allocator import GPU, Allocation, GPUUsage, device_score, fits, take
from scheduler.plugins.device_share.args import FragmentationArgs
from scheduler.plugins.device_share.cluster_mix import ClusterMix
from scheduler.plugins.device_share.fragmentation import (
    BoolArray,
    CardRows,
    FloatArray,
    Int64Array,
    Shapes,
    cards_of,
    gemv_rows_alike,
    host_deltas,
    host_deltas_of_sums,
    moves_of,
    placement_deltas,
    reweighed,
    shapes_of,
    single_card_best,
    single_card_combine,
    single_card_deltas,
)
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.request_mix import RequestMix
from scheduler.plugins.device_share.shape_sums_memo import ShapeSumsMemo
from scheduler.plugins.device_share.single_card_memo import SingleCardMemo

__all__ = ["FragmentationStrategy", "NodeCards", "scaled"]

NodeCards = tuple[Sequence[GPU], Mapping[int, GPUUsage]]

_SEEN = 4096
_SHAPES_KEPT = 64
_COLUMNS_KEPT = 4

_MixShapes = tuple[dict[GPURequest, float], Shapes, list[GPURequest]]
"""A mix's weights, ``shapes_of`` them, and the shapes of positive weight in order."""


class FragmentationStrategy:
    def __init__(
        self,
        args: FragmentationArgs,
        memo: SingleCardMemo | None = None,
        sums: ShapeSumsMemo | None = None,
    ) -> None:
        self.memo = memo
        """One-card requests' parts kept per node (``single_card_memo``), for ``scores_of``."""
        self.sums = sums
        """The shapes' card sums kept per node (``shape_sums_memo``), for ``host_scores_of``."""
        self.cluster: ClusterMix | None = None
        """The cluster's pods (``mix: Cluster``), fed by the pod informer (handlers/mix.py)."""
        self.mix: RequestMix | ClusterMix
        if args.mix == "Cluster":
            self.mix = self.cluster = ClusterMix(args.max_shapes)
        else:
            self.mix = RequestMix(args.half_life_pods, args.max_shapes)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._shapes: dict[tuple[GPURequest | None, tuple[int, int] | None], _MixShapes] = {}
        self._shapes_version = -1
        self._columns: list[tuple[list[GPURequest], Shapes]] = []
        """The last few lists of shapes asked for and ``shapes_of`` a mix of them (``_reweighed``)."""

    def observe(self, uid: str, request: GPURequest, host: tuple[int, int] = (0, 0)) -> None:
        """A pod asks for ``request``: counted once however often it is retried (the last
        ``_SEEN`` pods are remembered). Pods that find no GPUs count too: were only the placed ones
        counted, the shapes that fail most (whole nodes) would fade from the mix, and the strategy
        would stop keeping room for them. With the cluster mix the pod is one of the cluster's
        (pending) until it is deleted, whether or not the informer has told of it yet."""
        if self.cluster is not None:
            self.cluster.add(uid, request, host)
            return
        if uid in self._seen:
            self._seen.move_to_end(uid)
            return
        self._seen[uid] = None
        if len(self._seen) > _SEEN:
            self._seen.popitem(last=False)
        assert isinstance(self.mix, RequestMix)
        self.mix.observe(request, host)

    def choose(
        self,
        gpus: Sequence[GPU],
        usage: Mapping[int, GPUUsage],
        request: GPURequest,
        card_row: int | None = None,
    ) -> list[Allocation] | None:
        """The card of a one-card request that raises the node's fragmentation least (then the
        fullest card, then the lowest minor), or None when no card fits. ``card_row``: the node's
        row in the store's card table when ``gpus`` and ``usage`` are its cards as the store holds
        them (the one-card parts are then taken from ``memo``, as Score took them)."""
        free = [g for g in gpus if fits(g, usage.get(g.minor, GPUUsage()), request)]
        if not free:
            return None
        _, shapes, kinds = self._mix_shapes(request, None)
        if self.memo is not None and card_row is not None and shapes.weight.size:
            rows = np.array([card_row], dtype=np.int64)
            deltas = single_card_combine(self.memo.parts(request, kinds, rows, len(gpus)), shapes)[0]
        else:
            deltas = single_card_deltas(cards_of([(gpus, usage)]), request, shapes)[0]
        delta = {g.minor: float(d) for g, d in zip(gpus, deltas.tolist(), strict=True)}

        def key(g: GPU) -> tuple[float, int, int]:
            packed = device_score(g, usage.get(g.minor, GPUUsage()), request, "MostAllocated")
            return round(delta[g.minor], 9), -packed, g.minor

        best = min(free, key=key)
        return [Allocation(best.minor, take(best, request))]

    def scores(
        self,
        request: GPURequest,
        nodes: Sequence[NodeCards],
        chosen: Sequence[Sequence[Allocation] | None],
        any_card: Sequence[bool],
        host_free: Int64Array | None = None,
        host_take: tuple[int, int] = (0, 0),
        stranded: FloatArray | None = None,
    ) -> IntArray:
        """0..100 per node: 100 for the smallest increase in fragmentation among the nodes, 0 for
        the largest and for nodes that cannot take the pod. ``any_card[n]``: any fitting card of
        node n may be taken (``chosen[n]`` is ignored), otherwise ``chosen[n]`` is the placement.
        ``host_free``: (N, 2) the nodes' free cpu and memory, of which the pod takes ``host_take``:
        a card whose node keeps too little for a shape's pods is fragmented for that shape.
        ``stranded``: (N,) the cards the pod's cpu and memory strand on each node by each card's
        share of its node (``host_share.stranded_delta``), added to the increase in fragmentation
        (both count cards): the mix's mean cpu per shape misses a node that keeps that mean free
        for one card while its other cards have none."""
        if not nodes:
            return np.zeros(0, dtype=np.int64)
        cards = cards_of(nodes)
        fixed, fixed_ok = moves_of(cards, chosen)
        free_choice = np.asarray(any_card, dtype=np.bool_)
        return self.scores_of(request, cards, fixed, fixed_ok, free_choice, host_free, host_take, stranded)

    def scores_of(
        self,
        request: GPURequest,
        cards: CardRows,
        fixed: Int64Array,
        fixed_ok: BoolArray,
        free_choice: BoolArray,
        host_free: Int64Array | None = None,
        host_take: tuple[int, int] = (0, 0),
        stranded: FloatArray | None = None,
        card_rows: IntArray | None = None,
    ) -> IntArray:
        """``scores`` of nodes given as arrays: ``cards`` (``cards_of``), the placements chosen
        (``fixed``, ``fixed_ok``: ``moves_of``) and ``free_choice`` (N,), ``any_card``;
        ``card_rows``: the nodes' rows in the store's card table when ``cards`` are those rows'
        cards as the store holds them (the one-card parts are then taken from ``memo``)."""
        count, width = cards.shape
        if not count:
            return np.zeros(0, dtype=np.int64)
        _, shapes, kinds = self._mix_shapes(request, host_take)
        take = np.asarray(host_take, dtype=np.int64)
        best = np.full(count, np.inf)
        if free_choice.any():
            host = None if host_free is None else host_free[free_choice]
            if (
                self.memo is not None
                and card_rows is not None
                and shapes.weight.size
                and gemv_rows_alike(width, shapes.weight.size)
            ):
                # Only each node's first card of each kind that fits is rated: a node's cards
                # are mostly alike (idle, or holding the same), and alike cards rate alike. Where
                # BLAS sums a row by where it sits in the block (OpenBLAS: C not a multiple of
                # four), every card is rated as before.
                picks = self.memo.picks(request, kinds, card_rows[free_choice], width)
                best[free_choice] = single_card_best(picks, shapes, host, take)
            else:
                if self.memo is not None and card_rows is not None and shapes.weight.size:
                    parts = self.memo.parts(request, kinds, card_rows[free_choice], width)
                    deltas = single_card_combine(parts, shapes, host, take)
                else:
                    deltas = single_card_deltas(cards.rows(free_choice), request, shapes, host, take)
                best[free_choice] = deltas.min(axis=1) if deltas.shape[1] else np.inf
        if (~free_choice).any():
            host = None if host_free is None else host_free[~free_choice]
            deltas = placement_deltas(
                cards.rows(~free_choice), fixed[~free_choice], fixed_ok[~free_choice], shapes, host, take
            )
            best[~free_choice] = deltas[:, 0]
        if stranded is not None:
            best = best + stranded
        return scaled(best)

    def host_scores(
        self,
        nodes: Sequence[NodeCards],
        host_free: Int64Array,
        host_take: tuple[int, int],
        stranded: FloatArray | None = None,
    ) -> IntArray:
        """0..100 per node for a pod that asks for no GPU but for ``host_take`` cpu and memory:
        100 where taking them strands the fewest cards of the mix (FGD rates CPU-only tasks the
        same way), 0 where the most; ``stranded`` as in ``scores``."""
        return self.host_scores_of(cards_of(nodes), host_free, host_take, stranded)

    def host_scores_of(
        self,
        cards: CardRows,
        host_free: Int64Array,
        host_take: tuple[int, int],
        stranded: FloatArray | None = None,
        card_rows: IntArray | None = None,
    ) -> IntArray:
        """``host_scores`` of nodes given as arrays (``cards_of``, or the card table's rows: read
        only where the shapes' card sums are not kept); ``card_rows`` as in ``scores_of`` (the
        shapes' card sums are then taken from ``sums``)."""
        count, width = cards.shape
        weights, shapes, kinds = self._mix_shapes(None, None)
        if not count or (stranded is None and not weights):
            return np.zeros(count, dtype=np.int64)
        deltas = np.zeros(count, dtype=np.float64)
        if weights:
            take = np.asarray(host_take, dtype=np.int64)
            if self.sums is not None and card_rows is not None and len(kinds) >= 2:
                sums = self.sums.sums(kinds, card_rows, width)
                deltas = host_deltas_of_sums(sums, shapes, host_free, take)
            else:
                deltas = host_deltas(cards.rows(np.ones(count, dtype=np.bool_)), shapes, host_free, take)
        if stranded is not None:
            deltas = deltas + stranded
        return scaled(deltas)

    def _mix_shapes(self, request: GPURequest | None, host_take: tuple[int, int] | None) -> _MixShapes:
        """The mix to score ``request`` against (None: the shapes seen, for a pod without GPUs,
        with their cpu and memory), with the shapes' cpu and memory unless ``host_take`` is None;
        kept while the mix is unchanged: a pod asks two or three times, and each answer sorts the
        mix and builds the shapes' arrays."""
        if self._shapes_version != self.mix.version or len(self._shapes) >= _SHAPES_KEPT:
            self._shapes.clear()
            self._shapes_version = self.mix.version
        kept = self._shapes.get((request, host_take))
        if kept is None:
            if request is None:
                weights = self.mix.weights_seen()
                kinds = _positive(weights)
                kept = (weights, self._reweighed(kinds, weights, _hosts(self.mix.hosts_of(kinds))), kinds)
            elif host_take is None:
                weights = self.mix.weights(request)
                kinds = _positive(weights)
                kept = (weights, self._reweighed(kinds, weights, np.zeros((len(kinds), 2), np.int64)), kinds)
            else:
                # Score asks with the pod's cpu and memory, Reserve without: the same shapes, but
                # for the cpu and memory of each.
                weights, shapes, kinds = self._mix_shapes(request, None)
                hosts = _hosts(self.mix.hosts_of(kinds, request, host_take))
                kept = (weights, dataclasses.replace(shapes, host=hosts), kinds)
            self._shapes[(request, host_take)] = kept
        return kept

    def _reweighed(
        self, kinds: list[GPURequest], weights: Mapping[GPURequest, float], host: Int64Array
    ) -> Shapes:
        """``shapes_of(weights)`` with ``host``; the per-shape columns are kept for the last few
        lists of shapes: each pod changes the mix's weights, rarely which shapes are the most
        common or their order."""
        for kept_kinds, like in self._columns:
            if kept_kinds == kinds:
                return reweighed(like, weights, host)
        like = shapes_of(weights)
        self._columns = [(kinds, like), *self._columns[: _COLUMNS_KEPT - 1]]
        return dataclasses.replace(like, host=host)


def _hosts(means: list[tuple[int, int]]) -> Int64Array:
    """``Shapes.host`` of the shapes' means (``hosts_of``)."""
    host: Int64Array = np.array(means, dtype=np.int64).reshape(len(means), 2)
    return host


def _positive(weights: Mapping[GPURequest, float]) -> list[GPURequest]:
    """The shapes of ``weights`` that ``shapes_of`` keeps, in its order."""
    return [shape for shape, weight in weights.items() if weight > 0]


def scaled(best: FloatArray) -> IntArray:
    """0..100: 100 for the smallest increase in fragmentation, 0 for the largest and where none."""
    scores = np.zeros(best.size, dtype=np.int64)
    possible = np.isfinite(best)
    if not possible.any():
        return scores
    low, high = float(best[possible].min()), float(best[possible].max())
    if high - low <= 1e-9:
        scores[possible] = MAX_NODE_SCORE
        return scores
    values = np.rint((high - best[possible]) * MAX_NODE_SCORE / (high - low))
    scores[possible] = values.astype(np.int64)
    return scores
