"""BLEnD figures of one run and of a sweep, drawn from stored metrics only: the paper's
per-country bars, local language beside English."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from probe.metrics.core import get_path
from probe.results.run import Run
from probe.viz.figures import Figure, heatmap, num, pyplot, save, yerr

CAPTIONS: dict[str, str] = {
    "score_by_country.png": "Short-answer score per country, asked in the local language and in English (all "
                            "pairs), with 95% CIs over question ids; countries whose language is English have one bar.",
    "score_models.png": "Local-language short-answer score per country (rows) of every model (columns).",
}


def run_figures(run: Run, out_dir: Path) -> list[Figure]:
    """Grouped bars per country, local and English (skipped when no country has a value)."""
    by = get_path(run.metrics, "metrics", "all", "by_country") or {}
    countries = list(by)
    if not countries:
        return []
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.8), constrained_layout=True)
    x = np.arange(len(countries))
    for offset, (lang, label, colour) in zip((-0.2, 0.2), (("local", "local language", "tab:orange"),
                                                           ("en", "English", "tab:blue"))):
        values = np.array([num(by[c].get(lang)) for c in countries])
        cis = {c: get_path(run.metrics, "ci95", "all", "by_country", c, lang) for c in countries}
        ax.bar(x + offset, values, width=0.4, yerr=yerr(values, cis, countries), capsize=2, color=colour, label=label)
    ax.set_xticks(x, [c.replace("_", " ") for c in countries], rotation=45, ha="right")
    m = run.metrics or {}
    ax.set(ylabel="score", ylim=(0, 1), title=f"BLEnD short answers — {m.get('model', '')} on {m.get('bench', '')}")
    ax.legend(fontsize=8)
    return [save(fig, Path(out_dir), "score_by_country.png", CAPTIONS["score_by_country.png"])]


def sweep_figures(runs: Sequence[Run], labels: Sequence[str], out_dir: Path) -> list[Figure]:
    """Local-language score heatmap, country × model (skipped when no run has per-country values)."""
    cols = [(lab, b) for r, lab in zip(runs, labels) if (b := get_path(r.metrics, "metrics", "all", "by_country"))]
    if not cols:
        return []
    countries = sorted({c for _, b in cols for c in b})
    data = np.array([[num(get_path(b, c, "local")) for _, b in cols] for c in countries])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(2.5 + 0.9 * len(cols), 6), constrained_layout=True)
    heatmap(ax, fig, data, countries, [lab for lab, _ in cols], "score")
    ax.set_title("BLEnD local-language score by country and model", fontsize=9)
    return [save(fig, Path(out_dir), "score_models.png", CAPTIONS["score_models.png"])]
