"""What a LocQA report says first, in plain words: whether the model defaults to the US answer
(global bias), how its answers split over a language's locales (regional bias), how often it
gives no gold answer at all — or, with the locale stated, how often it is right — and the terms
the report abbreviates. Answers are generated and judged, so there is one reading, not an
`expected` and a `debiased` one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.metrics.core import get_path
from probe.viz.markdown import opening_paragraphs, side, undefined, value_ci

ONE_READING = "Answers are generated and judged; there is no letter reading."

TERMS = (
    ("US", "the United States; the US answer is a template's answer for the USA locale"),
    ("B_US", "global bias of a language: the share of its questions whose response gives the US answer minus "
             "the mean share of its locales for which the US answer is right (0 = no more often than the "
             "locales warrant)"),
    ("B_R", "regional bias of a locale: its share of the language's answers given over its share in the data "
            "(1 = in proportion)"),
    ("|B_R − 1|", "the mean over a language's locales of how far B_R is from 1"),
    ("macro", "the mean over languages (B_US: the 11 non-English ones; |B_R − 1|: those with more than one "
              "locale)"),
    ("no-answer rate", "the share of responses that give no gold answer"),
    ("multiplicity", "the mean number of distinct answers a non-English response gives"),
    ("erasure", "the US answer alone where no locale of the language shares it"),
    ("intrusion", "the US answer beside a local one where no locale shares it"),
    ("selection", "the US answer where some but not all locales share it"),
    ("valid_overlap", "the US answer where every locale shares it"),
    ("framing", "a response that frames its answer against the US one"),
    ("CI", "95% confidence interval, a bootstrap over templates"),
)
"""Every term a LocQA report abbreviates or uses in its own sense, in the `Terms` order."""

_TILT = {1: "more often than its locales warrant", -1: "less often than its locales warrant",
         0: "no more often than its locales warrant"}


def opening(m: Mapping[str, Any]) -> list[str]:
    """The conclusion paragraph and the terms paragraph that open the report."""
    M, cis = m.get("metrics") or {}, m.get("ci95") or {}
    parts = [ONE_READING, *(_explicit(M, cis) if M.get("explicit") else _implicit(M, cis))]
    return opening_paragraphs(parts, TERMS)


def _implicit(M: Mapping[str, Any], cis: Mapping[str, Any]) -> list[str]:
    """Global bias with its most and least US-leaning languages, the US answer where no locale
    shares it, regional bias and the no-answer rate."""
    out = []
    b_us = M.get("B_US_macro")
    if undefined(b_us):
        out.append("No global bias: no non-English language has a judged response (B_US undefined).")
    else:
        langs = {k: v for k, v in (M.get("B_US") or {}).items() if k != "English" and not undefined(v)}
        top, low = max(langs, key=langs.get), min(langs, key=langs.get)
        spread = (f"most in {top} {langs[top]:.3f}, least in {low} {langs[low]:.3f}" if langs[top] != langs[low]
                  else f"{langs[top]:.3f} in each of {len(langs)} languages")
        out.append(f"Asked without a locale, the model gives the US answer {_TILT[side(b_us, cis.get('B_US_macro'))]} "
                   f"(global bias B_US macro {value_ci(b_us, cis.get('B_US_macro'))}, 0 = none; {spread}).")
    tax, tcis = M.get("taxonomy") or {}, cis.get("taxonomy") or {}
    if not undefined(tax.get("erasure")):
        out.append(f"Where no locale of the language shares the US answer, {value_ci(tax['erasure'], tcis.get('erasure'))}"
                   f" of non-English responses give it alone (erasure) and "
                   f"{value_ci(tax.get('intrusion'), tcis.get('intrusion'))} beside a local one (intrusion).")
    dev = M.get("B_R_dev_macro")
    out.append(f"Over a language's locales, its answers depart from the data's proportions by a mean |B_R − 1| of "
               f"{value_ci(dev, cis.get('B_R_dev_macro'))} (0 = in proportion)." if not undefined(dev) else
               "No regional bias: no language's responses give one of its locales' answers (|B_R − 1| undefined).")
    out.append("Of the non-English responses, "
               f"{value_ci(M.get('no_answer_rate_non_english'), cis.get('no_answer_rate_non_english'))} give no gold "
               "answer at all (no-answer rate).")
    return out


def _explicit(M: Mapping[str, Any], cis: Mapping[str, Any]) -> list[str]:
    """With the locale stated: how often the answer is right for it, and what the wrong ones give."""
    acc, wrong_us = get_path(M, "explicit.accuracy"), get_path(M, "explicit.us_hallucination_share")
    out = [f"With the locale stated, {value_ci(acc, get_path(cis, 'explicit.accuracy'))} of answers are right for "
           "it (accuracy)."]
    out.append(f"Of the wrong ones, {value_ci(wrong_us, get_path(cis, 'explicit.us_hallucination_share'))} give the "
               "US answer instead." if not undefined(wrong_us) else "No answer is wrong, so none falls back on the "
               "US answer.")
    return out if not undefined(acc) else ["No explicit prompt has a judged answer (accuracy undefined)."]

