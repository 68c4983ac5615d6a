"""A run's report: `report.md` (the bench's markdown plus generic sections) and a self-contained
`report.html` with the bench's figures, the temperature curve and the logit-lens and activation-patching
figures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from probe.benches.task import Task
from probe.files import make_dirs, write_json, write_text
from probe.metrics.core import AnalysisOptions, get_path
from probe.metrics.lens import first_layer_within, layer_table
from probe.metrics.patching import POOLED, patching_table
from probe.results.patching import TENSORS_FILE
from probe.results.run import Run
from probe.viz.figures import Figure, num, plot_layers, pyplot, save
from probe.viz.html import write_html
from probe.report.header import with_header
from probe.viz.markdown import Footnotes, fmt, table
from probe.viz.patching import plot_patching
from probe.viz.samples import SAMPLES_PAGE, sample_set, write_samples_html

TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)
CURVE_CAPTION = ("Headline metrics recomputed from the stored letter log-probs at each sampling temperature T "
                 "(log scale); T = 1 is the run's own distribution.")
LENS_CAPTION = ("Logit lens: the culture distribution and the letter-position probabilities read out after "
                "every layer.")
LENS_NOTE = ("Culture JSD: the layer's culture distribution (exposure-normalised shares) against the final "
             "layer's. Rotation shows every culture at every letter, so a preference for a letter whatever it "
             "shows moves no culture's share: this column can stay near 0 from the first layer on while the "
             "letters change completely. Letter JSD: each prompt's letter distribution against its final-layer "
             "one, averaged over the prompts; it says when the answer itself settles.")
PATCHING_CAPTION = ("Activation patching: the residual stream at the answer position after each layer is copied from "
                    "the cued (source) prompt into the uncued (destination) prompt. Share restored = (CR_patched − "
                    "CR_dest) / (CR_source − CR_dest), CR = mean probability of the cued culture's option: 0 = the "
                    "patch moves nothing, 1 = it carries the whole cue effect. Thin lines: one per culture; bold: "
                    "all pairs, with its 95% item-bootstrap band.")


def write_run_report(run: Run, task: Task, markdown: str) -> None:
    """`report.md` and `report.html` (with `figures/`) of a run whose `metrics.json` is written."""
    markdown = with_header(markdown, run.manifest, run.metrics or {})
    if (run.path / "lens.safetensors").is_file():
        markdown += lens_section(run)
    patched = (run.path / TENSORS_FILE).is_file()
    if patched:
        markdown += patching_section(run)
    write_text(run.path / "report.md", markdown)
    figures = task.figures(run, run.path / "figures") if run.metrics else []
    curve = temperature_curve(run, task, TEMPERATURES, run.path / "figures")
    figures += [curve] if curve is not None else []
    if (run.path / "lens.safetensors").is_file():  # not merely lens.png: a stale one of older code stays out
        figures.append(Figure("lens.png", run.path / "figures" / "lens.png", LENS_CAPTION))
    if patched:  # not merely patching.png: a stale figure of removed patching files stays out
        figures.append(Figure("patching.png", run.path / "figures" / "patching.png", PATCHING_CAPTION))
    metrics = run.metrics or {}
    title = f"{metrics.get('bench')} — {metrics.get('model')}"
    write_samples_html(run.path / SAMPLES_PAGE, f"{title}: samples", [sample_set(run, run.path.name)])
    write_html(run.path / "report.html", title, markdown, figures,
               links=[(SAMPLES_PAGE, "Per-prompt samples: each prompt beside its probabilities, answer and verdicts")])


def lens_condition(run: Run) -> str | None:
    """The condition the lens table reads: the first of several (DiSCo: C0, no context), else all
    prompts (None)."""
    conditions = list(dict.fromkeys(run.prompts.column("condition").to_pylist()))
    return conditions[0] if len(conditions) > 1 else None


def lens_section(run: Run) -> str:
    """Per-layer table and figure (`figures/lens.png`, `lens_layers.json`) of the logit lens."""
    condition = lens_condition(run)
    lens = layer_table(run, condition)
    write_json(run.path / "lens_layers.json", lens)
    plot_layers(lens, make_dirs(run.path / "figures") / "lens.png")
    head = ["layer", "culture JSD to final (bits)", "letter JSD to final (bits)", "top culture",
            *(f"P({x})" for x in lens["letters"])]
    rows = []
    for i, (csd, letters) in enumerate(zip(lens["csd"], lens["letter_probs"])):
        top = max(csd, key=csd.get)
        rows.append([i, f"{lens['jsd_to_final'][i]:.4f}", f"{lens['letter_jsd_to_final'][i]:.4f}",
                     f"{top} {csd[top]:.3f}", *(f"{p:.3f}" for p in letters)])
    lines = ["", f"## Logit lens ({condition or 'all prompts'}; figure: figures/lens.png)", "", LENS_NOTE, "",
             *table(head, rows), "", _settles(lens)]
    return "\n".join(lines) + "\n"


def _settles(lens: dict) -> str:
    """Where each distribution comes within 0.01 bits of the final layer's, for good."""
    culture, letters = (first_layer_within(lens, 0.01, key) for key in ("jsd_to_final", "letter_jsd_to_final"))
    return (f"The culture distribution is within 0.01 bits (JSD) of the final layer's from layer {culture} on; "
            f"the letter distribution from layer {letters} on.")


