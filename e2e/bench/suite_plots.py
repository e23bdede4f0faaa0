"""The suite's plots: one PNG per bench, a panel per metric with ours and the baseline side by side
for each size; the latency bench adds the CDF of every pod's create -> bound latency."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as Canvas

from e2e.bench.suite_model import Figure, SuiteResults

__all__ = ["write_plots"]

OURS_COLOR, BASELINE_COLOR = "#1f77b4", "#aaaaaa"
WIDTH = 0.38


def _bars(ax: Axes, figures: Sequence[Figure]) -> None:
    sizes = [f.size for f in figures]
    xs = range(len(figures))
    # A figure not measured (a job that never ran has no time to run) is no bar, not a zero.
    ours = [f.ours if f.ours is not None else math.nan for f in figures]
    paired = any(f.baseline is not None for f in figures)
    shift = WIDTH / 2 if paired else 0.0
    ax.bar([x - shift for x in xs], ours, WIDTH, label=figures[0].ours_label, color=OURS_COLOR)
    if paired:
        base = [f.baseline if f.baseline is not None else math.nan for f in figures]
        ax.bar(
            [x + WIDTH / 2 for x in xs], base, WIDTH, label=figures[0].baseline_label, color=BASELINE_COLOR
        )
    ax.set_xticks(list(xs), sizes, rotation=15 if len(sizes) > 2 else 0, fontsize=7)
    arrow = "higher is better" if figures[0].better == "higher" else "lower is better"
    ax.set_title(f"{figures[0].metric} ({figures[0].unit}), {arrow}", fontsize=9)
    ax.legend(fontsize=7)


def _cdf(ax: Axes, latency_ms: dict[str, list[float]]) -> None:
    for scheduler, values in latency_ms.items():
        if values:
            n = len(values)
            ax.step(values, [(i + 1) / n for i in range(n)], where="post", label=scheduler)
    ax.set_xlabel("create -> bound (ms)", fontsize=8)
    ax.set_ylabel("share of pods", fontsize=8)
    ax.set_title("startup latency CDF", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def write_plots(results: SuiteResults, out: Path) -> list[Path]:
    """One ``<bench>.png`` under ``out`` per bench that produced figures; the paths written."""
    written = []
    benches = list(dict.fromkeys(f.bench for f in results.figures))
    for bench in benches:
        figures = [f for f in results.figures if f.bench == bench]
        metrics = list(dict.fromkeys(f.metric for f in figures))
        panels = len(metrics) + (1 if bench == "latency" and results.latency_ms else 0)
        columns = min(panels, 3)
        rows = -(-panels // columns)
        # No pyplot: a Figure on the Agg canvas holds no global state and needs no display.
        fig = Canvas(figsize=(4.6 * columns, 3.4 * rows))
        FigureCanvasAgg(fig)
        axes = fig.subplots(rows, columns, squeeze=False)
        flat = [ax for row in axes for ax in row]
        for ax, metric in zip(flat, metrics, strict=False):
            _bars(ax, [f for f in figures if f.metric == metric])
        if bench == "latency" and results.latency_ms:
            _cdf(flat[len(metrics)], results.latency_ms)
        for ax in flat[panels:]:
            ax.set_visible(False)
        fig.suptitle(f"{bench} ({results.started_at}, {results.machine.cpus} CPUs)", fontsize=10)
        fig.tight_layout()
        path = out / f"{bench}.png"
        fig.savefig(path, dpi=110)
        written.append(path)
    return written
