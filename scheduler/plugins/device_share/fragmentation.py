"""GPU fragmentation of nodes for a mix of request shapes (FGD, Weng et al., ATC'23): pure logic.

A card's free share is what is left of its scarcest dimension (gpu-core, gpu-memory-ratio,
gpu-memory), 0..1 card. For one request shape, a node's fragmentation is the free share that
shape could not use: all of it when the node cannot hold the shape at all (fewer fitting cards
than it asks for, or, as in the paper, less free CPU or memory than the shape's pods take with
them), otherwise the free share of the cards the shape does not fit on (a whole-card shape fits
only idle cards). For a mix of shapes it is the popularity-weighted sum. A placement
is scored by the increase in fragmentation it causes; the smallest increase is best.

Everything is computed on padded arrays so that all candidate nodes, and all candidate cards of
each, are rated with a few numpy operations: ``(..., C, 3)`` capacity and usage of C cards in
the dimensions (core, ratio, memory), and a ``(..., C)`` mask of the real cards.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from scheduler.plugins.device_share.allocator import GPU, Allocation, GPUUsage
from scheduler.plugins.device_share.request import GPURequest

__all__ = [
    "CardPicks",
    "CardRows",
    "CardTerms",
    "Cards",
    "ShapeTerms",
    "Shapes",
    "SingleCardParts",
    "cards_of",
    "fragmentation",
    "free_share",
    "gemv_rows_alike",
    "host_deltas",
    "host_deltas_of_sums",
    "host_fits",
    "moves_of",
    "placement_deltas",
    "reweighed",
    "rows_alike",
    "shape_hosts",
    "shape_sums",
    "shape_terms",
    "shape_terms_sums",
    "shapes_of",
    "single_card_best",
    "single_card_combine",
    "single_card_deltas",
    "single_card_parts",
    "single_card_sums",
    "single_card_terms",
]

Int64Array = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_CORE, _RATIO, _MEMORY = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Cards:
    """The cards of N nodes, padded to the largest card count C."""

    capacity: Int64Array
    """(N, C, 3): core, ratio, memory of each card (0 for padding)."""
    used: Int64Array
    """(N, C, 3): what pods hold on each card."""
    valid: BoolArray
    """(N, C): a real card (not padding)."""
    minors: Int64Array
    """(N, C): the card's minor (-1 for padding)."""

    @property
    def shape(self) -> tuple[int, int]:
        """(N, C)."""
        return int(self.valid.shape[0]), int(self.valid.shape[1])

    def rows(self, mask: BoolArray) -> Cards:
        """The nodes where ``mask`` (N,) is set."""
        return Cards(self.capacity[mask], self.used[mask], self.valid[mask], self.minors[mask])


class CardRows(Protocol):
    """The cards of N nodes, padded to C cards, that may be gathered only when read: ``Cards``,
    or the card table's rows (``card_table.TableRows``)."""

    @property
    def shape(self) -> tuple[int, int]:
        """(N, C)."""
        ...

    def rows(self, mask: BoolArray) -> Cards:
        """The nodes where ``mask`` (N,) is set, padded to C cards."""
        ...


def cards_of(nodes: Sequence[tuple[Sequence[GPU], Mapping[int, GPUUsage]]]) -> Cards:
    """Arrays of the nodes' cards and usage, in the order given."""
    width = max((len(gpus) for gpus, _ in nodes), default=0)
    pad = (0, 0, 0)
    capacity: list[list[tuple[int, int, int]]] = []
    used: list[list[tuple[int, int, int]]] = []
    minors: list[list[int]] = []
    for gpus, usage in nodes:
        blank = width - len(gpus)
        capacity.append([(g.core, g.ratio, g.memory) for g in gpus] + [pad] * blank)
        held = [usage.get(g.minor) for g in gpus]
        used.append([(u.core, u.ratio, u.memory) if u else pad for u in held] + [pad] * blank)
        minors.append([g.minor for g in gpus] + [-1] * blank)
    shape = (len(nodes), width, 3)
    minor_array = np.array(minors, dtype=np.int64).reshape(shape[:2])
    return Cards(
        np.array(capacity, dtype=np.int64).reshape(shape),
        np.array(used, dtype=np.int64).reshape(shape),
        minor_array >= 0,
        minor_array,
    )


