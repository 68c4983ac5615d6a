"""The CCD-Bench markdown report, rendered only from a run's `metrics.json`."""

from __future__ import annotations

from typing import Any

from probe.metrics.core import get_path
from probe.viz.letters import GREEDY_MARK, GREEDY_NOTE, flagged_conditions
from probe.viz.markdown import ci, fmt


def report(m: dict[str, Any]) -> str:
    """CCD-Bench report: cluster shares with CIs, position bias, domain residuals, pluralism."""
    exp, gr, cis = m["expected"], m["greedy"], m.get("ci95", {}).get("expected", {})
    lines = [f"# CCD-Bench — {m['model']} on `{m['bench']}`", "",
             f"{m['n_items']} items, {m['n_prompts']} prompts."]
    if "letter_mass" in m:
        lines.append(f"Letter mass: mean {fmt(m['letter_mass']['mean'])}, share below 0.5: "
                     f"{fmt(m['letter_mass']['share_below_half'])}.")
    if "invalid_rate" in m:
        lines.append(f"Generation mode: {m['n_invalid']} invalid outputs ({fmt(m['invalid_rate'])}), "
                     "excluded from the shares below and listed at the end.")
    if "balance_score" in m:
        lines.append(f"Latin-square balance score: {m['balance_score']:.2f}%.")
    deb, dcis = m.get("debiased") or {}, m.get("ci95", {}).get("debiased", {})
    mark = GREEDY_MARK if flagged_conditions(m) else ""  # one condition: the design
    lines += ["", f"| cluster | share (expected) | 95% CI | share (greedy){mark} | share (debiased) | 95% CI | position V_c |",
              "|---|---|---|---|---|---|---|"]
    for c, v in sorted(exp["shares"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {c} | {fmt(v)} | {ci(get_path(cis, f'shares.{c}'))} | {fmt(gr['shares'].get(c))} | "
                     f"{fmt(get_path(deb, f'shares.{c}'))} | {ci(get_path(dcis, f'shares.{c}'))} | "
                     f"{fmt(exp['cluster_position_V'].get(c))} |")
    lines += ["", "| metric | expected | 95% CI | greedy |", "|---|---|---|---|"]
    for key, label in (("entropy_bits", "Shannon entropy (bits, max 3.32)"), ("gini", "Gini of cluster counts"),
                       ("position_V", "Cramér's V, position (<.10 negligible)"),
                       ("mean_cluster_position_V", "mean per-cluster position V"),
                       ("position_chi2", "χ² over positions"), ("domain_chi2", "χ² domain × cluster")):
        lines.append(f"| {label} | {fmt(exp.get(key))} | {ci(cis.get(key))} | {fmt(gr.get(key))}{mark} |")
    if mark:
        lines += ["", GREEDY_NOTE]
    lines += ["", "χ² statistics and residuals count each item once (its choices divided by its number of "
                  "prompts), so the cyclic and Latin-square designs report on the paper's one-ordering-per-item "
                  "scale; shares and V do not depend on it."]
    lines += ["", "Position shares A–J (expected): " + ", ".join(fmt(v) for v in exp["position_shares"])]
    residuals = exp.get("domain_residuals", {})
    if residuals:
        clusters = list(exp["shares"])
        lines += ["", "## Standardized residuals, domain × cluster (expected)", "",
                  "| domain | " + " | ".join(clusters) + " |", "|---" * (len(clusters) + 1) + "|"]
        for d, row in residuals.items():
            lines.append(f"| {d} | " + " | ".join(fmt(row.get(c), 2) for c in clusters) + " |")
    if "pluralism" in m:
        p = m["pluralism"]
        lines += ["", "## Rationale pluralism", "",
                  f"{p['n_rationales']} rationales judged ({p['n_judge_errors']} judge errors); "
                  f"share citing ≥ 2 GLOBE dimensions: {fmt(p['rate'])}.", ""]
        lines += [f"- {a} + {b}: {n}" for a, b, n in p["top_pairs"]]
    return "\n".join(lines) + "\n"
