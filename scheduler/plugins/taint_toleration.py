"""TaintToleration: kube-scheduler's taint filter and PreferNoSchedule score.

Filter rejects a node with a NoSchedule or NoExecute taint the pod does not tolerate, naming the
node's first such taint as kube-scheduler does ("node(s) had untolerated taint {key: value}"); preemption
cannot help, so the rejection is unresolvable. Score counts the PreferNoSchedule taints the pod does not
tolerate, and NormalizeScore maps the counts to 0..100 reversed (fewest intolerable taints: 100).

Most nodes have no taints and the tainted ones share a handful of taint sets, so the work is done per
distinct taint set, not per node: ``node_index`` groups the rows by taint set once per cache generation
(the cache bumps its generation on every node change), and a cycle evaluates the pod's tolerations once
per group present among its candidate rows. ``NodeUnschedulable`` uses the same index.

Toleration matching follows core/v1 ``Toleration.ToleratesTaint``: an empty effect matches every effect,
an empty key (with ``Exists``) every key; ``Equal`` (the default) compares values, ``Exists`` ignores
them, ``Gt``/``Lt`` compare them as decimal integers (the taint value greater / less than the
toleration's). A toleration with any other operator, or a ``Gt``/``Lt`` side that is not an integer,
tolerates nothing (and is logged), so a node with the taint rejects the pod with the reason above.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.meta import Taint, Toleration
from scheduler.cache.node_table import BoolArray, IntArray, NodeTable
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    ClusterEvent,
    FilterPlugin,
    FilterResult,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.status import Status

__all__ = [
    "NAME",
    "NodeIndex",
    "TaintToleration",
    "default_normalize",
    "new",
    "node_index",
    "tolerates",
    "tolerations_tolerate",
]

log = logging.getLogger(__name__)

NAME = "TaintToleration"

NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"
_KNOWN_OPERATORS = frozenset({"", "Equal", "Exists", "Gt", "Lt"})
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class _ScoreState:
    tolerations: tuple[Toleration, ...]
    """The pod's tolerations that can tolerate PreferNoSchedule (that effect or none)."""


PRE_SCORE_KEY = StateKey[_ScoreState]("PreScoreTaintToleration")


# ---- toleration matching ------------------------------------------------------------------------


def _decimal(value: str | None) -> int | None:
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
        wanted, actual = _decimal(toleration.value), _decimal(taint.value)
        if wanted is None or actual is None:
            return False
        return actual > wanted if operator == "Gt" else actual < wanted
    return False


def tolerations_tolerate(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def _warn_malformed(pod: PodInfo, tolerations: Sequence[Toleration]) -> None:
    for t in tolerations:
        if (t.operator or "") not in _KNOWN_OPERATORS:
            log.warning(
                "pod %s: toleration operator %r is not supported; it tolerates nothing", pod.key, t.operator
            )
        elif t.operator in ("Gt", "Lt") and _decimal(t.value) is None:
            log.warning(
                "pod %s: toleration %s value %r is not an integer; it tolerates nothing",
                pod.key,
                t.operator,
                t.value,
            )


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


def default_normalize(scores: IntArray, *, reverse: bool) -> IntArray:
    """kube-scheduler's ``DefaultNormalizeScore``: [0, max] -> [0, 100], optionally reversed."""
    scores = np.asarray(scores, dtype=np.int64)
    top = int(scores.max()) if scores.size else 0
    if top <= 0:
        return np.full(scores.size, MAX_NODE_SCORE, dtype=np.int64) if reverse else scores.copy()
    normalized = MAX_NODE_SCORE * scores // top
    result: IntArray = MAX_NODE_SCORE - normalized if reverse else normalized
    return result


# ---- plugin ---------------------------------------------------------------------------------------


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin, ScoreExtensions):
    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.NODE_ADD | ClusterEvent.NODE_UPDATE

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        index = node_index(snapshot)
        if not index.groups:
            return FilterResult.all_feasible(rows.size)
        tolerations = pod.pod.spec.tolerations or []
        _warn_malformed(pod, tolerations)
        gids = index.group_of[rows]
        present = np.unique(gids[gids >= 0])
        reasons: list[str] = []
        verdict = np.full(len(index.groups) + 1, -1, dtype=np.int64)  # the extra slot is gid -1
        for gid in present.tolist():
            for taint in index.groups[gid]:
                if taint.effect not in (NO_SCHEDULE, NO_EXECUTE) or tolerations_tolerate(tolerations, taint):
                    continue
                reason = f"node(s) had untolerated taint {{{taint.key}: {taint.value or ''}}}"
                if reason not in reasons:
                    reasons.append(reason)
                verdict[gid] = reasons.index(reason)
                break
        per_row = verdict[gids]
        feasible = per_row < 0
        rejections = [(reason, per_row == k) for k, reason in enumerate(reasons)]
        return FilterResult(feasible=feasible, rejections=rejections, unresolvable=~feasible)

    def _score_state(self, pod: PodInfo) -> _ScoreState:
        tolerations = pod.pod.spec.tolerations or []
        return _ScoreState(tuple(t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE))

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status:
        state.write(PRE_SCORE_KEY, self._score_state(pod))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        scored = state.get(PRE_SCORE_KEY)
        if scored is None:
            scored = self._score_state(pod)
            state.write(PRE_SCORE_KEY, scored)
        index = node_index(snapshot)
        if not index.groups:
            return np.zeros(rows.size, dtype=np.int64)
        gids = index.group_of[rows]
        counts = np.zeros(len(index.groups) + 1, dtype=np.int64)
        for gid in np.unique(gids[gids >= 0]).tolist():
            counts[gid] = sum(
                1
                for taint in index.groups[gid]
                if taint.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate(scored.tolerations, taint)
            )
        result: IntArray = counts[gids]
        return result

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=True)


def new(args: None, handle: Handle) -> TaintToleration:
    return TaintToleration()
