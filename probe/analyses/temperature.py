"""The temperature curve: the task's curve metrics, expected and greedy, recomputed from the
stored log-probs at several temperatures and drawn as `temperature_curve.png`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probe.analyses.base import Analysis
from probe.analyses.view import StoredRun
from probe.metrics.core import get_path
from probe.viz.figures import Figure, num
from probe.viz.temperature import CurveSeries, plot_temperature_curve

TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)


class TemperatureCurve(Analysis):
    """The temperature curve of every run (a figure only; none where no curve metric is defined)."""

    name = "temperature_curve"

    def applies(self, view: StoredRun) -> bool:
        return True  # `temperature_curve` says when there is no curve to draw

    def figures(self, view: StoredRun, result: dict[str, Any] | None, figures_dir: Path) -> list[Figure]:
        curve = temperature_curve(view, TEMPERATURES, figures_dir)
        return [] if curve is None else [curve]


def temperature_curve(stored: StoredRun, temperatures: Sequence[float], out_dir: Path) -> Figure | None:
    """The task's curve metrics, expected and greedy, recomputed at each temperature from the
    stored log-probs (no bootstrap) and drawn as `temperature_curve.png`. None for a generation
    run (one-hot choices do not depend on T), a task without curve metrics, or no metric defined."""
    run, task = stored, stored.task
    temps = sorted({float(t) for t in temperatures})
    if any(t <= 0 or not np.isfinite(t) for t in temps):
        raise ValueError(f"temperature_curve: temperatures must be positive, got {list(temperatures)}")
    if not task.presentation.curve_metrics or not temps or run.scores is None or not len(run.table().prompt_id):
        return None
    trees = [stored.recompute_metrics(analysis={"temperature": t, "n_boot": 0}) for t in temps]
    series = []
    for column in task.presentation.curve_metrics:
        expected = np.array([num(get_path(task.scoring.headline(tree)[0], column.path)) for tree in trees])
        greedy = num(get_path(trees[0].get("greedy"), column.path))
        if np.isfinite(expected).any():
            series.append(CurveSeries(column.label, expected, greedy))
    if not series:
        return None
    model = (run.metrics or {}).get("model", run.manifest.model.name)
    return plot_temperature_curve(temps, series, model, out_dir)
