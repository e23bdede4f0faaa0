"""Taints and tolerations (kube's ``v1helper.TolerationsTolerateTaint``), and the per-generation
index of nodes grouped by taint set that TaintToleration and NodeUnschedulable filter with."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.meta import Taint, Toleration
from scheduler.cache.node_table import BoolArray, IntArray, NodeTable
from scheduler.cache.snapshot import Snapshot

__all__ = [
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "NodeIndex",
    "node_index",
    "tolerates",
    "tolerations_tolerate",
]

NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"
KNOWN_OPERATORS = frozenset({"", "Equal", "Exists", "Gt", "Lt"})
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_decimal(value: str | None) -> int | None:
    """``value`` as an int64 in canonical decimal form ("0950" is not), else None."""
    if value is None or not _DECIMAL.fullmatch(value):
        return None
    number = int(value)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """core/v1 ``Toleration.ToleratesTaint``; a malformed toleration tolerates nothing."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator or "Equal"
    if operator == "Equal":
        return (toleration.value or "") == (taint.value or "")
    if operator == "Exists":
        return True
    if operator in ("Gt", "Lt"):
        wanted, actual = parse_decimal(toleration.value), parse_decimal(taint.value)
        if wanted is None or actual is None:
            return False
        return actual > wanted if operator == "Gt" else actual < wanted
    return False


def tolerations_tolerate(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


# ---- the per-generation node index ----------------------------------------------------------------

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
