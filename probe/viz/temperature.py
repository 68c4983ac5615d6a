"""The temperature-curve figure: a bench's curve metrics, expected at each sampling temperature
against the greedy value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probe.results.layout import TEMPERATURE_FIGURE
from probe.viz.figures import Figure, pyplot, save

CURVE_CAPTION = ("Headline metrics recomputed from the stored letter log-probs at each sampling temperature T "
                 "(log scale); T = 1 is the run's own distribution.")


@dataclass(frozen=True)
class CurveSeries:
    """One panel: a metric's expected value at each temperature and its greedy (T → 0) value."""

    label: str
    expected: np.ndarray
    """`[temperature]`, NaN where the metric is undefined."""
    greedy: float
    """NaN when undefined (no reference line)."""


def plot_temperature_curve(temperatures: Sequence[float], series: Sequence[CurveSeries], model: str,
                           out_dir: Path) -> Figure:
    """One panel per series over the (ascending, positive) `temperatures` on a log axis, written as
    `out_dir/temperature_curve.png`."""
    plt = pyplot()
    from matplotlib.ticker import NullFormatter  # matplotlib loads on first figure only

    fig, axes = plt.subplots(1, len(series), figsize=(4.6 * len(series), 3.6), constrained_layout=True,
                             squeeze=False)
    for ax, curve in zip(axes[0], series):
        ax.plot(temperatures, curve.expected, marker="o", label="expected at T")
        if np.isfinite(curve.greedy):
            ax.axhline(curve.greedy, color="tab:red", ls="--", lw=1, label="greedy (T → 0)")
        ax.set_xscale("log")
        ax.set_xticks(temperatures, [f"{t:g}" for t in temperatures])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set(xlabel="temperature T", ylabel=curve.label, title=curve.label)
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
    fig.suptitle(f"{model}: metrics vs temperature", fontsize=10)
    return save(fig, Path(out_dir), TEMPERATURE_FIGURE, CURVE_CAPTION)
