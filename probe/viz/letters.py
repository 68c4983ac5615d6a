"""What the reports say about the letter prior: the warning sentence that opens a report (and the
end-of-run summary), and the report section with the prior, the variance split and the
estimator — all read from `metrics.json` (`probe.metrics.letters` computes them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.viz.markdown import ci, fmt

ESTIMATORS = {
    "rotations": "closed form over the orderings of each item (every option once at every letter)",
    "prior_division": "prior pooled over the run's balanced design, each prompt debiased as p / π renormalised "
                      "(PriDe); assumes the design balances content across letters",
    "mixed": "closed form where an item has all orderings, p / π elsewhere",
    "count_fit": "log-linear fit of the choice counts (iterative proportional fitting)",
}


def warning_sentences(warnings: list[Mapping[str, Any]]) -> list[str]:
    """One plain sentence per letter that drives the answers: in which conditions, how strong,
    and what it means for the cultural metrics."""
    by_letter: dict[str, list[Mapping[str, Any]]] = {}
    for w in warnings:
        by_letter.setdefault(w["letter"], []).append(w)
    out = []
    for letter, ws in by_letter.items():
        conds = ", ".join(w["condition"] for w in ws)
        parts = [f"letter {letter} drives the answers in {conds}: its prior is "
                 f"{_join(ws, 'prior', '{:.2f}')} (uniform {ws[0]['uniform']:.2f})"]
        split = [w for w in ws if w.get("letter_share") is not None]
        if split:
            parts.append(f"the letter explains {_join(split, 'letter_share', '{:.0%}')} of the log-prob variance "
                         f"against {_join(split, 'content_share', '{:.0%}')} for the content")
        parts.append(f"{sum(w['greedy_picks'] for w in ws)} of {sum(w['n_prompts'] for w in ws)} "
                     f"{ws[0].get('picks', 'greedy')} picks are {letter}")
        out.append("; ".join(parts) + ". Expected and greedy metrics there mostly measure the letter, not a "
                   "cultural preference (a letter-locked model reads as unbiased and consistent): read the "
                   "`debiased` metrics and the content share first.")
    return out


def _join(ws: list[Mapping[str, Any]], key: str, form: str) -> str:
    return ", ".join(form.format(w[key]) for w in ws)


def warnings_block(metrics: Mapping[str, Any]) -> list[str]:
    """Markdown lines opening a report when the letter drives the answers (empty otherwise)."""
    found = warning_sentences(metrics.get("letter_warnings") or [])
    return [f"> **Warning:** {s[0].upper()}{s[1:]}" for s in found] + ([""] if found else [])


def letter_section(metrics: Mapping[str, Any]) -> str:
    """`## Letter prior and content`: π per condition with intervals, the variance split, the
    estimator, and how to read them."""
    priors = metrics.get("letter_prior") or {}
    if not priors:
        return ""
    cis = metrics.get("ci95") or {}
    letters = list(next(iter(priors.values())))
    lines = ["", "## Letter prior and content", "",
             "Each letter log-prob is split into a letter effect (the prior π, the same for every item), a content "
             "effect (the option shown) and a residual. The `debiased` column of the tables above is every metric "
             "recomputed with the letter prior removed; metrics of position itself (letter probabilities, PPR) are "
             "1/K there by construction.", "",
             "| condition | " + " | ".join(f"π({x}) [95% CI]" for x in letters)
             + " | letter share | content share | residual | estimator |",
             "|---" * (len(letters) + 5) + "|"]
    for cond, prior in priors.items():
        split = (metrics.get("letter_split") or {}).get(cond) or {}
        pci = (cis.get("letter_prior") or {}).get(cond) or {}
        sci = (cis.get("letter_split") or {}).get(cond) or {}
        est = ((metrics.get("letter_prior_estimator") or {}).get(cond) or {}).get("estimator", "–")
        lines.append(f"| {cond} | " + " | ".join(f"{fmt(prior[x])} {ci(pci.get(x))}" for x in letters) + " | "
                     + " | ".join(f"{fmt(split.get(s))} {ci(sci.get(s))}" if split else "–"
                                  for s in ("letter", "content", "residual")) + f" | {est} |")
    used = sorted({(e or {}).get("estimator") for e in (metrics.get("letter_prior_estimator") or {}).values()} - {None})
    lines += ["", *[f"- {e}: {ESTIMATORS.get(e, e)}." for e in used]]
    if "count_fit" in used:
        lines.append("- Generated choices have no variance split (one-hot choices have no log-probs).")
    return "\n".join(lines) + "\n"
