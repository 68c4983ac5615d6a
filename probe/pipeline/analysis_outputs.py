"""What a run's analysis stores beside `metrics.json` for its report: the logit-lens table
(`lens_layers.json`), the activation-patching table (`patching.json`) and every figure of
`report.html` (the bench's, the temperature curve, the lens and patching plots)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probe.benches.task import Task
from probe.files import make_dirs, write_json
from probe.metrics.core import AnalysisOptions, get_path
from probe.metrics.lens import layer_table, lens_condition
from probe.metrics.patch_effects import patching_table
from probe.report.run_report import RunAnalyses
from probe.report.stored_run import StoredRun
from probe.results.layout import (
    FIGURES,
    LENS,
    LENS_FIGURE,
    LENS_TABLE,
    PATCHING_FIGURE,
    PATCHING_TABLE,
    PATCHING_TENSORS,
)
from probe.results.run import Run
from probe.viz.figures import Figure, lens_caption, num, plot_layers
from probe.viz.format_report import plot_format_shares
from probe.viz.patch_figures import patching_caption, plot_patching
from probe.viz.temperature import CurveSeries, plot_temperature_curve

TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)


def run_analyses(stored: StoredRun, opts: AnalysisOptions) -> RunAnalyses:
    """Compute and write the lens and patching tables (runs that stored their tensors) and draw
    every figure of the run's report into `figures/`; `stored.metrics` is what `metrics.json` holds."""
    run = stored.run
    figures_dir = run.path / FIGURES
    lens = lens_outputs(run, stored.task, figures_dir) if (run.path / LENS).is_file() else None
    # Not merely patching.png on disk: a stale figure of removed patching files stays out.
    patching = patching_outputs(run, opts, figures_dir) if (run.path / PATCHING_TENSORS).is_file() else None
    figures = stored.task.figures(run, figures_dir) if run.metrics else []
    if "format" in stored.metrics:  # a factor run (`probe.report.format_run`)
        figures.append(plot_format_shares(stored.metrics["format"], figures_dir, stored.task.presentation.groups))
    curve = temperature_curve(stored, TEMPERATURES, figures_dir)
    figures += [curve] if curve is not None else []
    groups = stored.task.presentation.groups
    if lens is not None:
        figures.append(Figure(LENS_FIGURE, figures_dir / LENS_FIGURE, lens_caption(groups)))
    if patching is not None:
        figures.append(Figure(PATCHING_FIGURE, figures_dir / PATCHING_FIGURE, patching_caption(groups)))
    return RunAnalyses(figures=tuple(figures), lens=lens, patching=patching, design=stored.task.design,
                       groups=groups)


def lens_outputs(run: Run, task: Task, figures_dir: Path) -> dict[str, Any]:
    """The logit lens's per-layer table (`lens_layers.json`) over the condition `lens_condition`
    picks by the task's design, and its figure (`lens.png`)."""
    design = task.design
    lens = layer_table(run, design, lens_condition(run.table().conditions(design), design))
    write_json(run.path / LENS_TABLE, lens)
    plot_layers(lens, make_dirs(figures_dir) / LENS_FIGURE)
    return lens


def patching_outputs(run: Run, opts: AnalysisOptions, figures_dir: Path) -> dict[str, Any]:
    """Activation patching's per-layer restored shares at the run's analysis options
    (`patching.json`) and their figure (`patching.png`)."""
    result = patching_table(run, opts.temperature, opts.n_boot, opts.seed)
    write_json(run.path / PATCHING_TABLE, result)
    plot_patching(result, make_dirs(figures_dir) / PATCHING_FIGURE)
    return result


def temperature_curve(stored: StoredRun, temperatures: Sequence[float], out_dir: Path) -> Figure | None:
    """The task's curve metrics, expected and greedy, recomputed at each temperature from the
    stored log-probs (no bootstrap) and drawn as `temperature_curve.png`. None for a generation
    run (one-hot choices do not depend on T), a task without curve metrics, or no metric defined."""
    run, task = stored.run, stored.task
    temps = sorted({float(t) for t in temperatures})
    if any(t <= 0 or not np.isfinite(t) for t in temps):
        raise ValueError(f"temperature_curve: temperatures must be positive, got {list(temperatures)}")
    if not task.presentation.curve_metrics or not temps or run.scores is None or not len(run.table().prompt_id):
        return None
    trees = [stored.recompute_metrics(analysis={"temperature": t, "n_boot": 0}) for t in temps]
    series = []
    for column in task.presentation.curve_metrics:
        expected = np.array([num(get_path(task.headline(tree)[0], column.path)) for tree in trees])
        greedy = num(get_path(trees[0].get("greedy"), column.path))
        if np.isfinite(expected).any():
            series.append(CurveSeries(column.label, expected, greedy))
    if not series:
        return None
    model = (run.metrics or {}).get("model", run.manifest.model.name)
    return plot_temperature_curve(temps, series, model, out_dir)
