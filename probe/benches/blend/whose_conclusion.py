"""What a BLEnD whose-answer report says first, in plain words: how evenly the model's answer mass
spreads over the countries when no country is named, how much of it goes to the named country's
answer when one is, and the terms the report abbreviates. Each candidate answer is scored as a
continuation (the text reading), so there is one reading, not an `expected` and a `debiased` one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.backends.reading import Reading
from probe.metrics.core import get_path
from probe.viz.markdown import opening_paragraphs, side, undefined, value_ci

EVEN = ((0.01, "nearly evenly"), (0.1, "somewhat unevenly"), (float("inf"), "very unevenly"))
"""How the conclusion words KL(neutral shares ‖ uniform) in nats (the scale the DiSCo report uses)."""

TERMS = (
    ("KL", "Kullback–Leibler divergence of the neutral form's country shares from uniform, in nats (0 = even)"),
    ("Gini", "Gini coefficient of those shares (0 = even)"),
    ("high − low-resource share", "the mean share of the high-resource countries minus that of the "
                                  "low-resource ones"),
    ("compliance", "the probability of the cued country's answer under its cue"),
    ("gain", "compliance minus that answer's probability under the neutral form"),
    ("stickiness", "the probability of the neutral form's top answer under the cues of countries whose answer "
                   "differs"),
    ("T", "the temperature of the softmax over the candidate answers' scores"),
    ("CI", "95% confidence interval, a bootstrap over questions"),
)
"""Every term a whose-answer report abbreviates or uses in its own sense, in the `Terms` order."""


def opening(m: Mapping[str, Any]) -> list[str]:
    """The conclusion paragraph and the terms paragraph that open the report."""
    e, ci = m.get("expected") or {}, (m.get("ci95") or {}).get("expected") or {}
    reading = Reading.parse(m.get("reading", Reading.LETTERS.value), "metrics.json, field 'reading'")
    first = ("Each candidate answer is scored as a continuation; there is no letter reading, so there is no "
             "debiased one." if reading is Reading.TEXT else
             "Read from the letter scores over the 16 options; this mode computes no debiased reading, so the letter "
             "prior is still in these numbers.")
    parts = [first, _neutral(e, ci), _compliance(e, ci)]
    return opening_paragraphs(parts, TERMS)


def _neutral(e: Mapping[str, Any], ci: Mapping[str, Any]) -> str:
    """How evenly the neutral form's answer mass spreads, with the most and least favoured countries."""
    kl = get_path(e, "neutral.KL")
    shares = {c: v for c, v in (get_path(e, "neutral.shares") or {}).items() if not undefined(v)}
    if undefined(kl) or not shares:
        return ""
    word = next(w for bound, w in EVEN if kl < bound)
    top, low = max(shares, key=shares.get), min(shares, key=shares.get)
    return (f"With no country named, the answer mass spreads {word} over the {len(shares)} countries (KL "
            f"{value_ci(kl, get_path(ci, 'neutral.KL'))} nats; most {top} {shares[top]:.3f}, least {low} "
            f"{shares[low]:.3f}, uniform {1 / len(shares):.3f}).")


def _compliance(e: Mapping[str, Any], ci: Mapping[str, Any]) -> str:
    """The named country's answer's probability and whether naming it raises it."""
    mean, gain = get_path(e, "compliance.mean"), get_path(e, "compliance_gain.mean")
    if undefined(mean):
        return ""
    text = (f"Naming a country puts {value_ci(mean, get_path(ci, 'compliance.mean'))} of the probability on its "
            "answer (compliance, mean over countries)")
    if undefined(gain):
        return text + "."
    interval = get_path(ci, "compliance_gain.mean")
    word = {1: "more than", -1: "less than", 0: "about as much as"}[side(gain, interval)]
    return f"{text}, {word} with no country named (gain {value_ci(gain, interval)})."
