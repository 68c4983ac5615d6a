"""Checkpoint sweeps: runs of one model at revisions that name a training step (`step1000`,
`stage1-step1000-tokens…`), ordered by step. A table of each headline metric's change from one
checkpoint to the next with its paired interval, and a figure of each metric over the steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from probe.analyses.view import StoredRun
from probe.benches.task import Column, Task
from probe.metrics.core import get_path
from probe.report.entries import is_number, value
from probe.report.paired_runs import delta_cell, p_cell, paired_or_reason
from probe.viz.figures import Figure, num, pyplot, save


def checkpoint_series(entries: Sequence[StoredRun], task: Task) -> list[list[StoredRun]]:
    """Per (model, bench) of this task, its runs at named training steps in step order, where
    there are at least two."""
    groups: dict[tuple[str, str], list[StoredRun]] = {}
    for e in entries:
        if e.task.kind == task.kind and e.step >= 0 and not e.intervention:
            groups.setdefault((e.model, e.bench), []).append(e)
    return [sorted(g, key=lambda e: e.step) for g in groups.values() if len(g) >= 2]


def _columns(task: Task) -> list[Column]:
    return [c for c in task.presentation.sweep_columns if c.numeric]


def checkpoint_table(entries: Sequence[StoredRun], task: Task) -> str | None:
    """`later − earlier` for consecutive checkpoints, with paired intervals; None without a series."""
    series = checkpoint_series(entries, task)
    if not series:
        return None
    columns = _columns(task)
    lines = ["| model | from → to | " + " | ".join(f"Δ {c.label} [95% CI] | p" for c in columns) + " |",
             "|---|---|" + "---|---|" * len(columns)]
    notes = []
    for runs in series:
        for early, late in zip(runs, runs[1:]):
            both = [c.path for c in columns if is_number(value(late, c)) and is_number(value(early, c))]
            diffs, reason = paired_or_reason(late, early, both)
            if reason:
                notes.append(f"- {early.label} → {late.label}: {reason}")
            cells = []
            for c in columns:
                a, b = value(late, c), value(early, c)
                diff = diffs.get(c.path)
                cells += [delta_cell(a - b if a is not None and b is not None else None, diff), p_cell(diff)]
            lines.append(f"| {late.model} | {early.revision} → {late.revision} | " + " | ".join(cells) + " |")
    return "\n".join(lines + (["", "Without a paired interval:", *notes] if notes else []))


def checkpoint_figures(entries: Sequence[StoredRun], out_dir: Path) -> list[Figure]:
    """One figure per checkpoint series: each headline metric over training steps, with its
    95% interval as error bars."""
    figures = []
    tasks = {e.task.kind: e.task for e in entries}
    for task in tasks.values():
        for runs in checkpoint_series(entries, task):
            columns = _columns(task)
            plt = pyplot()
            fig, axes = plt.subplots(1, len(columns), figsize=(3.2 * len(columns), 3.0), squeeze=False)
            steps = np.array([e.step for e in runs], dtype=float)
            for ax, c in zip(axes[0], columns):
                values = np.array([num(value(e, c)) for e in runs])
                bounds = np.array([[num(b) for b in (get_path(e.task.scoring.headline(e.metrics)[1], c.path) or [None, None])]
                                   for e in runs])
                err = np.clip(np.nan_to_num(np.stack([values - bounds[:, 0], bounds[:, 1] - values]), nan=0.0), 0, None)
                ax.errorbar(steps, values, yerr=err, marker="o", capsize=3)
                ax.set_title(c.label)
                ax.set_xlabel("training step")
            fig.tight_layout()
            name = f"checkpoints_{task.kind}_{runs[0].model}_{runs[0].bench}.png".replace("/", "_")
            figures.append(save(fig, out_dir, name, f"{task.title}, {runs[0].model}: headline metrics over "
                                                    f"training steps (95% intervals)"))
    return figures
