"""DiSCo figures of one run and of a sweep, drawn from stored metrics only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from probe.metrics.core import get_path
from probe.results.run import Run
from probe.types import GroupNoun
from probe.viz.figures import (
    Figure,
    heatmap,
    lorenz,
    lorenz_axes,
    num,
    pyplot,
    reading_bars,
    save,
    yerr,
)

GROUPS = GroupNoun("culture", "cultures")
"""DiSCo's word for its groups in the generic reports and figures."""

CAPTIONS: dict[str, str] = {
    "csd.png": "Cultural selection distribution (CSD) with no context (C0): each culture's exposure-normalised "
               "share of expected selections (blue) and of the debiased ones, letter prior removed (orange), "
               "with 95% bootstrap CIs; the dotted line is the uniform share.",
    "lorenz.png": "Lorenz curve of the C0 cultural selection distribution: cultures sorted by share against "
                  "the cumulative share they receive; the further below the diagonal, the larger the Gini.",
    "letter_positions.png": "Expected probability of each answer letter without context (C0) and with the "
                            "four cultural facts in context (C3); a uniform model gives 1/K in every cell.",
    "ppr_by_rotation.png": "Primacy pick rate in C3 by context rotation j: expected probability of choosing "
                           "the option whose fact is listed first (dotted: chance, 1/K), with 95% CIs.",
    "csd_heatmap.png": "C0 cultural selection distribution of every model (columns) over cultures (rows).",
    "lorenz_models.png": "Lorenz curves of each model's C0 cultural selection distribution, Gini in the legend.",
    "sl_vs_psi.png": "Per culture, the location cue's stickiness lift SL (C1 compliance minus the C0 share) "
                     "against the prior stickiness index PSI (1 − C2 compliance), one colour per model.",
}


def run_figures(run: Run, out_dir: Path) -> list[Figure]:
    """A DiSCo run's figures (CSD with CIs, Lorenz curve, letter positions, C3 primacy by j),
    each skipped when its metrics are absent (e.g. a run on some conditions only)."""
    if not run.metrics or get_path(run.metrics, "expected") is None:
        return []
    plt, m, figs = pyplot(), run.metrics or {}, []
    title = f"{m.get('model', '')} on {m.get('bench', '')}"
    csd = get_path(m, "expected", "C0", "CSD")
    if csd:
        cultures = sorted(csd)
        fig, ax = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
        readings = [("expected", csd, get_path(m, "ci95", "expected", "C0", "CSD"))]
        debiased = get_path(m, "debiased", "C0", "CSD")
        if debiased:
            readings.append(("debiased", debiased, get_path(m, "ci95", "debiased", "C0", "CSD")))
        reading_bars(ax, readings, cultures)
        ax.set(ylabel="CSD (exposure-normalised share)", title=f"C0 cultural selection distribution — {title}")
        figs.append(save(fig, out_dir, "csd.png", CAPTIONS["csd.png"]))
        fig, ax = plt.subplots(figsize=(4.6, 4.6), constrained_layout=True)
        gini = num(get_path(m, "expected", "C0", "Gini"))
        lorenz(ax, [num(csd[c]) for c in cultures], f"C0 CSD (Gini {gini:.3f})")
        lorenz_axes(ax, GROUPS)
        ax.set_title(f"Lorenz curve — {title}", fontsize=9)
        figs.append(save(fig, out_dir, "lorenz.png", CAPTIONS["lorenz.png"]))
    rows = {c: p for c in ("C0", "C3") if (p := get_path(m, "expected", c, "letter_probs"))}
    if rows:
        letters = sorted({k for p in rows.values() for k in p})
        data = np.array([[num(p.get(k)) for k in letters] for p in rows.values()])
        fig, ax = plt.subplots(figsize=(1.2 * len(letters) + 2.5, 0.7 * len(rows) + 1.6), constrained_layout=True)
        heatmap(ax, fig, data, list(rows), letters, "P(letter)", center=1 / len(letters))
        ax.set_title(f"Letter-position probabilities — {title}", fontsize=9)
        figs.append(save(fig, out_dir, "letter_positions.png", CAPTIONS["letter_positions.png"]))
    ppr = get_path(m, "expected", "C3", "PPR_by_ctx_rotation")
    if ppr:
        js = sorted(ppr, key=int)
        values = np.array([num(ppr[j]) for j in js])
        fig, ax = plt.subplots(figsize=(4.6, 3.4), constrained_layout=True)
        ax.bar(np.arange(len(js)), values, capsize=3, color="tab:orange",
               yerr=yerr(values, get_path(m, "ci95", "expected", "C3", "PPR_by_ctx_rotation"), js))
        ax.axhline(1 / len(run.letters), color="grey", ls=":", lw=1, label=f"chance {1 / len(run.letters):.2f}")
        overall = get_path(m, "expected", "C3", "PPR")
        if overall is not None:
            ax.axhline(overall, color="tab:red", lw=1, label=f"all j: {overall:.3f}")
        ax.set_xticks(np.arange(len(js)), [f"j={j}" for j in js])
        ax.set(ylabel="P(choose slot-1 fact's option)", title=f"C3 primacy pick rate — {title}")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
        figs.append(save(fig, out_dir, "ppr_by_rotation.png", CAPTIONS["ppr_by_rotation.png"]))
    return figs


