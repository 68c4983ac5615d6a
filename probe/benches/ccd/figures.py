"""CCD-Bench figures of one run and of a sweep, drawn from stored files only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.cluster.hierarchy import dendrogram, linkage
from scipy.spatial.distance import squareform

from probe.benches.ccd.data import CLUSTERS
from probe.metrics.core import get_path, symmetric_kl
from probe.results.run import Run
from probe.viz.figures import Figure, bars, heatmap, num, pyplot, save

CAPTIONS: dict[str, str] = {
    "cluster_shares.png": "Expected share of each GLOBE cluster among the model's choices, with 95% bootstrap "
                          "CIs; the dotted line is the uniform share.",
    "position_cluster_heatmap.png": "Choice rate by display position and cluster: the expected probability of "
                                    "choosing position ℓ among prompts that show cluster c there (1/K = no "
                                    "preference).",
    "ccd_shares_models.png": "Expected GLOBE cluster shares of every model (columns) over clusters (rows).",
    "symkl_dendrogram.png": "Average-linkage clustering of the models by the symmetrized KL divergence between "
                            "their cluster shares.",
}


def run_figures(run: Run, out_dir: Path) -> list[Figure]:
    """A CCD-Bench run's figures: cluster shares with CIs and the position × cluster heatmap."""
    if not run.metrics or get_path(run.metrics, "expected") is None:
        return []
    plt, m, figs = pyplot(), run.metrics or {}, []
    title = f"{m.get('model', '')} on {m.get('bench', '')}"
    shares = get_path(m, "expected", "shares")
    if shares:
        clusters = [c for c in CLUSTERS if c in shares] + sorted(set(shares) - set(CLUSTERS))
        fig, ax = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
        bars(ax, shares, get_path(m, "ci95", "expected", "shares"), clusters)
        ax.set(ylabel="share of choices (expected)", title=f"GLOBE cluster shares — {title}")
        figs.append(save(fig, out_dir, "cluster_shares.png", CAPTIONS["cluster_shares.png"]))
    rate, clusters = position_cluster_rates(run)
    if rate.size:
        k = rate.shape[1]
        fig, ax = plt.subplots(figsize=(8, 5), constrained_layout=True)
        heatmap(ax, fig, rate, clusters, run.letters[:k], "P(choose position | cluster shown there)",
                 center=1 / k, fmt="{:.2f}")
        ax.set(xlabel="display position", title=f"Choice rate by position and cluster — {title}")
        figs.append(save(fig, out_dir, "position_cluster_heatmap.png", CAPTIONS["position_cluster_heatmap.png"]))
    return figs


def position_cluster_rates(run: Run) -> tuple[np.ndarray, list[str]]:
    """`[cluster, position]` expected probability of choosing position ℓ over the prompts that
    show cluster c at ℓ (NaN where c is never shown at ℓ), at the run's analysis temperature;
    clusters in canonical order. Empty when the run has no scored prompts."""
    table = run.table()
    if not len(table.prompt_id):
        return np.zeros((0, 0)), []
    probs = run.choice_probs(temperature=float(get_path(run.metrics, "temperature") or 1.0))
    groups = np.asarray(table.groups).astype(str)
    present = set(np.unique(groups))
    clusters = [c for c in CLUSTERS if c in present] + sorted(present - set(CLUSTERS))
    rate = np.full((len(clusters), groups.shape[1]), np.nan)
    for i, c in enumerate(clusters):
        shown = groups == c
        n = shown.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate[i] = np.where(n > 0, (probs * shown).sum(axis=0) / np.maximum(n, 1), np.nan)
    return rate, clusters


def sweep_figures(runs: Sequence[Run], labels: Sequence[str], out_dir: Path) -> list[Figure]:
    """CCD-Bench runs side by side: cluster shares by model and, from two runs on, the models
    clustered by symmetrized KL."""
    out_dir, plt, figs = Path(out_dir), pyplot(), []
    ccd = [(lab, r.metrics) for r, lab in zip(runs, labels) if r.metrics]
    shares = [(lab, s) for lab, m in ccd if (s := get_path(m, "expected", "shares"))]
    if shares:
        present = {c for _, s in shares for c in s}
        clusters = [c for c in CLUSTERS if c in present] + sorted(present - set(CLUSTERS))
        data = np.array([[num(s.get(c)) for _, s in shares] for c in clusters])
        fig, ax = plt.subplots(figsize=(2.5 + 0.9 * len(shares), 4.8), constrained_layout=True)
        heatmap(ax, fig, data, clusters, [lab for lab, _ in shares], "expected share")
        ax.set_title("GLOBE cluster shares by model", fontsize=9)
        figs.append(save(fig, out_dir, "ccd_shares_models.png", CAPTIONS["ccd_shares_models.png"]))
    if len(shares) >= 2:
        n = len(shares)
        dist = np.zeros((n, n))
        for i in range(n):
            for j in range(i + 1, n):
                dist[i, j] = dist[j, i] = symmetric_kl(shares[i][1], shares[j][1])
        if np.all(np.isfinite(dist)):
            fig, ax = plt.subplots(figsize=(6, 1.5 + 0.45 * n), constrained_layout=True)
            dendrogram(linkage(squareform(dist, checks=False), method="average"),
                       labels=[lab for lab, _ in shares], orientation="right", ax=ax)
            ax.set(xlabel="symmetrized KL (nats), average linkage", title="Models clustered by cluster shares")
            figs.append(save(fig, out_dir, "symkl_dendrogram.png", CAPTIONS["symkl_dendrogram.png"]))
    return figs
