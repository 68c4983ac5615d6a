"""GlobalOpinionQA figures of one run, drawn from its `metrics.json` only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from probe.benches.globalopinion.countries import table_name
from probe.metrics.core import get_path
from probe.results.run import Run
from probe.viz.figures import Figure, num, pyplot, save, yerr

CAPTIONS: dict[str, str] = {
    "country_lift.png": "Countries ordered by lift (the model's similarity to their answer shares minus a uniform "
                        "model's; similarity = 1 − JS distance, base 2), bars with 95% bootstrap CIs over questions "
                        "(left axis); the model's similarity (dot) and the uniform model's (bar) on the right axis. "
                        "Countries with few questions are included here; the ranking in the report leaves them out.",
    "cross_national_gain.png": "Change in similarity when the question names the country (\"How would someone "
                               "from {country} answer …\") minus without it, paired over questions, with 95% CIs.",
    "cue_country_similarity.png": "Similarity of the model's answers under the cue naming the row's country to "
                                  "each column country's answer shares, mean over the questions both share, each "
                                  "column centred on its mean (expected reading; the countries with the most cued "
                                  "questions; grey: no shared question). A specific cue shows red on the diagonal.",
}
HEATMAP_COUNTRIES = 25
"""Countries a cue × country heatmap shows at most (those with the most cued questions)."""


def run_figures(run: Run, out_dir: Path) -> list[Figure]:
    """The ranked-country bar chart and the cross-national gain chart."""
    m = run.metrics or {}
    figs = []
    cond = "default" if get_path(m, "expected", "default") else "cross_national"
    if get_path(m, "expected", cond, "lift"):
        figs.append(_lift_bars(m, cond, out_dir))
    if get_path(m, "expected", "cross_national", "gain"):
        figs.append(_bars(m, "cross_national", "gain", out_dir, "cross_national_gain.png",
                          "similarity gain from the country cue"))
    heatmap = _cue_heatmap(m, out_dir)
    if heatmap is not None:
        figs.append(heatmap)
    return figs


def _cue_heatmap(m: dict[str, Any], out_dir: Path) -> Figure | None:
    """The cue × country similarity matrix (`metrics.json`'s `cue_matrix`), each column centred, on
    the countries cued most often; None when fewer than two of them share a question."""
    block = m.get("cue_matrix") or {}
    sims, counts = block.get("similarity") or {}, block.get("questions") or {}
    top = sorted(sims, key=lambda c: (-counts.get(c, {}).get(c, 0), c))[:HEATMAP_COUNTRIES]
    grid = np.array([[num((sims.get(x) or {}).get(y)) for y in top] for x in top], dtype=np.float64)
    if len(top) < 2 or np.isfinite(grid[~np.eye(len(top), dtype=bool)]).sum() == 0:
        return None
    with np.errstate(invalid="ignore"):
        centred = grid - np.nanmean(grid, axis=0, keepdims=True)
    plt = pyplot()
    size = max(4.0, 0.28 * len(top) + 2)
    fig, ax = plt.subplots(figsize=(size + 1, size), constrained_layout=True)
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="lightgrey")  # grey: no question shared by the pair
    image = ax.imshow(np.ma.masked_invalid(centred), cmap=cmap, vmin=-np.nanmax(np.abs(centred)),
                      vmax=np.nanmax(np.abs(centred)))
    names = [table_name(c) for c in top]
    ax.set_xticks(range(len(top)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(top)), names, fontsize=7)
    ax.set(xlabel="country compared with", ylabel="country named in the cue",
           title=f"{m.get('model', '')}: cue × country similarity (column-centred)")
    fig.colorbar(image, ax=ax, shrink=0.8, label="similarity − column mean")
    return save(fig, out_dir, "cue_country_similarity.png", CAPTIONS["cue_country_similarity.png"])


def _lift_bars(m: dict[str, Any], cond: str, out_dir: Path) -> Figure:
    """Each country's lift over a uniform model as a bar with its 95% interval, its similarity and
    the uniform model's as markers on a second axis (their scale is 0–1, the lift's near 0), the
    legend above the plot where it covers no bar."""
    plt = pyplot()
    lift = get_path(m, "expected", cond, "lift")
    sim, uniform = (get_path(m, "expected", cond, k) or {} for k in ("similarity", "uniform"))
    keys = [c for c, _ in sorted(lift.items(), key=lambda kv: -num(kv[1]))]
    v = np.array([num(lift[k]) for k in keys])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.18 * len(keys) + 2), 4.6), layout="constrained")
    x = np.arange(len(keys))
    bars = ax.bar(x, v, yerr=yerr(v, get_path(m, "ci95", "expected", cond, "lift"), keys), capsize=2,
                  color="tab:blue", alpha=0.6, label="lift [95% CI] (left axis)")
    ax.axhline(0, color="grey", lw=1)
    ax.set_xticks(x, [table_name(k) for k in keys], rotation=90, fontsize=6 if len(keys) > 40 else 8)
    ax.set(ylabel="lift (similarity − uniform)", title=f"{m.get('model', '')} on {m.get('bench', '')} ({cond})")
    right = ax.twinx()
    dots = right.scatter(x, [num(sim.get(k)) for k in keys], marker="o", s=14, color="black", zorder=3,
                         label="similarity (right axis)")
    ticks = right.scatter(x, [num(uniform.get(k)) for k in keys], marker="_", s=120, color="tab:orange", zorder=3,
                          label="uniform model's similarity (right axis)")
    right.set(ylabel="similarity", ylim=(0, 1))
    fig.legend(handles=[bars, dots, ticks], loc="outside upper center", ncols=3, fontsize=8, frameon=False)
    return save(fig, out_dir, "country_lift.png", CAPTIONS["country_lift.png"])


def _bars(m: dict[str, Any], cond: str, key: str, out_dir: Path, name: str, label: str) -> Figure:
    plt = pyplot()
    values = get_path(m, "expected", cond, key)
    keys = [c for c, _ in sorted(values.items(), key=lambda kv: -num(kv[1]))]
    v = np.array([num(values[k]) for k in keys])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.18 * len(keys) + 2), 4), constrained_layout=True)
    x = np.arange(len(keys))
    ax.bar(x, v, yerr=yerr(v, get_path(m, "ci95", "expected", cond, key), keys), capsize=2, color="tab:blue")
    ax.axhline(0, color="grey", lw=1)
    ax.set_xticks(x, keys, rotation=90, fontsize=6 if len(keys) > 40 else 8)
    ax.set(ylabel=label, title=f"{m.get('model', '')} on {m.get('bench', '')} ({cond})")
    return save(fig, out_dir, name, CAPTIONS[name])
