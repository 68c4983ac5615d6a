"""A run's report: `report.md` (the bench's markdown plus generic sections) and a self-contained
`report.html` with the bench's figures, the temperature curve and the logit-lens figure."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from probe.benches.task import Task
from probe.files import write_json
from probe.metrics.core import get_path
from probe.metrics.lens import layer_table
from probe.results.run import Run
from probe.viz.figures import Figure, num, plot_layers, pyplot, save
from probe.viz.html import write_html

TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)
CURVE_CAPTION = ("Headline metrics recomputed from the stored letter log-probs at each sampling temperature T "
                 "(log scale); T = 1 is the run's own distribution.")
LENS_CAPTION = ("Logit lens: the culture distribution and the letter-position probabilities read out after "
                "every layer.")


def write_run_report(run: Run, task: Task, markdown: str) -> None:
    """`report.md` and `report.html` (with `figures/`) of a run whose `metrics.json` is written."""
    if (run.path / "lens.safetensors").is_file():
        markdown += lens_section(run)
    (run.path / "report.md").write_text(markdown)
    figures = task.figures(run, run.path / "figures") if run.metrics else []
    curve = temperature_curve(run, task, TEMPERATURES, run.path / "figures")
    figures += [curve] if curve is not None else []
    if (run.path / "lens.png").is_file():
        figures.append(Figure("lens.png", run.path / "lens.png", LENS_CAPTION))
    metrics = run.metrics or {}
    write_html(run.path / "report.html", f"{metrics.get('bench')} — {metrics.get('model')}", markdown, figures)


def lens_condition(run: Run) -> str | None:
    """The condition the lens table reads: the first of several (DiSCo: C0, no context), else all
    prompts (None)."""
    conditions = list(dict.fromkeys(run.prompts.column("condition").to_pylist()))
    return conditions[0] if len(conditions) > 1 else None


def lens_section(run: Run) -> str:
    """Per-layer table and figure (`lens.png`, `lens_layers.json`) of the logit lens."""
    condition = lens_condition(run)
    table = layer_table(run, condition)
    write_json(run.path / "lens_layers.json", table)
    plot_layers(table, run.path / "lens.png")
    lines = ["", f"## Logit lens ({condition or 'all prompts'}; figure: lens.png)", "",
             "| layer | JSD to final (bits) | top group | " + " | ".join(f"P({x})" for x in table["letters"]) + " |",
             "|---" * (3 + len(table["letters"])) + "|"]
    for i, (csd, letters, jsd) in enumerate(zip(table["csd"], table["letter_probs"], table["jsd_to_final"])):
        top = max(csd, key=csd.get)
        lines.append(f"| {i} | {jsd:.4f} | {top} {csd[top]:.3f} | " + " | ".join(f"{p:.3f}" for p in letters) + " |")
    return "\n".join(lines) + "\n"


def temperature_curve(run: Run, task: Task, temperatures: Sequence[float], out_dir: Path) -> Figure | None:
    """The task's curve metrics, expected and greedy, recomputed at each temperature from the
    stored log-probs (no bootstrap). None for a generation run (one-hot choices do not depend on
    T), a task without curve metrics, or no metric defined."""
    temps = sorted({float(t) for t in temperatures})
    if any(t <= 0 or not np.isfinite(t) for t in temps):
        raise ValueError(f"temperature_curve: temperatures must be positive, got {list(temperatures)}")
    if not task.curve_metrics or not temps or run.scores is None or not len(run.table().prompt_id):
        return None
    trees = [run.recompute_metrics(analysis={"temperature": t, "n_boot": 0}) for t in temps]
    series = []
    for column in task.curve_metrics:
        exp = np.array([num(get_path(task.headline(tr)[0], column.path)) for tr in trees])
        greedy = num(get_path(trees[0].get("greedy"), column.path))
        if np.isfinite(exp).any():
            series.append((column.label, exp, greedy))
    if not series:
        return None
    plt = pyplot()
    from matplotlib.ticker import NullFormatter  # matplotlib loads on first figure only

    fig, axes = plt.subplots(1, len(series), figsize=(4.6 * len(series), 3.6), constrained_layout=True,
                             squeeze=False)
    for ax, (label, exp, greedy) in zip(axes[0], series):
        ax.plot(temps, exp, marker="o", label="expected at T")
        if np.isfinite(greedy):
            ax.axhline(greedy, color="tab:red", ls="--", lw=1, label="greedy (T → 0)")
        ax.set_xscale("log")
        ax.set_xticks(temps, [f"{t:g}" for t in temps])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set(xlabel="temperature T", ylabel=label, title=label)
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
    fig.suptitle(f"{(run.metrics or {}).get('model', run.manifest['model']['name'])}: metrics vs temperature",
                 fontsize=10)
    return save(fig, Path(out_dir), "temperature_curve.png", CURVE_CAPTION)
