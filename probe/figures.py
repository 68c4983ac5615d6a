"""Figures of one run and of a sweep, drawn from stored run files only (no model).

`run_figures` draws a run's figures from its `metrics.json` (and, for the CCD position ×
cluster heatmap, its prompts and scores tables); `sweep_figures` compares runs side by side;
`temperature_curve` re-analyses stored log-probs at several temperatures. Every function
returns `Figure`s (file name, path, one-sentence caption) and skips a figure whose inputs are
absent (a generation run with no valid answer, a DiSCo run scored on some conditions only).
`CAPTIONS` holds every caption, for reports and the README.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probe.api import Run, load_run
from probe.metrics.ccd import CLUSTERS, symmetric_kl

CAPTIONS: dict[str, str] = {
    "csd.png": "Cultural selection distribution with no context (C0): each culture's exposure-normalised "
               "share of expected selections, with 95% bootstrap CIs; the dotted line is the uniform share.",
    "lorenz.png": "Lorenz curve of the C0 cultural selection distribution: cultures sorted by share against "
                  "the cumulative share they receive; the further below the diagonal, the larger the Gini.",
    "letter_positions.png": "Expected probability of each answer letter without context (C0) and with the "
                            "four cultural facts in context (C3); a uniform model gives 1/K in every cell.",
    "ppr_by_rotation.png": "Primacy pick rate in C3 by context rotation j: expected probability of choosing "
                           "the option whose fact is listed first (dotted: chance, 1/K), with 95% CIs.",
    "cluster_shares.png": "Expected share of each GLOBE cluster among the model's choices, with 95% bootstrap "
                          "CIs; the dotted line is the uniform share.",
    "position_cluster_heatmap.png": "Choice rate by display position and cluster: the expected probability of "
                                    "choosing position ℓ among prompts that show cluster c there (1/K = no "
                                    "preference).",
    "csd_heatmap.png": "C0 cultural selection distribution of every model (columns) over cultures (rows).",
    "lorenz_models.png": "Lorenz curves of each model's C0 cultural selection distribution, Gini in the legend.",
    "sl_vs_psi.png": "Per culture, the location cue's stickiness lift SL (C1 compliance minus the C0 share) "
                     "against the prior stickiness index PSI (1 − C2 compliance), one colour per model.",
    "ccd_shares_models.png": "Expected GLOBE cluster shares of every model (columns) over clusters (rows).",
    "symkl_dendrogram.png": "Average-linkage clustering of the models by the symmetrized KL divergence between "
                            "their cluster shares.",
    "temperature_curve.png": "Headline metrics recomputed from the stored letter log-probs at each sampling "
                             "temperature T (log scale); T = 1 is the run's own distribution.",
}


@dataclass(frozen=True)
class Figure:
    """One written PNG and what it shows."""

    name: str
    path: Path
    caption: str


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _get(tree: Any, *keys: str) -> Any:
    """`tree[k0][k1]…`, or None where a level is missing or null."""
    for key in keys:
        if not isinstance(tree, Mapping) or tree.get(key) is None:
            return None
        tree = tree[key]
    return tree


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _save(fig: Any, out_dir: Path, name: str) -> Figure:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    fig.savefig(path, dpi=120)
    _plt().close(fig)
    return Figure(name=name, path=path, caption=CAPTIONS[name])


def _yerr(values: np.ndarray, ci: Mapping[str, Any] | None, keys: Sequence[str]) -> np.ndarray | None:
    """`[2, n]` error-bar lengths from `{key: [lo, hi]}` (0 where a bound is missing)."""
    if not ci:
        return None
    bounds = np.array([[_num(b) for b in (ci.get(k) or [None, None])] for k in keys])
    err = np.stack([values - bounds[:, 0], bounds[:, 1] - values])
    return np.clip(np.nan_to_num(err, nan=0.0), 0.0, None)


def _bars(ax: Any, shares: Mapping[str, Any], ci: Mapping[str, Any] | None, keys: Sequence[str]) -> None:
    values = np.array([_num(shares[k]) for k in keys])
    ax.bar(np.arange(len(keys)), values, yerr=_yerr(values, ci, keys), capsize=3, color="tab:blue")
    ax.axhline(1 / len(keys), color="grey", ls=":", lw=1)
    ax.set_xticks(np.arange(len(keys)), keys, rotation=45, ha="right")


def _lorenz(ax: Any, shares: Sequence[float], label: str) -> None:
    v = np.sort(np.asarray([s for s in shares if np.isfinite(s)], dtype=float))
    if not len(v):
        return
    x = np.linspace(0, 1, len(v) + 1)
    ax.plot(x, np.concatenate([[0.0], np.cumsum(v) / v.sum()]), marker="o", ms=3, label=label)


def _lorenz_axes(ax: Any) -> None:
    ax.plot([0, 1], [0, 1], color="grey", ls=":", lw=1, label="equality")
    ax.set(xlabel="cumulative share of cultures (ascending)", ylabel="cumulative share of selections",
           xlim=(0, 1), ylim=(0, 1))
    ax.set_aspect("equal")
    ax.legend(fontsize=7)


def _heatmap(ax: Any, fig: Any, data: np.ndarray, rows: Sequence[str], cols: Sequence[str], label: str,
             center: float | None = None, fmt: str = "{:.3f}") -> None:
    """Annotated heatmap; `center` gives a diverging colour scale symmetric around it."""
    from matplotlib.colors import TwoSlopeNorm

    kw: dict[str, Any] = {"cmap": "viridis"}
    finite = data[np.isfinite(data)]
    if center is not None and finite.size:
        kw = {"cmap": "RdBu_r", "norm": TwoSlopeNorm(center, min(float(finite.min()), center - 1e-9),
                                                     max(float(finite.max()), center + 1e-9))}
    im = ax.imshow(data, aspect="auto", **kw)
    long = max(map(len, cols)) > 3
    ax.set_xticks(np.arange(len(cols)), cols, rotation=45 if long else 0, ha="right" if long else "center")
    ax.set_yticks(np.arange(len(rows)), rows)
    if data.size <= 240:
        for (i, j), v in np.ndenumerate(data):
            if np.isfinite(v):
                ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=8 if data.size <= 40 else 6,
                        bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.5})
    fig.colorbar(im, ax=ax, label=label)


def run_figures(run_dir: Path, out_dir: Path) -> list[Figure]:
    """Every figure of one run (DiSCo or CCD-Bench) whose metrics are stored; other benches: none."""
    run = load_run(run_dir)
    if not run.metrics or _get(run.metrics, "expected") is None:
        return []
    if run.bench_kind == "disco":
        return _disco_figures(run, Path(out_dir))
    if run.bench_kind == "ccd":
        return _ccd_figures(run, Path(out_dir))
    return []


def _disco_figures(run: Run, out_dir: Path) -> list[Figure]:
    plt, m, figs = _plt(), run.metrics or {}, []
    title = f"{m.get('model', '')} on {m.get('bench', '')}"
    csd = _get(m, "expected", "C0", "CSD")
    if csd:
        cultures = sorted(csd)
        fig, ax = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
        _bars(ax, csd, _get(m, "ci95", "expected", "C0", "CSD"), cultures)
        ax.set(ylabel="CSD (exposure-normalised share)", title=f"C0 cultural selection distribution — {title}")
        figs.append(_save(fig, out_dir, "csd.png"))
        fig, ax = plt.subplots(figsize=(4.6, 4.6), constrained_layout=True)
        gini = _num(_get(m, "expected", "C0", "Gini"))
        _lorenz(ax, [_num(csd[c]) for c in cultures], f"C0 CSD (Gini {gini:.3f})")
        _lorenz_axes(ax)
        ax.set_title(f"Lorenz curve — {title}", fontsize=9)
        figs.append(_save(fig, out_dir, "lorenz.png"))
    rows = {c: p for c in ("C0", "C3") if (p := _get(m, "expected", c, "letter_probs"))}
    if rows:
        letters = sorted({k for p in rows.values() for k in p})
        data = np.array([[_num(p.get(k)) for k in letters] for p in rows.values()])
        fig, ax = plt.subplots(figsize=(1.2 * len(letters) + 2.5, 0.7 * len(rows) + 1.6), constrained_layout=True)
        _heatmap(ax, fig, data, list(rows), letters, "P(letter)", center=1 / len(letters))
        ax.set_title(f"Letter-position probabilities — {title}", fontsize=9)
        figs.append(_save(fig, out_dir, "letter_positions.png"))
    ppr = _get(m, "expected", "C3", "PPR_by_ctx_rotation")
    if ppr:
        js = sorted(ppr, key=int)
        values = np.array([_num(ppr[j]) for j in js])
        fig, ax = plt.subplots(figsize=(4.6, 3.4), constrained_layout=True)
        ax.bar(np.arange(len(js)), values, capsize=3, color="tab:orange",
               yerr=_yerr(values, _get(m, "ci95", "expected", "C3", "PPR_by_ctx_rotation"), js))
        ax.axhline(1 / len(run.letters), color="grey", ls=":", lw=1, label=f"chance {1 / len(run.letters):.2f}")
        overall = _get(m, "expected", "C3", "PPR")
        if overall is not None:
            ax.axhline(overall, color="tab:red", lw=1, label=f"all j: {overall:.3f}")
        ax.set_xticks(np.arange(len(js)), [f"j={j}" for j in js])
        ax.set(ylabel="P(choose slot-1 fact's option)", title=f"C3 primacy pick rate — {title}")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
        figs.append(_save(fig, out_dir, "ppr_by_rotation.png"))
    return figs


def _ccd_figures(run: Run, out_dir: Path) -> list[Figure]:
    plt, m, figs = _plt(), run.metrics or {}, []
    title = f"{m.get('model', '')} on {m.get('bench', '')}"
    shares = _get(m, "expected", "shares")
    if shares:
        clusters = [c for c in CLUSTERS if c in shares] + sorted(set(shares) - set(CLUSTERS))
        fig, ax = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
        _bars(ax, shares, _get(m, "ci95", "expected", "shares"), clusters)
        ax.set(ylabel="share of choices (expected)", title=f"GLOBE cluster shares — {title}")
        figs.append(_save(fig, out_dir, "cluster_shares.png"))
    rate, clusters = position_cluster_rates(run)
    if rate.size:
        k = rate.shape[1]
        fig, ax = plt.subplots(figsize=(8, 5), constrained_layout=True)
        _heatmap(ax, fig, rate, clusters, run.letters[:k], "P(choose position | cluster shown there)",
                 center=1 / k, fmt="{:.2f}")
        ax.set(xlabel="display position", title=f"Choice rate by position and cluster — {title}")
        figs.append(_save(fig, out_dir, "position_cluster_heatmap.png"))
    return figs


def position_cluster_rates(run: Run) -> tuple[np.ndarray, list[str]]:
    """`[cluster, position]` expected probability of choosing position ℓ over the prompts that
    show cluster c at ℓ (NaN where c is never shown at ℓ), at the run's analysis temperature;
    clusters in canonical order. Empty when the run has no scored prompts."""
    table = run.table()
    if not len(table.prompt_id):
        return np.zeros((0, 0)), []
    probs = run.choice_probs(temperature=float(_get(run.metrics, "temperature") or 1.0))
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
    """Figures comparing runs (one label per run); each figure uses the runs of its bench kind
    that have the metrics it needs, and is skipped when none (the dendrogram: fewer than two) do."""
    if len(runs) != len(labels):
        raise ValueError(f"sweep_figures: {len(runs)} runs but {len(labels)} labels")
    out_dir, plt, figs = Path(out_dir), _plt(), []
    disco = [(lab, r.metrics) for r, lab in zip(runs, labels) if r.bench_kind == "disco" and r.metrics]
    ccd = [(lab, r.metrics) for r, lab in zip(runs, labels) if r.bench_kind == "ccd" and r.metrics]
    csd = [(lab, c, _num(_get(m, "expected", "C0", "Gini"))) for lab, m in disco
           if (c := _get(m, "expected", "C0", "CSD"))]
    if csd:
        cultures = sorted({c for _, d, _ in csd for c in d})
        data = np.array([[_num(d.get(c)) for _, d, _ in csd] for c in cultures])
        fig, ax = plt.subplots(figsize=(2.5 + 0.9 * len(csd), 5), constrained_layout=True)
        _heatmap(ax, fig, data, cultures, [lab for lab, _, _ in csd], "C0 CSD")
        ax.set_title("C0 cultural selection distribution by model", fontsize=9)
        figs.append(_save(fig, out_dir, "csd_heatmap.png"))
        fig, ax = plt.subplots(figsize=(5.5, 5.5), constrained_layout=True)
        for lab, d, g in csd:
            _lorenz(ax, [_num(v) for v in d.values()], f"{lab} (Gini {g:.3f})")
        _lorenz_axes(ax)
        ax.set_title("Lorenz curves of the C0 CSD", fontsize=9)
        figs.append(_save(fig, out_dir, "lorenz_models.png"))
    pairs = [(lab, sl, psi) for lab, m in disco
             if (sl := _get(m, "expected", "C1", "SL")) and (psi := _get(m, "expected", "C2", "PSI_by_culture"))]
    if pairs:
        fig, ax = plt.subplots(figsize=(6.5, 5), constrained_layout=True)
        for lab, sl, psi in pairs:
            cs = sorted(c for c in set(sl) & set(psi) if np.isfinite(_num(sl[c]) + _num(psi[c])))
            x, y = [_num(sl[c]) for c in cs], [_num(psi[c]) for c in cs]
            ax.scatter(x, y, label=lab, s=22)
            for c, xi, yi in zip(cs, x, y):
                ax.annotate(c, (xi, yi), fontsize=5, xytext=(2, 2), textcoords="offset points")
        ax.set(xlabel="SL = CR(C1, c) − CSD_C0(c)", ylabel="PSI = 1 − CR(C2, c)",
               title="Stickiness lift vs prior stickiness, per culture")
        ax.legend(fontsize=7)
        figs.append(_save(fig, out_dir, "sl_vs_psi.png"))
    shares = [(lab, s) for lab, m in ccd if (s := _get(m, "expected", "shares"))]
    if shares:
        present = {c for _, s in shares for c in s}
        clusters = [c for c in CLUSTERS if c in present] + sorted(present - set(CLUSTERS))
        data = np.array([[_num(s.get(c)) for _, s in shares] for c in clusters])
        fig, ax = plt.subplots(figsize=(2.5 + 0.9 * len(shares), 4.8), constrained_layout=True)
        _heatmap(ax, fig, data, clusters, [lab for lab, _ in shares], "expected share")
        ax.set_title("GLOBE cluster shares by model", fontsize=9)
        figs.append(_save(fig, out_dir, "ccd_shares_models.png"))
    if len(shares) >= 2:
        from scipy.cluster.hierarchy import dendrogram, linkage
        from scipy.spatial.distance import squareform

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
            figs.append(_save(fig, out_dir, "symkl_dendrogram.png"))
    return figs


_CURVE_METRICS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "disco": [("KL(CSD‖uniform), C0, nats", ("C0", "KL")), ("PSI, C2", ("C2", "PSI"))],
    "ccd": [("entropy of cluster shares, bits", ("entropy_bits",)), ("Cramér's V, position", ("position_V",))],
}


def temperature_curve(run: Run, temperatures: Sequence[float], out_dir: Path) -> Figure | None:
    """Headline metrics (DiSCo: C0 KL and C2 PSI; CCD: entropy and position V), expected and
    greedy, recomputed at each temperature from the stored log-probs (no bootstrap). None for a
    generation run (one-hot choices do not depend on T), another bench, or no metric defined."""
    temps = sorted({float(t) for t in temperatures})
    if any(t <= 0 or not np.isfinite(t) for t in temps):
        raise ValueError(f"temperature_curve: temperatures must be positive, got {list(temperatures)}")
    specs = _CURVE_METRICS.get(run.bench_kind)
    if not specs or not temps or run.scores is None or not len(run.table().prompt_id):
        return None
    trees = [run.recompute_metrics(analysis={"temperature": t, "n_boot": 0}) for t in temps]
    series = []
    for label, keys in specs:
        exp = np.array([_num(_get(tr, "expected", *keys)) for tr in trees])
        greedy = _num(_get(trees[0], "greedy", *keys))
        if np.isfinite(exp).any():
            series.append((label, exp, greedy))
    if not series:
        return None
    plt = _plt()
    from matplotlib.ticker import NullFormatter

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
    return _save(fig, Path(out_dir), "temperature_curve.png")
