"""kube-scheduler's ``DefaultNormalizeScore``."""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.framework.interfaces import MAX_NODE_SCORE

__all__ = ["default_normalize"]


def default_normalize(scores: IntArray, *, reverse: bool) -> IntArray:
    """kube-scheduler's ``DefaultNormalizeScore``: [0, max] -> [0, 100], optionally reversed."""
    scores = np.asarray(scores, dtype=np.int64)
    top = int(scores.max()) if scores.size else 0
    if top <= 0:
        return np.full(scores.size, MAX_NODE_SCORE, dtype=np.int64) if reverse else scores.copy()
    normalized = MAX_NODE_SCORE * scores // top
    result: IntArray = MAX_NODE_SCORE - normalized if reverse else normalized
    return result
