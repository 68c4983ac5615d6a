"""Steering dose–response in a sweep: `intervention=steer` runs of one model, layer and
positions, over `intervention.alpha` (and groups), with the task's `presentation.steer_columns` (a
`{group}` path part is the steered group). A table per series and one figure per
(model, layer, positions): a panel per metric, a line per group over α, 95% intervals as
error bars. A plain run of the same model and bench joins every series at α = 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from probe.analyses.base import Analysis
from probe.analyses.cells import metric_cell
from probe.analyses.view import StoredRun
from probe.benches.task import Column, Task
from probe.metrics.core import get_path
from probe.results.run_key import read_run_key
from probe.types import GroupNoun
from probe.viz.figures import Figure, num, pyplot, save

Key = tuple[str, str, int, str, str, str, str]
"""(model label, bench, layer, positions, source condition, dest condition, vectors run)."""


class Steering(Analysis):
    """Steering dose–response: nothing in a single run's report; a sweep's table and figures."""

    name = "steering"

    def applies(self, view: StoredRun) -> bool:
        return False  # a dose–response needs the runs of a sweep

    def sweep_section(self, entries: Sequence[StoredRun], task: Task) -> str | None:
        """The sweep's steering block for `task`: a heading, what the runs are, the table."""
        steering = steering_table(entries, task)
        if not steering:
            return None
        note = steering_note(task.presentation.groups)
        return "\n".join([f"### {task.title}: steering dose–response", "", note, "", steering, ""])

    def sweep_figures(self, entries: Sequence[StoredRun], out_dir: Path) -> list[Figure]:
        return steering_figures(entries, out_dir)


def steering_note(groups: GroupNoun) -> str:
    """What the steering table's runs are, in the bench's word for its groups."""
    return ("Runs with `intervention=steer`: α · v_c added to the residual stream after the layer (v_c = mean "
            f"residual of prompts cued with {groups.one} c minus that of uncued prompts); α = 0 is the plain run.")


def _same_run_otherwise(a: StoredRun, b: StoredRun) -> bool:
    """Two runs whose results keys differ at most in the intervention and the mechanistic
    outputs (the plain run is often the capture run the vectors came from), analysed alike."""
    def key(e: StoredRun) -> dict:
        stored = read_run_key(e.path) or {}
        return {k: v for k, v in stored.items() if k not in ("intervention", "mech")}

    def options(e: StoredRun) -> tuple:
        analysis = e.manifest.analysis
        return (None, None, None) if analysis is None else (analysis.temperature, analysis.n_boot, analysis.seed)

    return options(a) == options(b) and key(a) == key(b) != {}


def _series(entries: Sequence[StoredRun], task: Task) -> dict[Key, dict[str, list[tuple[float, StoredRun]]]]:
    """Per series key: per steered group, `(α, run)` in α order; the one plain run that matches the
    series in everything but the intervention joins it at α = 0 (none when ambiguous)."""
    mine = [e for e in entries if e.task.kind == task.kind]
    plain = [e for e in mine if not e.intervention]
    out: dict[Key, dict[str, list[tuple[float, StoredRun]]]] = {}
    for e in mine:
        iv = e.intervention
        if iv is None or not iv.is_steering:
            continue
        key = (e.model_label, e.bench, int(iv.layer_resolved or 0), str(iv.positions), str(iv.source), str(iv.dest),
               str(iv.vectors))
        out.setdefault(key, {}).setdefault(str(iv.group), []).append((float(iv.alpha or 0.0), e))
    for groups in out.values():
        for runs in groups.values():
            bases = [p for p in plain if _same_run_otherwise(p, runs[0][1])]
            if len(bases) == 1 and all(a != 0 for a, _ in runs):
                runs.append((0.0, bases[0]))
            runs.sort(key=lambda ar: ar[0])
    return out


def _column(c: Column, group: str) -> Column:
    return Column(c.label.replace("(c)", f"({group})"), c.path.format(group=group))


def steering_table(entries: Sequence[StoredRun], task: Task) -> str | None:
    """Markdown: per series and steered group, a row per α with the steer columns; None without steered runs."""
    series = _series(entries, task)
    steer = task.presentation.steer_columns
    if not series or not steer:
        return None
    lines = [f"| model | layer | positions | vector | {task.presentation.groups.one} | α | " + " | ".join(c.label for c in steer)
             + " |", "|---|---|---|---|---|---|" + "---|" * len(steer)]
    for (model, _, layer, positions, source, dest, vectors), groups in sorted(series.items()):
        for group, runs in sorted(groups.items()):
            for alpha, e in runs:
                cells = [metric_cell(task, e.metrics, _column(c, group)) for c in steer]
                lines.append(f"| {model} | {layer} | {positions} | {source}−{dest} of `{vectors}` | {group} | "
                             f"{alpha:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def steering_figures(entries: Sequence[StoredRun], out_dir: Path) -> list[Figure]:
    """One figure per (model, bench, layer, positions) with steered runs: each steer column over α."""
    figures = []
    for task in {e.task.kind: e.task for e in entries}.values():
        if not task.presentation.steer_columns:
            continue
        for n, ((model, bench, layer, positions, source, dest, _), groups) in enumerate(
                sorted(_series(entries, task).items())):
            plt = pyplot()
            columns = task.presentation.steer_columns
            fig, axes = plt.subplots(1, len(columns), figsize=(3.4 * len(columns), 3.0), squeeze=False)
            for ax, c in zip(axes[0], columns):
                for group, runs in sorted(groups.items()):
                    col = _column(c, group)
                    alphas = np.array([a for a, _ in runs])
                    values = np.array([num(get_path(e.task.scoring.headline(e.metrics)[0], col.path)) for _, e in runs])
                    bounds = np.array([[num(b) for b in (get_path(e.task.scoring.headline(e.metrics)[1], col.path)
                                                         or [None, None])] for _, e in runs])
                    err = np.clip(np.nan_to_num(np.stack([values - bounds[:, 0], bounds[:, 1] - values]), nan=0.0),
                                  0, None)
                    ax.errorbar(alphas, values, yerr=err, marker="o", capsize=3, label=group)
                ax.set_title(c.label, fontsize=9)
                ax.set_xlabel("α")
            axes[0][-1].legend(fontsize=7)
            fig.tight_layout()
            name = f"steering_{task.kind}_{model}_{bench}_L{layer}_{positions}_{n}.png".replace("/", "_")
            figures.append(save(fig, out_dir, name, f"{task.title}, {model}: steering dose–response at layer {layer} "
                                                    f"({positions} positions, {source}−{dest} vectors, series {n}), "
                                                    f"per steered {task.presentation.groups.one} (95% intervals)"))
    return figures
