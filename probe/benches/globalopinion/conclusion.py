"""What a GlobalOpinionQA report says first, in plain words: which ranked countries the model's
answers gain most and least on over a uniform model (`lift`; only countries with enough questions
and, by default, national samples: `ranking.py`), the pooled and macro means, whether naming a
country moves the model toward *that* country (`specificity.py`), how the survey-order reading
compares — once for the `expected` reading and once, said short, for the `debiased` one — and the
terms the report abbreviates, defined before any table uses them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.benches.globalopinion.countries import table_name
from probe.benches.globalopinion.ranking import RANK_BY, condition_of
from probe.metrics.core import get_path
from probe.viz.letters import no_debiased
from probe.viz.markdown import fmt, opening_paragraphs, side, undefined, value_ci

TERMS = (
    ("similarity", "1 − Jensen–Shannon distance (base 2) between the model's distribution over a question's "
                   "options and a country's answer shares (1 = identical, 0 = no option in common)"),
    ("uniform", "the similarity of a model that gives every option probability 1/K"),
    ("lift", "similarity − uniform (above 0: closer to the country than a uniform model); countries are ranked "
             "by it"),
    ("macro", "the mean over countries, each counted once (the pooled mean weights a country by its questions)"),
    ("survey order", "the options read once, in the survey's order (rotation 0: the paper's protocol)"),
    ("specificity", "how much closer naming country X brings the model to X than to the question's other "
                    "countries, beyond where it stood unprompted"),
    ("expected", "probability-weighted answers over every rotation of the options"),
    ("greedy", "the argmax letter's answer"),
    ("debiased", "the same with the letter prior π, the model's preference for a letter whatever it shows, "
                 "removed from every question's distribution"),
    ("CI", "95% confidence interval, a bootstrap over questions"),
    ("τ", "Kendall's rank correlation of two country rankings (1 = same order)"),
    ("K", "the number of options of a question"),
)
"""Every term a GlobalOpinionQA report abbreviates or uses in its own sense, in the `Terms` order."""

CONDITION_WORDS = {"default": "with no country named", "cross_national": "with each country named in the question"}
CONTENT_MEASURABLE = 0.05
"""Mean content share of the log-prob variance (over the letter split's (condition, K) cells) below
which the model is said to show no measurable opinion: the debiased reading then has little to read."""


def condition(m: Mapping[str, Any]) -> str:
    """The condition the report ranks countries under: `default` when the run has it."""
    return condition_of(m)


def at(m: Mapping[str, Any], country: str, *path: str) -> Any:
    """A country's value in the block at `path`: looked up by key, not along a dotted path
    (country labels hold dots: `S. Korea`, `Czech Rep.`)."""
    return (get_path(m, *path) or {}).get(country)


def ranked(m: Mapping[str, Any], block: str = "expected") -> list[tuple[str, float]]:
    """The ranked countries (`metrics.json`'s `ranking`) by one reading's lift, highest first
    (undefined ones left out)."""
    lift = get_path(m, block, condition(m), RANK_BY) or {}
    names = (m.get("ranking") or {}).get("ranked") or []
    return sorted(((c, lift[c]) for c in names if not undefined(lift.get(c))), key=lambda kv: -kv[1])


def content_share(m: Mapping[str, Any]) -> float | None:
    """The mean content share of the letter split's cells (None without a split)."""
    cells = [v.get("content") for v in (m.get("letter_split") or {}).values() if isinstance(v, Mapping)]
    cells = [c for c in cells if not undefined(c)]
    return sum(cells) / len(cells) if cells else None


def opening(m: Mapping[str, Any]) -> list[str]:
    """The conclusion paragraph and the terms paragraph that open the report."""
    parts = [_reading(m, "expected")]
    if m.get("debiased") is None:
        parts.append(f"No debiased reading: {no_debiased(m).removeprefix('no debiased metrics: ')}.")
    elif not ranked(m, "expected"):  # nothing ranked: the pooled mean is all there is to say
        parts.append(f"Debiased reading (letter prior removed): mean lift {_mean(m, 'debiased', condition(m), 'lift')}.")
    elif not ranked(m, "debiased"):
        parts.append("No debiased reading: no ranked country's debiased lift is defined.")
    else:
        parts.append(_reading(m, "debiased"))
        if not undefined(m.get("ranking_tau")):
            parts.append(f"The two readings rank the countries' lifts with τ = {m['ranking_tau']:.3f} (1 = same order).")
    parts += [_survey_order(m), _specificity(m)]
    if m.get("near_uniform"):
        parts.append(f"The model's answers are close to uniform (mean normalised entropy {fmt(m.get('model_entropy'))}, "
                     "1 = uniform): its lifts are small and its ranking says little about the countries.")
    if m.get("letter_warnings"):
        share = content_share(m)
        if share is not None and share < CONTENT_MEASURABLE:
            parts.append(f"The letter drives the answers (warning below) and the options' content explains "
                         f"{share:.1%} of the log-prob variance on average: the model shows no measurable opinion, "
                         "in either reading.")
        else:
            parts.append("The letter drives the answers (warning below): the debiased reading is the one that speaks "
                         "about the countries.")
    return opening_paragraphs(parts, TERMS)


ALPHA = 0.05
"""A country is named as gained most or least on only when the test of equal lifts rejects at this level."""


def _name(m: Mapping[str, Any], label: str, block: str, cond: str) -> str:
    """A ranked country in bold by its display name, with its lift (simultaneous 95% interval over
    the ranked countries where stored), similarity and question count."""
    n = at(m, label, "n_questions", cond)
    band = at(m, label, "sim95", block, cond, "lift")
    interval = None if n == 1 else (band or at(m, label, "ci95", block, cond, "lift"))  # one question: no interval
    lift = value_ci(at(m, label, block, cond, "lift"), interval) + (", n = 1, no interval" if n == 1 else "")
    return (f"**{table_name(label)}** (lift {lift}, similarity {fmt(at(m, label, block, cond, 'similarity'))}, "
            f"{n} question{'s' * (n != 1)})")


def _mean(m: Mapping[str, Any], block: str, cond: str, key: str) -> str:
    return value_ci(get_path(m, block, cond, "mean", key), get_path(m, "ci95", block, cond, "mean", key))


def _reading(m: Mapping[str, Any], block: str) -> str:
    """The ranked countries with the highest and lowest lift in one reading, and its means."""
    cond, order = condition(m), ranked(m, block)
    head = ("Expected reading (probability-weighted answers):" if block == "expected"
            else "Debiased reading (letter prior removed):")
    rank = m.get("ranking") or {}
    if len(order) < 2:
        return (f"{head} fewer than two countries have {rank.get('min_questions')} or more questions "
                f"(`bench.min_questions`){' and a national sample' if rank.get('samples') == 'national' else ''}, so "
                f"no country is ranked; mean lift {_mean(m, block, cond, 'lift')}.")
    top, low = order[0][0], order[-1][0]
    means = (f"mean lift {_mean(m, block, cond, 'lift')} over all (question, country) pairs, macro lift "
             f"{_mean(m, block, cond, 'macro_lift')}")
    p = get_path(m, "p", block, cond, RANK_BY)
    if p is None or undefined(p) or p >= ALPHA:  # no country stands out: naming one would be chance
        test = "" if p is None or undefined(p) else f" (test of equal lifts p = {p:.3g})"
        lifts = [v for _, v in order]
        return (f"{head} {CONDITION_WORDS[cond]} (`{cond}`), no detectable difference between the {len(order)} ranked "
                f"countries' lifts over a uniform model{test}: they span {min(lifts):.3f} to {max(lifts):.3f} and no "
                f"country is singled out; {means}.")
    if block != "expected":  # the second reading: the same facts, said short
        return f"{head} highest lift {_name(m, top, block, cond)}, lowest {_name(m, low, block, cond)}; {means}."
    return (f"{head} {CONDITION_WORDS[cond]} (`{cond}`), ranked by lift over a uniform model among the "
            f"{len(order)} countries with at least {rank.get('min_questions')} "
            f"question{'s' * (rank.get('min_questions') != 1)}"
            f"{' (national samples)' if rank.get('samples') == 'national' else ''}, the model's answers gain most "
            f"on {_name(m, top, block, cond)} and least on {_name(m, low, block, cond)} (test of equal lifts "
            f"p = {p:.3g}; simultaneous 95% intervals); {means} "
            f"(similarity {_mean(m, block, cond, 'similarity')} against {fmt(get_path(m, block, cond, 'mean', 'uniform'))}"
            f" for a uniform model).")


def _survey_order(m: Mapping[str, Any]) -> str:
    """The survey-order reading's mean lift and its rank agreement with the expected one."""
    cond = condition(m)
    if get_path(m, "expected", cond, "survey_order") is None:
        return ""
    tau = m.get("survey_order_tau")
    return (f"Read once in the survey's order (the paper's protocol), the mean lift is "
            f"{value_ci(get_path(m, 'expected', cond, 'survey_order', 'mean', 'lift'), get_path(m, 'ci95', 'expected', cond, 'survey_order', 'mean', 'lift'))}"
            + ("" if undefined(tau) else f"; its country ranking agrees with the rotation-exact one at τ = {tau:.3f}")
            + ".")


def _specificity(m: Mapping[str, Any]) -> str:
    """Whether naming a country moves the model toward that country rather than the others."""
    value = get_path(m, "expected", "cross_national", "mean", "specificity")
    if undefined(value):
        return ""
    interval = get_path(m, "ci95", "expected", "cross_national", "mean", "specificity")
    verdict = {1: "naming a country moves the model toward that country more than toward the question's other "
                  "countries",
               -1: "naming a country moves the model away from that country relative to the question's other "
                   "countries",
               0: "naming a country does not measurably move the model toward that country rather than toward "
                  "the question's other countries"}[side(value, interval)]
    per = get_path(m, "p", "expected", "cross_national", "specificity") or {}
    spec = get_path(m, "expected", "cross_national", "specificity") or {}
    called = [c for c, p in per.items() if p < 0.05 and (spec.get(c) or 0) > 0]
    count = (f" Per country, naming it brings the model closer to its people than naming another country does for "
             f"{len(called)} of the {len(per)} countries cued on {(m.get('ranking') or {}).get('min_questions')} or more "
             "questions (bootstrap tests, Holm-adjusted)." if per else "")
    return f"Cue specificity {value_ci(value, interval)}: {verdict}.{count}"
