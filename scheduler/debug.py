"""Runtime debug switches and Koordinator's top-N score table (``--debug-scores``, ``/debug/flags/s``).

With ``top_n_scores`` N > 0, every pod that is scored (more than one feasible node) logs, at INFO,
its N best nodes with each Score plugin's weighted, normalized score and the total, as
Koordinator's ``frameworkext.debugScores`` prints them (a Markdown table, best node first)::

    Top3 scores for Pod: default/web-0, feasibleNodes: 5, plugins:[NodeResourcesFit TaintToleration]
    | # | Pod | Node | Score | NodeResourcesFit | TaintToleration |
    | --- | --- | --- | ---: | ---: | ---: |
    | 0 | default/web-0 | cpu-3 | 187 | 87 | 100 |

The record also carries the rows as data (``topScores``: node, score, plugins) for JSON log tools.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.cache.node_table import IntArray

__all__ = ["DebugFlags", "log_top_scores"]

log = logging.getLogger(__name__)


@dataclass
class DebugFlags:
    """Runtime switches the debug API sets and the scheduler reads (one shared object per process)."""

    verbosity: int = 0
    """klog-style log verbosity (``--v``); the root logger's level follows it."""
    top_n_scores: int = 0
    """Koordinator's ``debugTopNScores`` (``--debug-scores``): how many best-scored nodes to log per
    scored pod; 0 logs nothing and costs nothing."""


def log_top_scores(
    top_n: int,
    pod: str,
    node_names: Sequence[str],
    rows: IntArray,
    total: IntArray,
    per_plugin: Mapping[str, IntArray],
    weights: Mapping[str, int],
) -> None:
    """Log the ``top_n`` best of ``rows`` for ``pod`` (``namespace/name``), as run_score scored them:
    ``total`` per row, ``per_plugin`` the normalized scores, multiplied here by their ``weights``."""
    plugins = list(per_plugin)
    weighted = {name: per_plugin[name] * weights.get(name, 1) for name in plugins}
    best = np.argsort(-total, kind="stable")[:top_n]
    top: list[dict[str, Any]] = [
        {
            "node": node_names[int(rows[i])],
            "score": int(total[i]),
            "plugins": {name: int(weighted[name][i]) for name in plugins},
        }
        for i in best
    ]
    lines = [
        _markdown_row(["#", "Pod", "Node", "Score", *plugins]),
        _markdown_row(["---"] * 3 + ["---:"] * (1 + len(plugins))),
        *(
            _markdown_row(
                [str(rank), pod, entry["node"], str(entry["score"]), *map(str, entry["plugins"].values())]
            )
            for rank, entry in enumerate(top)
        ),
    ]
    log.info(
        "Top%d scores for Pod: %s, feasibleNodes: %d, plugins:[%s]\n%s",
        top_n,
        pod,
        rows.size,
        " ".join(plugins),
        "\n".join(lines),
        extra={"pod": pod, "feasibleNodes": int(rows.size), "topScores": top},
    )


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"