def patching_section(run: Run) -> str:
    """Per-layer share of the cue effect restored by activation patching (pooled, with CIs), with
    its table (`patching.json`) and figure (`figures/patching.png`), at the run's analysis options."""
    analysis, default = run.manifest.analysis or {}, AnalysisOptions()
    n_boot = int(analysis.get("n_boot", default.n_boot))
    result = patching_table(run, float(analysis.get("temperature", default.temperature)), n_boot,
                            int(analysis.get("seed", default.seed)))
    write_json(run.path / "patching.json", result)
    plot_patching(result, make_dirs(run.path / "figures") / "patching.png")
    direction = f"{result['source'] or 'source'} → {result['dest'] or 'destination'}"
    lines = ["", f"## Activation patching ({direction}; figure: figures/patching.png)", "",
             (f"Share of the cue's effect restored when the residual stream after a layer (answer position) is "
              f"copied from the source prompt into the destination: "
              f"`(CR_patched − CR_dest) / (CR_source − CR_dest)`, CR = mean probability of the cued culture's "
              f"option at T = {result['temperature']:g}. "
              f"{result['n_pairs'][POOLED]} pairs (CR_dest {fmt(result['CR_dest'][POOLED])}, CR_source "
              f"{fmt(result['CR_source'][POOLED])}); {result['n_left_out']} left out (no target, or the target "
              f"not shown)."), ""]
    notes, rows = Footnotes(), []
    intervals = (result["ci95"] or {}).get(POOLED) or [None] * len(result["layers"])
    for layer, value, interval, cr in zip(result["layers"], result["restored"][POOLED], intervals,
                                          result["CR_patched"][POOLED]):
        rows.append([layer, notes.value(value, UNDEFINED_SHARE), notes.interval(interval, value, UNDEFINED_SHARE, n_boot),
                     notes.value(cr, NO_PAIRS)])
    lines += [*table(["layer", "restored (all)", "95% CI", "CR patched"], rows), *notes.lines()]
    half = next((layer for layer, v in zip(result["layers"], result["restored"][POOLED]) if v is not None and v >= 0.5),
                None)
    lines += ["", f"First layer restoring at least half the effect: {half if half is not None else 'none'}."]
    last = {c: result["restored"][c][-1] for c in result["cultures"] if result["layers"]}
    ranked = sorted((v, c) for c, v in last.items() if v is not None)
    if len(ranked) > 1:
        lines.append(f"At the last patched layer ({result['layers'][-1]}): most restored {ranked[-1][1]} "
                     f"{ranked[-1][0]:.3f}, least {ranked[0][1]} {ranked[0][0]:.3f}.")
    return "\n".join(lines) + "\n"


UNDEFINED_SHARE = "undefined: the cue does not move the cued culture's probability (CR_source ≈ CR_dest)"
NO_PAIRS = "undefined: no pair left to patch"


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
    fig.suptitle(f"{(run.metrics or {}).get('model', run.manifest.model.name)}: metrics vs temperature",
                 fontsize=10)
    return save(fig, Path(out_dir), "temperature_curve.png", CURVE_CAPTION)
