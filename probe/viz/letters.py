"""What the reports say about the letter prior: the warning sentence that opens a report (and the
end-of-run summary), and the report section with the prior, the variance split and the
estimator — all read from `metrics.json` (`probe.metrics.letters` computes them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from probe.metrics.letters import NONE
from probe.viz.markdown import Footnotes, fmt, n_boot_of, table, undefined

RELIABLE = 0.5
"""Below this content reliability the debiased reading is called mostly noise
(`probe.metrics.letter_effect.RELIABLE`)."""


MEANINGS = {
    "letter_share": "expected and greedy metrics mostly measure the letter, not a content preference (a "
                    "letter-locked model reads as unbiased and consistent)",
    "prior": "expected and greedy metrics favour whatever option sits at {letter}; rotation balances that "
             "out of group totals only in expectation",
    "pick_share": "metrics of the {picks} picks mostly count letter {letter}, not a content preference",
}


@dataclass(frozen=True)
class LetterWarning:
    """The warning for one letter that drives the answers: one short sentence, then the details
    (each condition's numbers, then what each criterion that fired means for the metrics)."""

    sentence: str
    details: tuple[str, ...]


def letter_warnings(warnings: list[Mapping[str, Any]]) -> list[LetterWarning]:
    """One `LetterWarning` per letter that drives the answers (`metrics.json`'s `letter_warnings`)."""
    by_letter: dict[str, list[Mapping[str, Any]]] = {}
    for w in warnings:
        by_letter.setdefault(w["letter"], []).append(w)
    out = []
    for letter, ws in by_letter.items():
        read = "the `debiased` metrics and the content share first" if any(
            w.get("letter_share") is not None for w in ws) else "the `debiased` metrics first"
        sentence = f"letter {letter} drives the answers in {', '.join(w['condition'] for w in ws)}: read {read}."
        details = [f"{w['condition']}: {_detail(w)}" for w in ws]
        threshold = f"{ws[0].get('threshold', 2 * ws[0]['uniform']):.2f}, uniform {ws[0]['uniform']:.2f}"
        for reason, meaning in MEANINGS.items():
            conds = [w["condition"] for w in ws if reason in w.get("reasons", [])]
            if conds:
                name = _REASON_NAMES[reason].format(threshold=threshold)
                details.append(f"where {name} ({', '.join(conds)}), "
                               + meaning.format(letter=letter, picks=ws[0].get("picks", "greedy")))
        out.append(LetterWarning(sentence, tuple(details)))
    return out


_REASON_NAMES = {"letter_share": "the letter explains more than the content",
                 "prior": "the prior is above the threshold ({threshold})", "pick_share": "the picks pile on it"}


def _detail(w: Mapping[str, Any]) -> str:
    """The numbers of one condition's warning."""
    parts = []
    if w.get("prior") is not None:
        parts.append(f"prior {w['prior']:.2f}")
    if w.get("letter_share") is not None:
        parts.append(f"the letter explains {w['letter_share']:.0%} of the log-prob variance (log scale), "
                     f"the content {w['content_share']:.0%}")
    if w.get("mass_moved") is not None:
        parts.append(f"it moves {w['mass_moved']:.0%} of the probability")
    parts.append(f"{w['greedy_picks']} of {w['n_prompts']} {w.get('picks', 'greedy')} picks are {w['letter']}")
    return "; ".join(parts)


NO_SPLIT = {"count_fit": "no variance split: generated choices are one-hot, without log-probs to split",
            None: "no variance split: it needs items shown under all their orderings, and none is"}
NO_LETTER = "no such letter: this condition's questions have fewer options"
NO_PICKS = "no pick shares: no item is shown under all its orderings (every option once at every letter)"


def effect_lines(metrics: Mapping[str, Any]) -> list[str]:
    """Per condition, the letter's effect on the probability scale (`letter_effect.mass_moved`),
    the content reliability of the debiased distribution, and the groups left out at the floor."""
    out = []
    for cond, e in (metrics.get("letter_effect") or {}).items():
        if undefined(e.get("mass_moved")):
            continue
        text = (f"- {cond}: the letter moves {fmt(e['mass_moved'])} of a prompt's probability on average (total "
                "variation between each ordering's distribution and the debiased one)")
        rel = e.get("content_reliability")
        if not undefined(rel):
            text += f"; content reliability of the debiased distribution {fmt(rel)}" + (
                f" — below {RELIABLE}: the debiased reading is mostly rotation noise" if rel < RELIABLE else "")
        if e.get("n_floored"):
            text += f"; {e['n_floored']} groups with a letter at the log-prob floor left out of the split"
        out.append(text + ".")
    return out


def _letter_table(metrics: Mapping[str, Any], priors: Mapping[str, Any], letters: list[str]) -> list[str]:
    """Per condition: π with intervals, the top pick share, the variance split, the estimator."""
    cis, notes, n_boot, rows = metrics.get("ci95") or {}, Footnotes(), n_boot_of(metrics), []

    def with_ci(v: Any, interval: Any) -> str:
        if undefined(v) or n_boot == 0:
            return notes.value(v, NO_SPLIT[None])
        return f"{fmt(v)} {notes.interval(interval, v, NO_SPLIT[None], n_boot)}"

    for cond, prior in priors.items():
        split = (metrics.get("letter_split") or {}).get(cond) or {}
        pci = (cis.get("letter_prior") or {}).get(cond) or {}
        sci = (cis.get("letter_split") or {}).get(cond) or {}
        picks = (metrics.get("letter_pick_shares") or {}).get(cond) or {}
        top = max(picks, key=picks.get) if picks else None
        est = ((metrics.get("letter_prior_estimator") or {}).get(cond) or {}).get("estimator")
        no_split = NO_SPLIT.get(est, NO_SPLIT[None])
        rows.append([cond, *(with_ci(prior[x], pci.get(x)) if x in prior else notes.gap(NO_LETTER) for x in letters),
                     f"{top} {fmt(picks[top])}" if top else notes.gap(NO_PICKS),
                     *(with_ci(split[k], sci.get(k)) if split.get(k) is not None else notes.gap(no_split)
                       for k in ("letter", "letter_by_group", "content", "residual")),
                     est or notes.gap("no estimator recorded (metrics.json from an older probe)")])
    head = ["condition", *(f"π({x}) [95% CI]" for x in letters), "top pick share", "letter share",
            "letter × group", "content share", "residual", "estimator"]
    return [*table(head, rows), *notes.lines()]


GREEDY_MARK = " †"
GREEDY_NOTE = ("† greedy value of a condition where the letter drives the answers (see the warning above): it counts "
               "argmax letters, so it mostly reflects the letter, not a content preference.")


def no_debiased(metrics: Mapping[str, Any]) -> str:
    """Why a run has no `debiased` metrics: the conditions whose letter prior could not be
    estimated, with the estimator's reason."""
    reasons = [f"{c}: {e.get('reason')}" for c, e in (metrics.get("letter_prior_estimator") or {}).items()
               if e.get("estimator") == NONE]
    return "no debiased metrics: no letter prior could be estimated" + (f" ({'; '.join(reasons)})" if reasons else "")


def flagged_conditions(metrics: Mapping[str, Any]) -> set[str]:
    """Conditions with a letter warning: their greedy cells carry `GREEDY_MARK`."""
    return {w["condition"] for w in metrics.get("letter_warnings") or []}


def warnings_block(metrics: Mapping[str, Any]) -> list[str]:
    """Markdown lines opening a report when the letter drives the answers (empty otherwise): one
    sentence in a quote, then one compact table — a row per condition it drives (its option count,
    the letter, its prior against uniform, the letter's and the content's share of the variance,
    the probability it moves, the top pick) — and one line on what each criterion that fired
    means for the metrics."""
    warnings = list(metrics.get("letter_warnings") or [])
    if not warnings:
        return []
    letters = list(dict.fromkeys(str(w["letter"]) for w in warnings))
    read = "the `debiased` metrics and the content share first" if any(
        w.get("letter_share") is not None for w in warnings) else "the `debiased` metrics first"
    conds = ", ".join(str(w["condition"]) for w in warnings)
    who = f"Letter {letters[0]} drives" if len(letters) == 1 else f"Letters {', '.join(letters)} drive"
    head = ["condition", "options", "letter", "prior (uniform)", "letter share (content)", "moves", "top pick",
            "flagged by"]
    rows = [[w["condition"], str(round(1 / w["uniform"])), w["letter"], _pair(w.get("prior"), w["uniform"], "{:.2f}"),
             _pair(w.get("letter_share"), w.get("content_share"), "{:.0%}"),
             "–" if w.get("mass_moved") is None else f"{w['mass_moved']:.0%}",
             f"{w['letter']}: {w['greedy_picks']} of {w['n_prompts']} {w.get('picks', 'greedy')}",
             ", ".join(_FLAGS[r] for r in w.get("reasons", []))] for w in warnings]
    fired = [r for r in _FLAGS if any(r in w.get("reasons", []) for w in warnings)]
    meanings = "; ".join(f"{_FLAGS[r]}: " + _WHY[r].format(picks=warnings[0].get("picks", "greedy")) for r in fired)
    where = conds if len(warnings) <= 3 else f"{len(warnings)} conditions (table below)"
    return [f"> **Warning:** {who} the answers in {where}: read {read}.", "", *table(head, rows), "",
            f"Flagged by — {meanings}.", ""]


_WHY = {"letter_share": "the letter explains more of the log-prob variance than the content, so the metrics mostly "
                        "measure the letter",
        "prior": "its prior is above `analysis.letter_prior_ratio` × uniform, so the metrics favour the option at it",
        "pick_share": "the {picks} picks pile on it, so their metrics mostly count the letter"}


_FLAGS = {"letter_share": "letter share", "prior": "prior", "pick_share": "picks"}


def _pair(value: Any, other: Any, form: str) -> str:
    """`value (other)`, `–` where the value is missing."""
    if value is None:
        return "–"
    return form.format(value) + ("" if other is None else f" ({form.format(other)})")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def letter_section(metrics: Mapping[str, Any], reading: str, estimators: Mapping[str, str]) -> str:
    """`## Letter prior and content`: π per condition with intervals, the variance split, the
    estimator, and how to read them: the `reading` paragraph and a line per estimator used
    (`estimators`: its name → what it does), which the bench's builder words."""
    priors = metrics.get("letter_prior") or {}
    if not priors and not metrics.get("letter_prior_estimator"):
        return ""
    letters = list(dict.fromkeys(x for prior in priors.values() for x in prior))  # every letter any condition shows
    lines = ["", "## Letter prior and content", "", reading, "",
             *_letter_table(metrics, priors, letters)]
    missing = {c: e for c, e in (metrics.get("letter_prior_estimator") or {}).items() if e.get("estimator") == NONE}
    used = sorted({(e or {}).get("estimator") for e in (metrics.get("letter_prior_estimator") or {}).values()} - {None, NONE})
    lines += ["", *[f"- {e}: {estimators.get(e, e)}." for e in used]]
    lines += [f"- {c}: no letter prior and no `debiased` metrics — {e.get('reason')}." for c, e in missing.items()]
    lines += effect_lines(metrics)
    if "count_fit" in used:
        lines.append("- Generated choices have no variance split (one-hot choices have no log-probs).")
        fits = {c: e for c, e in (metrics.get("letter_prior_estimator") or {}).items() if e.get("separated")}
        lines += [f"- {c}: the picks are separable (deterministic picks locked onto letters), so no prior can be "
                  "fitted; π shows the pick shares." for c in fits]
    return "\n".join(lines) + "\n"
