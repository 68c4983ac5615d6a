"""Markdown reports, rendered only from a run's `metrics.json` contents."""

from __future__ import annotations

from typing import Any


def _fmt(v: Any, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _ci(ci: Any) -> str:
    if not ci or ci[0] is None:
        return "–"
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _get(tree: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


HEADLINE = [
    ("C0.KL", "KL(CSD‖uniform), nats", "C0"),
    ("C0.Gini", "Gini of CSD", "C0"),
    ("C1.CR", "Compliance rate (location)", "C1"),
    ("C2.CR", "Compliance rate (location + intent)", "C2"),
    ("C2.PSI", "Prior stickiness index", "C2"),
    ("C0.SPD", "SPD high − low resource", "C0"),
    ("C2.SPD", "SPD high − low resource", "C2"),
    ("SPD_reduction", "SPD(C0) − SPD(C2)", "–"),
    ("C3.JSD", "JSD(C3‖C0), bits", "C3"),
    ("C3.JSD_aligned", "JSD(C3 j=0‖C0), bits", "C3"),
    ("C3.PPR", "Primacy pick rate (random 0.25)", "C3"),
    ("C3.CSC", "Culture selection consistency", "C3"),
]


def disco_report(m: dict[str, Any]) -> str:
    """DiSCo report: headline metrics with CIs, per-culture steering table, position checks."""
    exp, gr, ci = m["expected"], m["greedy"], m.get("ci95", {}).get("expected", {})
    lines = [
        f"# DiSCo — {m['model']} on `{m['bench']}`", "",
        f"{m['n_items']} items, {m['n_prompts']} prompts. Expected = probability-weighted selections "
        f"(temperature {m.get('temperature', 1.0)}); greedy = argmax letter (temperature-0 protocol).", "",
    ]
    if "letter_mass" in m:
        lines += [f"Letter mass: mean {_fmt(m['letter_mass']['mean'])}, share of prompts below 0.5: "
                  f"{_fmt(m['letter_mass']['share_below_half'])}; full-vocabulary argmax is a letter in "
                  f"{_fmt(m.get('greedy_valid_rate'))} of prompts.", ""]
    if "invalid_rate" in m:
        lines += [f"Generation mode: {m['n_invalid']} of {m['n_prompts']} outputs invalid "
                  f"({_fmt(m['invalid_rate'])}), excluded from the metrics and listed at the end.", ""]
    lines += ["| metric | condition | expected | 95% CI | greedy |", "|---|---|---|---|---|"]
    for path, label, cond in HEADLINE:
        if _get(exp, path) is not None:
            lines.append(f"| {label} | {cond} | {_fmt(_get(exp, path))} | {_ci(_get(ci, path))} | "
                         f"{_fmt(_get(gr, path))} |")
    lines += ["", "## Per culture (expected)", "",
              "| culture | CSD C0 | CR C1 | CR C2 | SL | gain C2−C1 | PSI | CSD C3 |",
              "|---|---|---|---|---|---|---|---|"]
    cultures = sorted(set(_get(exp, "C0.CSD") or {}) | set(_get(exp, "C1.CR_by_culture") or {}))
    for c in cultures:
        cols = ["C0.CSD", "C1.CR_by_culture", "C2.CR_by_culture", "C1.SL", "C2.gain_by_culture",
                "C2.PSI_by_culture", "C3.CSD"]
        lines.append(f"| {c} | " + " | ".join(_fmt(_get(exp, f"{p}.{c}") if _get(exp, p) else None)
                                               for p in cols) + " |")
    lines += ["", "## Position checks (expected)", "", "| | A | B | C | D |", "|---|---|---|---|---|"]
    for cond in ("C0", "C3"):
        lp = _get(exp, f"{cond}.letter_probs")
        if lp:
            lines.append(f"| P(letter) {cond} | " + " | ".join(_fmt(lp[k]) for k in sorted(lp)) + " |")
    ppr = _get(exp, "C3.PPR_by_ctx_rotation")
    if ppr:
        lines.append("| PPR by context rotation j | " + " | ".join(_fmt(ppr[j]) for j in sorted(ppr)) + " |")
        ent = _get(exp, "C3.entropy_by_ctx_rotation")
        lines.append("| H/ln 4 by j | " + " | ".join(_fmt(ent[j]) for j in sorted(ent)) + " |")
    return "\n".join(lines) + "\n"


def ccd_report(m: dict[str, Any]) -> str:
    """CCD-Bench report: cluster shares with CIs, position bias, domain residuals, pluralism."""
    exp, gr, ci = m["expected"], m["greedy"], m.get("ci95", {}).get("expected", {})
    lines = [f"# CCD-Bench — {m['model']} on `{m['bench']}`", "",
             f"{m['n_items']} items, {m['n_prompts']} prompts."]
    if "letter_mass" in m:
        lines.append(f"Letter mass: mean {_fmt(m['letter_mass']['mean'])}, share below 0.5: "
                     f"{_fmt(m['letter_mass']['share_below_half'])}.")
    if "invalid_rate" in m:
        lines.append(f"Generation mode: {m['n_invalid']} invalid outputs ({_fmt(m['invalid_rate'])}), "
                     "excluded from the shares below and listed at the end.")
    if "balance_score" in m:
        lines.append(f"Latin-square balance score: {m['balance_score']:.2f}%.")
    lines += ["", "| cluster | share (expected) | 95% CI | share (greedy) | position V_c |",
              "|---|---|---|---|---|"]
    for c, v in sorted(exp["shares"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {c} | {_fmt(v)} | {_ci(_get(ci, f'shares.{c}'))} | {_fmt(gr['shares'].get(c))} | "
                     f"{_fmt(exp['cluster_position_V'].get(c))} |")
    lines += ["", "| metric | expected | 95% CI | greedy |", "|---|---|---|---|"]
    for key, label in (("entropy_bits", "Shannon entropy (bits, max 3.32)"), ("gini", "Gini of cluster counts"),
                       ("position_V", "Cramér's V, position (<.10 negligible)"),
                       ("mean_cluster_position_V", "mean per-cluster position V"),
                       ("position_chi2", "χ² over positions"), ("domain_chi2", "χ² domain × cluster")):
        lines.append(f"| {label} | {_fmt(exp.get(key))} | {_ci(ci.get(key))} | {_fmt(gr.get(key))} |")
    lines += ["", "Position shares A–J (expected): " + ", ".join(_fmt(v) for v in exp["position_shares"])]
    residuals = exp.get("domain_residuals", {})
    if residuals:
        clusters = list(exp["shares"])
        lines += ["", "## Standardized residuals, domain × cluster (expected)", "",
                  "| domain | " + " | ".join(clusters) + " |", "|---" * (len(clusters) + 1) + "|"]
        for d, row in residuals.items():
            lines.append(f"| {d} | " + " | ".join(_fmt(row.get(c), 2) for c in clusters) + " |")
    if "pluralism" in m:
        p = m["pluralism"]
        lines += ["", "## Rationale pluralism", "",
                  f"{p['n_rationales']} rationales judged ({p['n_judge_errors']} judge errors); "
                  f"share citing ≥ 2 GLOBE dimensions: {_fmt(p['rate'])}.", ""]
        lines += [f"- {a} + {b}: {n}" for a, b, n in p["top_pairs"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """`python -m probe.report <multirun_dir or run dirs…> [--out DIR]`: the sweep report."""
    import argparse
    import sys
    from pathlib import Path

    from probe.errors import ProbeInputError
    from probe.sweep import write_sweep_report

    parser = argparse.ArgumentParser(prog="python -m probe.report", description=main.__doc__)
    parser.add_argument("paths", nargs="+", type=Path, help="a multirun directory and/or run directories")
    parser.add_argument("--out", type=Path, default=None, help="default: <first path>/report")
    args = parser.parse_args(argv)
    out = args.out or args.paths[0] / "report"
    try:
        html = write_sweep_report(args.paths, out)
    except ProbeInputError as e:
        print(f"probe.report: error: {e}", file=sys.stderr)
        return 2
    print(f"probe.report: wrote {html} and {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
