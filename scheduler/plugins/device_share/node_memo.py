"""What the nodes' cards answered for one request shape, kept while the nodes do not change.

DeviceShare's PreFilter asks every node with a Device whether its cards hold the pod's request,
and Score rates the cards of each candidate: on a GPU cluster of a thousand nodes that is a
thousand allocator runs per pod, while a pod's placement changes the cards of one node only. So
the answers are kept per request shape:

- ``NodeAnswers``: PreFilter's refusals, or Score's card scores, for every node, brought up to
  date from the store's change log (``DeviceStore.changed_since``): only the nodes changed since
  the shape was last asked are asked again.

The plugin uses them only for cycles whose answer depends on nothing but the request and the
nodes' cards (no device hint, partition spec, RDMA ask or ignored reservations).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["MAX_SHAPES", "NodeAnswers", "ShapeCache"]

_V = TypeVar("_V")
_T = TypeVar("_T")

MAX_SHAPES = 32
"""Request shapes remembered (the least recently used is dropped): a cluster's GPU pods come in a
few shapes, and a stream of distinct ones costs at most this many tables of one entry per node."""


class ShapeCache(Generic[_T]):
    """One ``_T`` per request shape, the ``MAX_SHAPES`` most recently used."""

    def __init__(self, make: Callable[[], _T], max_shapes: int = MAX_SHAPES) -> None:
        self._items: OrderedDict[Hashable, _T] = OrderedDict()
        self._make = make
        self._max_shapes = max_shapes

    def of(self, shape: Hashable) -> _T:
        item = self._items.get(shape)
        if item is None:
            item = self._items[shape] = self._make()
            if len(self._items) > self._max_shapes:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(shape)
        return item


@dataclass(slots=True)
class NodeAnswers(Generic[_V]):
    """Each node's answer for one request shape (PreFilter's refusal, absent where the node holds
    it; Score's card score), as of change ``synced``."""

    by_node: dict[str, _V] = field(default_factory=dict)
    synced: int = -1
    """``DeviceStore.changes`` when the table was last brought up to date (-1: never)."""
