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
    "count_fit": "fit of the choice counts: π by the pairwise conditional likelihood within each item's orderings "
                 "(free of the contents), contents by iterative proportional fitting with π held; with one ordering "
                 "per item, both jointly by IPF with content per label",
}


def warning_sentences(warnings: list[Mapping[str, Any]]) -> list[str]:
    """One plain sentence per letter that drives the answers: in which conditions, which criterion
    fired, how strong, and what it means for the cultural metrics."""
    by_letter: dict[str, list[Mapping[str, Any]]] = {}
    for w in warnings:
        by_letter.setdefault(w["letter"], []).append(w)
    out = []
    for letter, ws in by_letter.items():
        conds = ", ".join(w["condition"] for w in ws)
        parts = [f"letter {letter} drives the answers in {conds}: its prior is "
                 f"{_join(ws, 'prior', '{:.2f}')} (uniform {ws[0]['uniform']:.2f}"
                 + (f", threshold {ws[0]['threshold']:.2f})" if ws[0].get("threshold") is not None else ")")]
        share = [w for w in ws if "letter_share" in w.get("reasons", ["letter_share"])]
        if share:
            parts.append(f"the letter explains {_join(share, 'letter_share', '{:.0%}')} of the log-prob variance "
                         f"against {_join(share, 'content_share', '{:.0%}')} for the content")
        greedy = [w for w in ws if "greedy_prior" in w.get("reasons", [])]
        if greedy:
            parts.append(f"fitted to the greedy picks its prior is {_join(greedy, 'greedy_prior', '{:.2f}')}")
        parts.append(f"{sum(w['greedy_picks'] for w in ws)} of {sum(w['n_prompts'] for w in ws)} "
                     f"{ws[0].get('picks', 'greedy')} picks are {letter}")
        if share:
            meaning = ("Expected and greedy metrics there mostly measure the letter, not a cultural preference (a "
                       "letter-locked model reads as unbiased and consistent)")
        elif greedy and not any("prior" in w.get("reasons", []) for w in ws):
            meaning = (f"Greedy metrics there mostly count letter {letter}, not a cultural preference, while the "
                       "probabilities are less skewed")
        else:
            meaning = (f"Expected and greedy metrics there favour whatever option sits at {letter}; rotation "
                       "balances that out of culture totals only in expectation")
        out.append("; ".join(parts) + f". {meaning}: read the `debiased` metrics and the content share first.")
    return out


def _join(ws: list[Mapping[str, Any]], key: str, form: str) -> str:
    return ", ".join(form.format(w[key]) for w in ws)


GREEDY_MARK = " †"
GREEDY_NOTE = ("† greedy value of a condition where the letter drives the answers (see the warning above): it counts "
               "argmax letters, so it mostly reflects the letter, not a cultural preference.")


def flagged_conditions(metrics: Mapping[str, Any]) -> set[str]:
    """Conditions with a letter warning: their greedy cells carry `GREEDY_MARK`."""
    return {w["condition"] for w in metrics.get("letter_warnings") or []}


def warnings_block(metrics: Mapping[str, Any]) -> list[str]:
    """Markdown lines opening a report when the letter drives the answers (empty otherwise)."""
    found = warning_sentences(metrics.get("letter_warnings") or [])
    return [f"> **Warning:** {s[0].upper()}{s[1:]}" for s in found] + ([""] if found else [])


def letter_section(metrics: Mapping[str, Any]) -> str:
    """`## Letter prior and content`: π per condition with intervals, the variance split, the
    estimator, and how to read them."""
    priors = metrics.get("letter_prior") or {}
    if not priors and not metrics.get("letter_prior_estimator"):
        return ""
    cis = metrics.get("ci95") or {}
    letters = list(next(iter(priors.values()), {}))
    lines = ["", "## Letter prior and content", "",
             "Each letter log-prob is split into a letter effect (the prior π, the same for every item), a content "
             "effect (the option shown) and a residual. The letter share is the part common to the condition's "
             "items; letter × group is what differs between items (item-specific letter preferences; at DiSCo's "
             "C3 also the primacy of the fact in slot 1, whose letter moves with the context rotation). The "
             "`debiased` column of the tables above is every metric recomputed with the letter prior removed; "
             "metrics of position itself (letter probabilities, PPR) are 1/K there by construction. π (greedy) "
             "is the prior fitted to the greedy picks alone (what temperature-0 decoding does).", "",
             "| condition | " + " | ".join(f"π({x}) [95% CI]" for x in letters)
             + " | top π (greedy) | letter share | letter × group | content share | residual | estimator |",
             "|---" * (len(letters) + 7) + "|"]
    parts = ("letter", "letter_by_group", "content", "residual")
    for cond, prior in priors.items():
        split = (metrics.get("letter_split") or {}).get(cond) or {}
        pci = (cis.get("letter_prior") or {}).get(cond) or {}
        sci = (cis.get("letter_split") or {}).get(cond) or {}
        greedy = (metrics.get("letter_prior_greedy") or {}).get(cond) or {}
        top = max(greedy, key=greedy.get) if greedy else None
        est = ((metrics.get("letter_prior_estimator") or {}).get(cond) or {}).get("estimator", "–")
        lines.append(f"| {cond} | " + " | ".join(f"{fmt(prior[x])} {ci(pci.get(x))}" for x in letters) + " | "
                     + (f"{top} {fmt(greedy[top])}" if top else "–") + " | "
                     + " | ".join(f"{fmt(split.get(s))} {ci(sci.get(s))}" if split.get(s) is not None else "–"
                                  for s in parts) + f" | {est} |")
    missing = {c: e for c, e in (metrics.get("letter_prior_estimator") or {}).items() if e.get("estimator") == "none"}
    used = sorted({(e or {}).get("estimator") for e in (metrics.get("letter_prior_estimator") or {}).values()} - {None, "none"})
    lines += ["", *[f"- {e}: {ESTIMATORS.get(e, e)}." for e in used]]
    lines += [f"- {c}: no letter prior and no `debiased` metrics — {e.get('reason')}." for c, e in missing.items()]
    if "count_fit" in used:
        lines.append("- Generated choices have no variance split (one-hot choices have no log-probs).")
    return "\n".join(lines) + "\n"
