"""Which node rows report each container image in ``status.images``: kube-scheduler's image states.

kube-scheduler's cache keeps, per image name, its size (as reported by the first node that still
has it) and the set of nodes that have it (``ImageStateSummary``); ImageLocality scales an image's
size by the share of nodes that have it. Here the same per name, as rows, updated when a node's
status changes, so that scoring is one array addition per image the pod uses (the rows of a name
are kept as an array until the name's holders change).
"""

from __future__ import annotations

import numpy as np

from apis.core import Node
from scheduler.cache.node_table import IntArray

__all__ = ["ImageIndex", "image_names"]


def image_names(node: Node) -> dict[str, int]:
    """Every name of every image the node reports, with the image's size (0 when not given)."""
    names: dict[str, int] = {}
    for image in node.status.images or ():
        for name in image.names or ():
            names.setdefault(name, image.size_bytes or 0)
    return names


class ImageIndex:
    def __init__(self) -> None:
        self._rows: dict[str, set[int]] = {}
        self._size: dict[str, int] = {}
        self._arrays: dict[str, IntArray] = {}

    def add(self, row: int, names: dict[str, int]) -> None:
        for name, size in names.items():
            rows = self._rows.get(name)
            if rows is None:
                rows = self._rows[name] = set()
                self._size[name] = size
            rows.add(row)
            self._arrays.pop(name, None)

    def remove(self, row: int, names: dict[str, int]) -> None:
        for name in names:
            rows = self._rows.get(name)
            if rows is None:
                continue
            rows.discard(row)
            self._arrays.pop(name, None)
            if not rows:
                del self._rows[name]
                del self._size[name]

    def rows(self, name: str) -> IntArray:
        """The rows whose node reports ``name``, ascending (empty when none)."""
        array = self._arrays.get(name)
        if array is None:
            rows = self._rows.get(name, set())
            array = np.fromiter(sorted(rows), dtype=np.int64, count=len(rows))
            array.setflags(write=False)  # shared by every cycle until the holders change
            if rows:
                self._arrays[name] = array
        return array

    def size(self, name: str) -> int:
        return self._size.get(name, 0)
