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
        f"Letter mass: mean {_fmt(m['letter_mass']['mean'])}, share of prompts below 0.5: "
        f"{_fmt(m['letter_mass']['share_below_half'])}; full-vocabulary argmax is a letter in "
        f"{_fmt(m.get('greedy_valid_rate'))} of prompts.", "",
        "| metric | condition | expected | 95% CI | greedy |", "|---|---|---|---|---|",
    ]
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
