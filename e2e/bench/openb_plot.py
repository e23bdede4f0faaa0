"""The OpenB replay's plot: GPU allocation against arrived workload, ours beside the paper's curves."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as Canvas

from e2e.bench.openb_paper import PaperPolicy
from e2e.bench.openb_run import StrategyRun

__all__ = ["write_plot"]

_OURS = {"Fragmentation": "#1f77b4", "MostAllocated": "#d62728", "LeastAllocated": "#2ca02c"}
_PAPER_GREYS = ("#cccccc", "#bbbbbb", "#aaaaaa", "#999999", "#777777", "#444444")


def write_plot(path: Path, runs: Sequence[StrategyRun], paper: Sequence[PaperPolicy], title: str) -> Path:
    """Allocation % (y) against arrived % of GPU capacity (x): each run's curve (its end point
    included) in colour, the paper's means over seeds dashed in grey; the diagonal is everything
    that arrived allocated."""
    # No pyplot: a Figure on the Agg canvas holds no global state and needs no display.
    fig = Canvas(figsize=(7.2, 4.8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    top = max([130.0, *(r.arrived_percent for r in runs)])
    ax.plot([0, top], [0, top], color="#eeeeee", linewidth=1, label="arrived = allocated")
    for policy, grey in zip(paper, _PAPER_GREYS * 2, strict=False):
        ax.plot(
            range(len(policy.allocation)),
            policy.allocation,
            linestyle="--",
            linewidth=1,
            color=grey,
            label=f"paper {policy.name} ({policy.at(130) or 0:.1f}%)",
        )
    for run in runs:
        xs = [p.arrived_percent for p in run.curve] + [run.arrived_percent]
        ys = [p.allocated_percent for p in run.curve] + [run.allocated_percent]
        ax.plot(
            xs,
            ys,
            linewidth=1.8,
            color=_OURS.get(run.strategy),
            label=f"{run.strategy} ({run.allocated_percent:.1f}%)",
        )
    ax.set_xlabel("arrived GPU request (% of GPU capacity)", fontsize=8)
    ax.set_ylabel("GPU allocated (% of capacity)", fontsize=8)
    ax.set_xlim(0, top)
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
