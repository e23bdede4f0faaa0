"""Run one plugin's extension points the way the runtime does, and read the answers per node name."""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code


def filter_reasons(plugin: Any, pod: PodInfo, snapshot: Snapshot) -> dict[str, list[str]]:
    """Node name -> the plugin's reasons for rejecting it ([] when it fits), after its PreFilter."""
    state = CycleState()
    rows = snapshot.candidate_rows()
    if hasattr(plugin, "pre_filter"):
        result = plugin.pre_filter(state, pod, snapshot)
        if result.status.code == Code.SKIP:
            return {snapshot.table.names[r]: [] for r in rows.tolist()}
        assert result.status.ok, result.status
    answer = plugin.filter(state, pod, snapshot, rows)
    assert answer.error is None
    out: dict[str, list[str]] = {}
    for i, row in enumerate(rows.tolist()):
        reasons = [reason for reason, mask in answer.rejections if mask[i]]
        assert bool(answer.feasible[i]) == (not reasons), (snapshot.table.names[row], reasons)
        out[snapshot.table.names[row]] = reasons
    return out


def scores(plugin: Any, pod: PodInfo, snapshot: Snapshot, *, pre_score: bool = True) -> dict[str, int]:
    """Node name -> the plugin's (normalized) score over every node."""
    state = CycleState()
    rows = snapshot.candidate_rows()
    if pre_score and hasattr(plugin, "pre_score"):
        plugin.pre_score(state, pod, snapshot, rows)
    raw = np.asarray(plugin.score(state, pod, snapshot, rows), dtype=np.int64)
    if hasattr(plugin, "normalize_scores"):
        raw = plugin.normalize_scores(state, pod, raw)
    return {snapshot.table.names[r]: int(s) for r, s in zip(rows.tolist(), raw.tolist(), strict=True)}