@dataclass(frozen=True, slots=True)
class Shapes:
    """K request shapes and their popularity (summing to 1)."""

    count: Int64Array
    core: Int64Array
    ratio: Int64Array
    """Per-card gpu-memory-ratio, -1 where the shape asks for bytes."""
    memory: Int64Array
    """Per-card gpu-memory bytes, -1 where the shape asks for a ratio."""
    whole: BoolArray
    weight: FloatArray
    host: Int64Array
    """(K, 2): the cpu (milli) and memory (bytes) of the node that a pod of each shape takes
    besides its cards (0 where unknown: the node's CPU and memory are then not looked at)."""


def shapes_of(
    mix: Mapping[GPURequest, float], host: Mapping[GPURequest, tuple[int, int]] | None = None
) -> Shapes:
    """The shapes of a mix (request -> popularity, any positive scale); ``host``: the cpu and
    memory a pod of each shape asks of its node."""
    items = [(r, w) for r, w in mix.items() if w > 0]
    total = sum(w for _, w in items) or 1.0
    needs = host or {}
    return Shapes(
        count=np.array([r.count for r, _ in items], dtype=np.int64),
        core=np.array([r.core for r, _ in items], dtype=np.int64),
        ratio=np.array([-1 if r.ratio is None else r.ratio for r, _ in items], dtype=np.int64),
        memory=np.array([-1 if r.memory is None else r.memory for r, _ in items], dtype=np.int64),
        whole=np.array([r.whole for r, _ in items], dtype=np.bool_),
        weight=np.array([w / total for _, w in items], dtype=np.float64),
        host=shape_hosts([r for r, _ in items], needs),
    )


def reweighed(like: Shapes, mix: Mapping[GPURequest, float], host: Int64Array) -> Shapes:
    """``shapes_of(mix)`` with ``host`` where ``like`` is ``shapes_of`` a mix of the same positive
    shapes in the same order: its per-shape columns are shared, only the weights are new (the same
    quotients: numpy divides as Python does, correctly rounded)."""
    weights = [w for w in mix.values() if w > 0]
    total = sum(weights) or 1.0
    weight: FloatArray = np.array(weights, dtype=np.float64) / total
    return dataclasses.replace(like, weight=weight, host=host)


def shape_hosts(shapes: Sequence[GPURequest], host: Mapping[GPURequest, tuple[int, int]]) -> Int64Array:
    """``Shapes.host`` of ``shapes`` (in order) from the cpu and memory a pod of each asks."""
    hosts: Int64Array = np.array([host.get(r, (0, 0)) for r in shapes], dtype=np.int64).reshape(
        len(shapes), 2
    )
    return hosts


def host_fits(host_free: Int64Array | None, shapes: Shapes) -> BoolArray | None:
    """(..., K): whether each node's free cpu and memory (``host_free``: (..., 2)) hold a pod of
    each shape; None when the nodes' cpu and memory are not looked at."""
    if host_free is None:
        return None
    # cpu and memory compared apart: ``np.all`` over an axis of two costs ~10x more.
    fit: BoolArray = (host_free[..., 0, None] >= shapes.host[:, 0]) & (
        host_free[..., 1, None] >= shapes.host[:, 1]
    )
    return fit


def _want(capacity: Int64Array, shapes: Shapes) -> Int64Array:
    """(..., C, K, 3): what each shape takes on each card (``take`` of the allocator, vectorised)."""
    cap = capacity[..., None, :]  # (..., C, 1, 3)
    ratio, memory = _shared_want(capacity, shapes)
    core = np.broadcast_to(shapes.core, ratio.shape)
    shared = np.stack([core, ratio, memory], axis=-1)
    whole = np.broadcast_to(cap, shared.shape)
    result: Int64Array = np.where(shapes.whole[:, None], whole, shared)
    return result


