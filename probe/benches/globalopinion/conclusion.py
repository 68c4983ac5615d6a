"""What a GlobalOpinionQA report says first, in plain words: which countries' answer shares the
model's answers are closest to and furthest from, and how much closer than a uniform model it is
on average — once for the `expected` reading and once for the `debiased` one (letter prior
removed) — and the terms the report abbreviates, defined before any table uses them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.metrics.core import get_path
from probe.viz.letters import no_debiased
from probe.viz.markdown import fmt, opening_paragraphs, undefined, value_ci

TERMS = (
    ("similarity", "1 − Jensen–Shannon distance (base 2) between the model's distribution over a question's "
                   "options and a country's answer shares (1 = identical, 0 = no option in common)"),
    ("uniform", "the similarity of a model that gives every option probability 1/K"),
    ("lift", "similarity − uniform (above 0: closer to the country than a uniform model)"),
    ("expected", "probability-weighted answers"),
    ("greedy", "the argmax letter's answer"),
    ("debiased", "the same with the letter prior π, the model's preference for a letter whatever it shows, "
                 "removed from every question's distribution"),
    ("CI", "95% confidence interval, a bootstrap over questions"),
    ("τ", "Kendall's rank correlation of the expected and the debiased country rankings (1 = same order)"),
    ("K", "the number of options of a question"),
)
"""Every term a GlobalOpinionQA report abbreviates or uses in its own sense, in the `Terms` order."""

CONDITION_WORDS = {"default": "with no country named", "cross_national": "with each country named in the question"}


def condition(m: Mapping[str, Any]) -> str:
    """The condition the report ranks countries under: `default` when the run has it."""
    return "default" if get_path(m, "expected", "default") else "cross_national"


def at(m: Mapping[str, Any], country: str, *path: str) -> Any:
    """A country's value in the block at `path`: looked up by key, not along a dotted path
    (country names hold dots: `S. Korea`, `Czech Rep.`)."""
    return (get_path(m, *path) or {}).get(country)


def ranked(m: Mapping[str, Any], block: str = "expected") -> list[tuple[str, float]]:
    """The countries of one reading under `condition(m)`, closest first (undefined ones left out)."""
    sim = get_path(m, block, condition(m), "similarity") or {}
    return sorted(((c, v) for c, v in sim.items() if not undefined(v)), key=lambda kv: -kv[1])


def opening(m: Mapping[str, Any]) -> list[str]:
    """The conclusion paragraph and the terms paragraph that open the report."""
    parts = [_reading(m, "expected")]
    if m.get("debiased") is None:
        parts.append(f"No debiased reading: {no_debiased(m).removeprefix('no debiased metrics: ')}.")
    elif not ranked(m, "debiased"):
        parts.append("No debiased reading: no country's debiased similarity is defined.")
    else:
        parts.append(_reading(m, "debiased"))
        if not undefined(m.get("ranking_tau")):
            parts.append(f"The two readings rank the countries with τ = {m['ranking_tau']:.3f} (1 = same order).")
    if m.get("near_uniform"):
        parts.append(f"The model's answers are close to uniform (mean normalised entropy {fmt(m.get('model_entropy'))}, "
                     "1 = uniform): the similarity then tracks how uniform each country's answers are, not what "
                     "the model thinks, so read the lifts rather than the ranking.")
    if m.get("letter_warnings"):
        parts.append("The letter drives the answers (warning below): the debiased reading is the one that speaks "
                     "about the countries.")
    return opening_paragraphs(parts, TERMS)


def _reading(m: Mapping[str, Any], block: str) -> str:
    """The closest and furthest country of one reading and its mean similarity and lift."""
    cond, order = condition(m), ranked(m, block)
    head = ("Expected reading (probability-weighted answers):" if block == "expected"
            else "Debiased reading (letter prior removed):")
    if not order:
        return f"{head} no (question, country) pair was scored."
    (top, _), (low, _) = order[0], order[-1]

    def country(name: str) -> str:
        return (f"{value_ci(at(m, name, block, cond, 'similarity'), at(m, name, 'ci95', block, cond, 'similarity'))}"
                f", lift {fmt(at(m, name, block, cond, 'lift'))}")

    def mean(key: str) -> str:
        return value_ci(get_path(m, block, cond, "mean", key), get_path(m, "ci95", block, cond, "mean", key))

    if block != "expected":  # the second reading: the same facts, said short
        return (f"{head} closest **{top}** ({country(top)}), furthest **{low}** ({country(low)}); mean similarity "
                f"{mean('similarity')}, mean lift {mean('lift')}.")
    return (f"{head} {CONDITION_WORDS[cond]} (`{cond}`), the model's answers are closest to **{top}** (similarity "
            f"{country(top)}) and furthest from **{low}** ({country(low)}) of {len(order)} countries; over all "
            f"(question, country) pairs the similarity is {mean('similarity')}, a mean lift of {mean('lift')} over "
            f"a uniform model ({fmt(get_path(m, block, cond, 'mean', 'uniform'))}).")
