"""What a BLEnD short-answer report says first, in plain words: how often the model gives an
answer the country's annotators gave, asked in the country's own language and in English, which
of the two it does better in, the countries it does best and worst on, and the high- against
low-resource gap — and the terms the report abbreviates. Answers are generated and judged, so
there is one reading, not an `expected` and a `debiased` one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.metrics.core import get_path
from probe.viz.markdown import opening_paragraphs, side, undefined, value_ci

ONE_READING = "Answers are generated and judged; there is no letter reading."

TERMS = (
    ("score", "the share of answers that give an answer the country's annotators gave (0–1)"),
    ("local", "asked in the country's own language"),
    ("English", "asked in English (a country whose language is English is asked once, as local)"),
    ("gap", "local − English score, mean over the countries asked in both"),
    ("high − low resource", "the mean score of the high-resource countries minus that of the low-resource ones"),
    ("all", "every (question, country) pair"),
    ("kept", "the pairs the source's multiple-choice rule keeps"),
    ("CI", "95% confidence interval, a bootstrap over questions"),
)
"""Every term a BLEnD report abbreviates or uses in its own sense, in the `Terms` order."""

_GAP = {1: "does better in the local language", -1: "does better in English",
        0: "does about as well in both"}
"""How the conclusion words the local − English gap, by its 95% interval."""


def opening(m: Mapping[str, Any]) -> list[str]:
    """The conclusion paragraph and the terms paragraph that open the report."""
    M, cis = get_path(m, "metrics", "all") or {}, get_path(m, "ci95", "all") or {}
    parts = [ONE_READING, _scores(M, cis), _countries(M), _resource(M, cis)]
    return opening_paragraphs(parts, TERMS)


def _scores(M: Mapping[str, Any], cis: Mapping[str, Any]) -> str:
    """The local and English scores and which language the model does better in."""
    local, en, gap = get_path(M, "score.local"), get_path(M, "score.en"), M.get("gap")
    if undefined(local):
        return "No answer was judged, so no score is defined."
    text = (f"Over all (question, country) pairs, the model gives an annotated answer in "
            f"{value_ci(local, get_path(cis, 'score.local'))} of its answers asked in the country's own language")
    if undefined(en) or undefined(gap):
        return text + " (mean over countries; no country was asked in English as well)."
    return (f"{text} and {value_ci(en, get_path(cis, 'score.en'))} asked in English (means over countries): it "
            f"{_GAP[side(gap, cis.get('gap'))]} (gap {value_ci(gap, cis.get('gap'))}).")


def _countries(M: Mapping[str, Any]) -> str:
    """The countries with the highest and lowest local score."""
    local = {c: v["local"] for c, v in (M.get("by_country") or {}).items() if not undefined(v.get("local"))}
    if len(local) < 2:
        return ""
    top, low = max(local, key=local.get), min(local, key=local.get)
    if local[top] == local[low]:
        return f"Asked in their own languages, all {len(local)} countries score the same ({local[top]:.3f})."
    return (f"Asked in their own languages, it scores highest on {top} ({local[top]:.3f}) and lowest on {low} "
            f"({local[low]:.3f}).")


def _resource(M: Mapping[str, Any], cis: Mapping[str, Any]) -> str:
    """The high- minus low-resource gap in the local language, or why there is none."""
    gap = get_path(M, "resource_gap.local")
    if undefined(gap):
        return ("No high − low resource gap: the run lacks a high-resource or a low-resource country "
                "(`bench.high_resource` / `low_resource`).")
    interval = get_path(cis, "resource_gap.local")
    word = {1: "higher than", -1: "lower than", 0: "about as high as"}[side(gap, interval)]
    return (f"In their own languages, high-resource countries score {word} low-resource ones (high − low resource "
            f"{value_ci(gap, interval)}).")
