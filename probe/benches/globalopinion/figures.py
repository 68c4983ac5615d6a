"""GlobalOpinionQA figures of one run, drawn from its `metrics.json` only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from probe.metrics.core import get_path
from probe.results.run import Run
from probe.viz.figures import Figure, num, pyplot, save, yerr

CAPTIONS: dict[str, str] = {
    "country_similarity.png": "Countries ranked by the mean similarity (1 − JS distance, base 2) of the model's "
                              "answer distribution to theirs, with 95% bootstrap CIs over questions; the grey "
                              "tick is the same for a uniform model (the lift is the bar above it).",
    "cross_national_gain.png": "Change in similarity when the question names the country (\"How would someone "
                               "from {country} answer …\") minus without it, paired over questions, with 95% CIs.",
}


def run_figures(run: Run, out_dir: Path) -> list[Figure]:
    """The ranked-country bar chart and the cross-national gain chart."""
    m = run.metrics or {}
    figs = []
    cond = "default" if get_path(m, "expected", "default") else "cross_national"
    sim = get_path(m, "expected", cond, "similarity")
    if sim:
        figs.append(_bars(m, cond, "similarity", out_dir, "country_similarity.png", "mean similarity",
                          get_path(m, "expected", cond, "uniform")))
    if get_path(m, "expected", "cross_national", "gain"):
        figs.append(_bars(m, "cross_national", "gain", out_dir, "cross_national_gain.png",
                          "similarity gain from the country cue", None))
    return figs


def _bars(m: dict[str, Any], cond: str, key: str, out_dir: Path, name: str, label: str,
          uniform: dict[str, float] | None) -> Figure:
    plt = pyplot()
    values = get_path(m, "expected", cond, key)
    keys = [c for c, _ in sorted(values.items(), key=lambda kv: -num(kv[1]))]
    v = np.array([num(values[k]) for k in keys])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.18 * len(keys) + 2), 4), constrained_layout=True)
    x = np.arange(len(keys))
    ax.bar(x, v, yerr=yerr(v, get_path(m, "ci95", "expected", cond, key), keys), capsize=2, color="tab:blue")
    if uniform:
        ax.scatter(x, [num(uniform.get(k)) for k in keys], marker="_", s=120, color="grey", zorder=3,
                   label="uniform model")
        ax.legend(loc="lower left")
    else:
        ax.axhline(0, color="grey", lw=1)
    ax.set_xticks(x, keys, rotation=90, fontsize=6 if len(keys) > 40 else 8)
    ax.set(ylabel=label, title=f"{m.get('model', '')} on {m.get('bench', '')} ({cond})")
    return save(fig, out_dir, name, CAPTIONS[name])