def sweep_figures(runs: Sequence[Run], labels: Sequence[str], out_dir: Path) -> list[Figure]:
    """DiSCo runs side by side (one label per run): the C0 CSD heatmap, Lorenz curves and the
    SL-vs-PSI scatter, each skipped when no run has its metrics."""
    out_dir, plt, figs = Path(out_dir), pyplot(), []
    disco = [(lab, r.metrics) for r, lab in zip(runs, labels) if r.metrics]
    csd = [(lab, c, num(get_path(m, "expected", "C0", "Gini"))) for lab, m in disco
           if (c := get_path(m, "expected", "C0", "CSD"))]
    if csd:
        cultures = sorted({c for _, d, _ in csd for c in d})
        data = np.array([[num(d.get(c)) for _, d, _ in csd] for c in cultures])
        fig, ax = plt.subplots(figsize=(2.5 + 0.9 * len(csd), 5), constrained_layout=True)
        heatmap(ax, fig, data, cultures, [lab for lab, _, _ in csd], "C0 CSD")
        ax.set_title("C0 cultural selection distribution by model", fontsize=9)
        figs.append(save(fig, out_dir, "csd_heatmap.png", CAPTIONS["csd_heatmap.png"]))
        fig, ax = plt.subplots(figsize=(5.5, 5.5), constrained_layout=True)
        for lab, d, g in csd:
            lorenz(ax, [num(v) for v in d.values()], f"{lab} (Gini {g:.3f})")
        lorenz_axes(ax, GROUPS)
        ax.set_title("Lorenz curves of the C0 CSD", fontsize=9)
        figs.append(save(fig, out_dir, "lorenz_models.png", CAPTIONS["lorenz_models.png"]))
    pairs = [(lab, sl, psi) for lab, m in disco
             if (sl := get_path(m, "expected", "C1", "SL")) and (psi := get_path(m, "expected", "C2", "PSI_by_culture"))]
    if pairs:
        fig, ax = plt.subplots(figsize=(6.5, 5), constrained_layout=True)
        for lab, sl, psi in pairs:
            cs = sorted(c for c in set(sl) & set(psi) if np.isfinite(num(sl[c]) + num(psi[c])))
            x, y = [num(sl[c]) for c in cs], [num(psi[c]) for c in cs]
            ax.scatter(x, y, label=lab, s=22)
            for c, xi, yi in zip(cs, x, y):
                ax.annotate(c, (xi, yi), fontsize=5, xytext=(2, 2), textcoords="offset points")
        ax.set(xlabel="SL = CR(C1, c) − CSD_C0(c)", ylabel="PSI = 1 − CR(C2, c)",
               title="Stickiness lift vs prior stickiness, per culture")
        ax.legend(fontsize=7)
        figs.append(save(fig, out_dir, "sl_vs_psi.png", CAPTIONS["sl_vs_psi.png"]))
    return figs
