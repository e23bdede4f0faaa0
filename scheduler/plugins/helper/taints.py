"""The per-generation index of nodes grouped by taint set that TaintToleration and
NodeUnschedulable filter with (the toleration rules themselves are ``apis.tolerations``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from apis.meta import Taint
from scheduler.cache.node_table import BoolArray, IntArray, NodeTable
from scheduler.cache.snapshot import Snapshot

__all__ = ["NodeIndex", "node_index"]

TaintKey = tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class NodeIndex:
    """Rows grouped by taint set, and the unschedulable rows, for one cache generation."""

    group_of: IntArray
    """Full-length: the taint group of each row, -1 for rows without taints."""
    groups: tuple[tuple[Taint, ...], ...]
    unschedulable: BoolArray
    """Full-length: rows whose node has ``spec.unschedulable``."""


_index_cache: dict[str, tuple[NodeTable, int, int, NodeIndex]] = {}


def node_index(snapshot: Snapshot) -> NodeIndex:
    """The taint groups of ``snapshot``'s nodes, rebuilt only when the cache generation moved."""
    table = snapshot.table
    cached = _index_cache.get("last")
    if (
        cached is not None
        and cached[0] is table
        and cached[1] == snapshot.generation
        and cached[2] == table.row_count
    ):
        return cached[3]
    size = table.row_count
    group_of = np.full(size, -1, dtype=np.int64)
    unschedulable = np.zeros(size, dtype=np.bool_)
    ids: dict[TaintKey, int] = {}
    groups: list[tuple[Taint, ...]] = []
    for row in snapshot.candidate_rows().tolist():
        info = snapshot.node_at(row)
        if info.unschedulable:
            unschedulable[row] = True
        if info.taints:
            key = tuple((t.key, t.value or "", t.effect) for t in info.taints)
            gid = ids.get(key)
            if gid is None:
                gid = ids[key] = len(groups)
                groups.append(info.taints)
            group_of[row] = gid
    index = NodeIndex(group_of=group_of, groups=tuple(groups), unschedulable=unschedulable)
    _index_cache["last"] = (table, snapshot.generation, size, index)
    return index