def free_share(capacity: Int64Array, used: Int64Array, valid: BoolArray) -> FloatArray:
    """(..., C): the free share of each card's scarcest dimension, 0..1."""
    free = np.divide(
        (capacity - used).astype(np.float64),
        capacity,
        out=np.ones(np.broadcast_shapes(capacity.shape, used.shape), dtype=np.float64),
        where=capacity > 0,
    )
    share: FloatArray = np.where(valid, np.clip(free.min(axis=-1), 0.0, 1.0), 0.0)
    return share


SharedWant = tuple[Int64Array, Int64Array]
"""(..., C, K) gpu-memory-ratio and gpu-memory each shared shape takes on each card (its gpu-core
is the shape's own)."""


def _shared_want(capacity: Int64Array, shapes: Shapes) -> SharedWant:
    """``_want`` of the shared shapes, in the two dimensions that depend on the card."""
    card_memory = capacity[..., None, _MEMORY]  # (..., C, 1)
    safe_memory = np.maximum(card_memory, 1)
    ratio_from_bytes = -(-np.maximum(shapes.memory, 0) * 100 // safe_memory)
    ratio = np.where(shapes.ratio >= 0, shapes.ratio, np.where(card_memory > 0, ratio_from_bytes, 100))
    memory = np.where(shapes.memory >= 0, shapes.memory, np.maximum(shapes.ratio, 0) * card_memory // 100)
    return ratio, memory


def _fits(
    capacity: Int64Array, used: Int64Array, valid: BoolArray, shapes: Shapes, want: SharedWant | None = None
) -> BoolArray:
    """(..., C, K): whether each card can give each shape its per-card share (``want``:
    ``_shared_want`` of the same capacity, when the caller has it). Compared per dimension with
    what is free on the card (integers: the same answer as ``used + want <= capacity``) so that no
    (..., C, K, 3) array is made: on a thousand nodes with a mix of 30 shapes that array dominated
    the cost of scoring a pod."""
    ratio, memory = _shared_want(capacity, shapes) if want is None else want
    free = capacity - used
    idle = (used[..., _CORE] <= 0) & (used[..., _RATIO] <= 0) & (used[..., _MEMORY] <= 0)
    shared_fit = (
        (shapes.core <= free[..., _CORE, None])
        & (ratio <= free[..., _RATIO, None])
        & (memory <= free[..., _MEMORY, None])
    )
    fit: BoolArray = np.where(shapes.whole, idle[..., None], shared_fit) & valid[..., None]
    return fit


def _over_cards(values: FloatArray) -> FloatArray:
    """(..., K): ``values`` (..., C, K) summed over the cards, in card order. numpy's own sum
    adds in that order for two shapes or more but pairwise for one, so the sums of a shape would
    round differently depending on the shapes computed beside it (the kept parts add a new shape's
    columns alone) and on the padding."""
    if values.shape[-2] == 0:
        return np.zeros(values.shape[:-2] + values.shape[-1:], dtype=np.float64)
    total: FloatArray = values[..., 0, :].copy()
    for card in range(1, values.shape[-2]):
        total += values[..., card, :]
    return total


def _combine(
    holds: BoolArray,
    stranded: FloatArray,
    total: FloatArray,
    shapes: Shapes,
    host_ok: BoolArray | None = None,
) -> FloatArray:
    """Per-shape fragmentation (all the free share where the node cannot hold the shape: not
    ``holds``, enough cards fitting it, or, with ``host_ok``, too little cpu or memory), mixed."""
    if host_ok is not None:
        holds = holds & host_ok
    per_shape = np.where(holds, stranded, total[..., None])
    result: FloatArray = per_shape @ shapes.weight
    return result


def fragmentation(
    capacity: Int64Array,
    used: Int64Array,
    valid: BoolArray,
    shapes: Shapes,
    host_free: Int64Array | None = None,
) -> FloatArray:
    """(...): each node's expected unallocatable free share (in cards) for the shapes' mix
    (``host_free``: (..., 2), the nodes' free cpu and memory)."""
    if shapes.weight.size == 0:
        return np.zeros(valid.shape[:-1], dtype=np.float64)
    fitting, stranded, total = shape_sums(capacity, used, valid, shapes)
    return _combine(fitting >= shapes.count, stranded, total, shapes, host_fits(host_free, shapes))


@dataclass(frozen=True, slots=True)
class ShapeTerms:
    """What each card brings to ``shape_sums``, from its own capacity and use alone."""

    free: FloatArray
    """(..., C): the card's free share."""
    fit: BoolArray
    """(..., C, K): the card fits each shape."""
    held: FloatArray
    """(..., C, K): its free share where it does not fit the shape (0 where it does)."""


def shape_terms(capacity: Int64Array, used: Int64Array, valid: BoolArray, shapes: Shapes) -> ShapeTerms:
    """``ShapeTerms`` of the cards, card by card."""
    free = free_share(capacity, used, valid)  # (..., C)
    fit = _fits(capacity, used, valid, shapes)  # (..., C, K)
    return ShapeTerms(free, fit, free[..., None] * ~fit)


def shape_sums(
    capacity: Int64Array, used: Int64Array, valid: BoolArray, shapes: Shapes
) -> tuple[Int64Array, FloatArray, FloatArray]:
    """(..., K) the cards that fit each shape, (..., K) the free share of those that do not, and
    (...) the free share of all: what ``fragmentation`` mixes, before the nodes' cpu and memory."""
    return shape_terms_sums(shape_terms(capacity, used, valid, shapes))


def shape_terms_sums(terms: ShapeTerms) -> tuple[Int64Array, FloatArray, FloatArray]:
    """``shape_sums`` of nodes from their cards' ``terms``, summed over each node's cards in card
    order."""
    return terms.fit.sum(axis=-2), _over_cards(terms.held), terms.free.sum(axis=-1)


@functools.lru_cache(maxsize=256)
def _alone(request: GPURequest) -> Shapes:
    """``shapes_of`` the request alone, kept: the kept one-card parts of a few nodes are brought
    up to date for every pod, and building the arrays cost as much as the rest for a node or two."""
    return shapes_of({request: 1.0})


def _single_card_want(cards: Cards, request: GPURequest) -> tuple[Int64Array, BoolArray]:
    """(N, C, 3) what the request takes on each card, and (N, C) whether that card fits it."""
    want = _want(cards.capacity, _alone(request))[..., 0, :]
    if request.whole:
        fits = np.all(cards.used <= 0, axis=-1)
    else:
        fits = np.all(cards.used + want <= cards.capacity, axis=-1)
    return want, fits & cards.valid


@dataclass(frozen=True, slots=True)
class SingleCardParts:
    """What ``single_card_deltas`` computes from the nodes' cards, the request and the shapes'
    card-side needs alone (neither the shapes' weights nor the nodes' cpu and memory): per node n,
    card c and shape k. Each shape's entries depend on that shape only, each node's on that node
    only, so parts computed for some nodes or shapes can be kept and put together again."""

    ok: BoolArray
    """(N, C): the request fits card c."""
    free: FloatArray
    """(N, C): each card's free share now."""
    free_after: FloatArray
    """(N, C): card c's free share with the request on it."""
    holds: BoolArray
    """(N, K): enough cards fit each shape now (as many as it asks for)."""
    stranded: FloatArray
    """(N, K): the free share of the cards that do not fit each shape now."""
    holds_c: BoolArray
    """(N, C, K): ``holds`` with the request on card c."""
    stranded_c: FloatArray
    """(N, C, K): ``stranded`` with the request on card c."""


@dataclass(frozen=True, slots=True)
class CardTerms:
    """What each card brings to a one-card request's ``SingleCardParts``, from its own capacity
    and use alone (``single_card_terms``): (N, C) and (N, C, K), summed over a node's cards by
    ``single_card_sums``. Cards alike in capacity and use have the same terms."""

    ok: BoolArray
    """(N, C): the request fits card c."""
    free: FloatArray
    """(N, C): the card's free share now."""
    free_after: FloatArray
    """(N, C): its free share with the request on it."""
    fit: BoolArray
    """(N, C, K): the card fits each shape now."""
    fit_after: BoolArray
    """(N, C, K): it fits each shape with the request on it."""
    held: FloatArray
    """(N, C, K): its free share where it does not fit the shape now (0 where it does)."""
    held_after: FloatArray
    """(N, C, K): the same with the request on it."""


def single_card_terms(cards: Cards, request: GPURequest, shapes: Shapes) -> CardTerms:
    """``CardTerms`` of ``cards`` for ``request`` and ``shapes``' card-side needs, card by card."""
    want, ok = _single_card_want(cards, request)
    # Each card as it is and with the request on it, side by side (2, N, C, ...): the same
    # arithmetic element by element in half the numpy calls (a few nodes are brought up to date
    # per pod, where each call's cost is mostly its own).
    used = np.stack([cards.used, cards.used + want])
    free, free_after = free_share(cards.capacity, used, cards.valid)  # (N, C): card c after the move
    shape_want = _shared_want(cards.capacity, shapes)
    fit, fit_after = _fits(cards.capacity, used, cards.valid, shapes, shape_want)  # (N, C, K)
    return CardTerms(
        ok, free, free_after, fit, fit_after, free[..., None] * ~fit, free_after[..., None] * ~fit_after
    )


def single_card_sums(terms: CardTerms, shapes: Shapes) -> SingleCardParts:
    """``SingleCardParts`` of nodes from their cards' ``terms``, summed over each node's cards in
    card order."""
    fitting, stranded = terms.fit.sum(axis=-2), _over_cards(terms.held)  # (N, K)
    holds_c = fitting[:, None, :] - terms.fit + terms.fit_after >= shapes.count
    stranded_c = stranded[:, None, :] - terms.held + terms.held_after
    return SingleCardParts(
        terms.ok, terms.free, terms.free_after, fitting >= shapes.count, stranded, holds_c, stranded_c
    )


def single_card_parts(cards: Cards, request: GPURequest, shapes: Shapes) -> SingleCardParts:
    return single_card_sums(single_card_terms(cards, request, shapes), shapes)


def single_card_combine(
    parts: SingleCardParts,
    shapes: Shapes,
    host_free: Int64Array | None = None,
    host_take: Int64Array | None = None,
) -> FloatArray:
    """``single_card_deltas`` from its parts: the shapes' weights and the nodes' cpu and memory
    brought in."""
    # The sum over the cards of a node is taken here, not kept in the parts: numpy's sum along a
    # row depends on the row's length (the padding to the most cards among the nodes scored).
    total = parts.free.sum(axis=-1)  # (N,)
    before = _combine(parts.holds, parts.stranded, total, shapes, host_fits(host_free, shapes))
    total_c = total[:, None] - parts.free + parts.free_after
    left = None if host_free is None else host_free - (0 if host_take is None else host_take)
    host_after = host_fits(left, shapes)
    after = _combine(
        parts.holds_c,
        parts.stranded_c,
        total_c,
        shapes,
        None if host_after is None else host_after[:, None, :],
    )
    deltas: FloatArray = np.where(parts.ok, after - before[:, None], np.inf)
    return deltas


@dataclass(frozen=True, slots=True)
class CardPicks:
    """``SingleCardParts`` of N nodes with the card-side parts of some of their cards only, one
    row per card picked (M): enough for the best card of each node (``single_card_best``)."""

    node: Int64Array
    """(M,): the node (0..N-1) of each card picked, ascending."""
    block: int
    """C, of which M is a multiple: the rows are mixed ``block`` at a time (``_mixed``)."""
    free: FloatArray
    """(M,): the card's free share now."""
    free_after: FloatArray
    """(M,): its free share with the request on it."""
    holds_c: BoolArray
    """(M, K): ``SingleCardParts.holds_c`` of the card."""
    stranded_c: FloatArray
    """(M, K): ``SingleCardParts.stranded_c`` of the card."""
    node_free: FloatArray
    """(N, C): every card's free share (``SingleCardParts.free``), summed over the node's cards."""
    holds: BoolArray
    """(N, K)."""
    stranded: FloatArray
    """(N, K)."""


def _mixed(per_shape: FloatArray, weight: FloatArray, block: int) -> FloatArray:
    """(M,): ``per_shape`` (M, K) @ ``weight``, ``block`` rows at a time as ``_combine`` mixes
    a node's C = ``block`` cards: numpy hands each (C, K) block to BLAS's gemv, whose sum along a
    row may depend on how many rows it is given (OpenBLAS sums rows past the last multiple of four
    another way), so the rows are given in blocks of the same size."""
    rows, shapes = per_shape.shape
    mixed: FloatArray = (per_shape.reshape(rows // block, block, shapes) @ weight).reshape(rows)
    return mixed


Matmul = Callable[[FloatArray, FloatArray], FloatArray]


@functools.cache
def gemv_rows_alike(block: int, shapes: int) -> bool:
    """Whether this process's BLAS gives each row of a (``block``, ``shapes``) @ (``shapes``,)
    product the same bits wherever the row sits in the block (what ``single_card_best`` needs to
    equal ``single_card_combine``): OpenBLAS's gemv does when ``block`` is a multiple of four, and
    sums rows past the last multiple of four another way. Checked once per size, so that another
    BLAS or CPU kernel only loses the shortcut (``rows_alike``)."""
    return rows_alike(block, shapes, np.matmul)


def rows_alike(block: int, shapes: int, matmul: Matmul) -> bool:
    """Whether ``matmul`` of stacked (``block``, ``shapes``) blocks by a vector gives each row the
    same bits at every place in the block, on random values moved to every place (summing in
    another order changes the last bit of nearly every such row)."""
    rng = np.random.default_rng(block * 1_000 + shapes)
    values = rng.random((4, block, shapes))
    weight = rng.random(shapes)
    mixed = matmul(values, weight)
    for shift in range(1, block):
        moved = matmul(np.roll(values, shift, axis=1), weight)
        if moved.tobytes() != np.roll(mixed, shift, axis=1).tobytes():
            return False
    return True


def single_card_best(
    picks: CardPicks,
    shapes: Shapes,
    host_free: Int64Array | None = None,
    host_take: Int64Array | None = None,
) -> FloatArray:
    """(N,): the least of ``single_card_deltas`` over each node's cards picked (inf for a node
    with none): ``single_card_combine``'s arithmetic on the picked cards only, to the same values
    where ``gemv_rows_alike`` (C, K)."""
    count = picks.node_free.shape[0]
    best = np.full(count, np.inf)
    total = picks.node_free.sum(axis=-1)  # (N,): as single_card_combine sums it
    if not picks.node.size:
        return best
    before = _combine(picks.holds, picks.stranded, total, shapes, host_fits(host_free, shapes))
    total_c = total[picks.node] - picks.free + picks.free_after
    left = None if host_free is None else host_free - (0 if host_take is None else host_take)
    host_after = host_fits(left, shapes)
    holds_c = picks.holds_c if host_after is None else picks.holds_c & host_after[picks.node]
    per_shape = np.where(holds_c, picks.stranded_c, total_c[:, None])
    deltas = _mixed(per_shape, shapes.weight, picks.block) - before[picks.node]
    starts = np.flatnonzero(np.concatenate([[True], picks.node[1:] != picks.node[:-1]]))
    best[picks.node[starts]] = np.minimum.reduceat(deltas, starts)
    return best


def single_card_deltas(
    cards: Cards,
    request: GPURequest,
    shapes: Shapes,
    host_free: Int64Array | None = None,
    host_take: Int64Array | None = None,
) -> FloatArray:
    """(N, C): the increase in each node's fragmentation were the one-card request put on card c
    (inf where it does not fit). Only card c changes, so the node's per-shape sums are updated
    for it alone: O(N C K) instead of recomputing every card for every candidate. With
    ``host_free`` ((N, 2) free cpu and memory) the pod's own ``host_take`` (2,) leaves the node."""
    if shapes.weight.size == 0:
        _, ok = _single_card_want(cards, request)
        return np.where(ok, 0.0, np.inf)
    return single_card_combine(single_card_parts(cards, request, shapes), shapes, host_free, host_take)


def moves_of(
    cards: Cards, allocations: Sequence[Sequence[Allocation] | None]
) -> tuple[Int64Array, BoolArray]:
    """One candidate per node from allocations already chosen: ``(N, 1, C, 3)`` and ``(N, 1)``."""
    moves = np.zeros((*cards.used.shape[:1], 1, *cards.used.shape[1:]), dtype=np.int64)
    ok = np.zeros((cards.used.shape[0], 1), dtype=np.bool_)
    for n, chosen in enumerate(allocations):
        if chosen is None:
            continue
        position = {int(m): c for c, m in enumerate(cards.minors[n].tolist()) if m >= 0}
        if any(a.minor not in position for a in chosen):
            continue
        for a in chosen:
            moves[n, 0, position[a.minor]] = (a.usage.core, a.usage.ratio, a.usage.memory)
        ok[n, 0] = True
    return moves, ok


def placement_deltas(
    cards: Cards,
    moves: Int64Array,
    ok: BoolArray,
    shapes: Shapes,
    host_free: Int64Array | None = None,
    host_take: Int64Array | None = None,
) -> FloatArray:
    """(N, J): the increase in each node's fragmentation were candidate j placed (inf where the
    candidate is not possible); ``host_free`` and ``host_take`` as in ``single_card_deltas``."""
    before = fragmentation(cards.capacity, cards.used, cards.valid, shapes, host_free)  # (N,)
    used = cards.used[:, None] + moves  # (N, J, C, 3)
    capacity = np.broadcast_to(cards.capacity[:, None], used.shape)
    valid = np.broadcast_to(cards.valid[:, None], used.shape[:-1])
    left = None if host_free is None else (host_free - (0 if host_take is None else host_take))[:, None, :]
    after = fragmentation(capacity, used, valid, shapes, left)  # (N, J)
    deltas: FloatArray = np.where(ok, after - before[:, None], np.inf)
    return deltas


def host_deltas(
    cards: Cards,
    shapes: Shapes,
    host_free: Int64Array,
    host_take: Int64Array,
    sums: tuple[Int64Array, FloatArray, FloatArray] | None = None,
) -> FloatArray:
    """(N,): the increase in each node's fragmentation were a pod that asks for no card but for
    ``host_take`` (2,) cpu and memory put there: the cards it strands (FGD's rating of CPU-only
    tasks). ``sums``: ``shape_sums`` of the cards, when the caller has them."""
    if shapes.weight.size == 0:
        return np.zeros(cards.valid.shape[:-1], dtype=np.float64)
    # The cards are the same before and after: only the nodes' cpu and memory differ.
    if sums is None:
        sums = shape_sums(cards.capacity, cards.used, cards.valid, shapes)
    return host_deltas_of_sums(sums, shapes, host_free, host_take)


def host_deltas_of_sums(
    sums: tuple[Int64Array, FloatArray, FloatArray],
    shapes: Shapes,
    host_free: Int64Array,
    host_take: Int64Array,
) -> FloatArray:
    """``host_deltas`` of nodes given by their ``shape_sums`` alone (K: one shape at least)."""
    fitting, stranded, total = sums
    holds = fitting >= shapes.count
    before = _combine(holds, stranded, total, shapes, host_fits(host_free, shapes))
    after = _combine(holds, stranded, total, shapes, host_fits(host_free - host_take, shapes))
    deltas: FloatArray = after - before
    return deltas
