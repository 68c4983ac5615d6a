"""LocQA figures of one run and of a sweep: B_US per language, drawn from stored metrics only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from probe.metrics.core import get_path
from probe.results.run import Run
from probe.viz.figures import Figure, heatmap, num, pyplot, save, yerr

CAPTIONS: dict[str, str] = {
    "b_us_by_language.png": "Global (US) bias B_US per language: how much more often responses give the US "
                            "answer than the locales' own answers would explain, with 95% CIs over templates "
                            "(0 = no excess).",
    "b_us_models.png": "B_US per language (rows) of every model (columns).",
}


def run_figures(run: Run, out_dir: Path) -> list[Figure]:
    """B_US per language with template-bootstrap CIs (skipped when no language has a value)."""
    b_us = get_path(run.metrics, "metrics", "B_US") or {}
    langs = [lang for lang, v in b_us.items() if v is not None]
    if not langs:
        return []
    plt = pyplot()
    values = np.array([num(b_us[lang]) for lang in langs])
    fig, ax = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
    ax.bar(np.arange(len(langs)), values, yerr=yerr(values, get_path(run.metrics, "ci95", "B_US"), langs), capsize=3,
           color="tab:blue")
    ax.axhline(0.0, color="grey", ls=":", lw=1)
    ax.set_xticks(np.arange(len(langs)), langs, rotation=45, ha="right")
    m = run.metrics or {}
    ax.set(ylabel="B_US", title=f"Global bias by language — {m.get('model', '')} on {m.get('bench', '')}")
    return [save(fig, Path(out_dir), "b_us_by_language.png", CAPTIONS["b_us_by_language.png"])]


def sweep_figures(runs: Sequence[Run], labels: Sequence[str], out_dir: Path) -> list[Figure]:
    """B_US heatmap, language × model (skipped when no run has per-language values)."""
    cols = [(lab, b) for r, lab in zip(runs, labels) if (b := get_path(r.metrics, "metrics", "B_US"))]
    if not cols:
        return []
    langs = sorted({lang for _, b in cols for lang in b})
    data = np.array([[num(b.get(lang)) for _, b in cols] for lang in langs])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(2.5 + 0.9 * len(cols), 5), constrained_layout=True)
    heatmap(ax, fig, data, langs, [lab for lab, _ in cols], "B_US", center=0.0)
    ax.set_title("Global (US) bias by language and model", fontsize=9)
    return [save(fig, Path(out_dir), "b_us_models.png", CAPTIONS["b_us_models.png"])]
