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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.meta import Toleration
from apis.tolerations import (
    KNOWN_OPERATORS,
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    parse_decimal,
    tolerates,
    tolerations_tolerate,
)
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import RowInputs
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    ClusterEvent,
    FilterPlugin,
    FilterResult,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status
from scheduler.plugins.helper.normalize import default_normalize
from scheduler.plugins.helper.taints import NodeIndex, node_index

__all__ = [
    "NAME",
    "PLUGIN",
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


@dataclass(frozen=True, slots=True)
class _ScoreState:
    tolerations: tuple[Toleration, ...]
    """The pod's tolerations that can tolerate PreferNoSchedule (that effect or none)."""


PRE_SCORE_KEY = StateKey[_ScoreState]("PreScoreTaintToleration")


# ---- toleration matching ------------------------------------------------------------------------


def _warn_malformed(pod: PodInfo, tolerations: Sequence[Toleration]) -> None:
    for t in tolerations:
        if (t.operator or "") not in KNOWN_OPERATORS:
            log.warning(
                "pod %s: toleration operator %r is not supported; it tolerates nothing", pod.key, t.operator
            )
        elif t.operator in ("Gt", "Lt") and parse_decimal(t.value) is None:
            log.warning(
                "pod %s: toleration %s value %r is not an integer; it tolerates nothing",
                pod.key,
                t.operator,
                t.value,
            )


# ---- plugin ---------------------------------------------------------------------------------------


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin, ScoreExtensions):
    @property
    def name(self) -> str:
        return NAME

    def row_inputs(self, pod: PodInfo) -> RowInputs:
        """``RowLocal``: it reads the pod and the node's taints."""
        return RowInputs.NODE

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


PLUGIN = PluginSpec(NAME, new)
