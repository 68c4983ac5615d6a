"""Which GlobalOpinionQA questions are ordered scales, for the ordinal similarity (`measures.
ordinal_similarity`, Santurkar et al. 2023). The data marks none, so a question counts as a scale
by its option texts in the survey's order, non-answer and volunteered codes set aside (they sit
off the scale; `data.is_refusal`, `data.is_volunteered`), when at least three options remain and

- numeric scale: the options between the first and the last are whole numbers rising by one
  (`Not at all`, `2`, …, `9`, `Very much`; or `1` … `10`); or
- verbal scale: every option gets a rank from its wording and the ranks are strictly monotone
  either way. A rank is the option's pole (agreeing / good / favourable / approving / satisfied /
  likely / important / well words +1, their opposites or a `not` before them −1, `neither` 0)
  times its intensity (`very`, `strongly`, `completely` or `at all` anywhere in the text 2;
  otherwise 1, `not very` / `not too` 1),
  or for amount and frequency ladders with no pole word their step (`a great deal`, `a lot`,
  `always` 4 … `not at all`, `none`, `never` 0). Anything unranked leaves the question unordered.

A question that matches neither rule is not scored by the ordinal measure (counted).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from probe.benches.globalopinion.data import is_refusal, is_volunteered

_NEGATIVE = re.compile(r"\b(disagree|bad|unfavou?rable|disapprove|dissatisfied|unlikely|unimportant|oppose|"
                       r"negative|worse)\b")
_POSITIVE = re.compile(r"\b(agree|good|favou?rable|approve|satisfied|likely|important|support|positive|better|well)\b")
_NOT = re.compile(r"\bnot\b")
_WEAK = re.compile(r"\bnot (?:very|too)\b")
_NEUTRAL = re.compile(r"\bneither\b|\bneutral\b|\bmixed\b")
_STRONG = re.compile(r"\b(very|strongly|completely|totally|extremely)\b|\bat all\b")
_LADDER: tuple[tuple[str, int], ...] = (
    ("a great deal", 4), ("a lot", 4), ("always", 4), ("very", 4), ("completely", 4),
    ("quite a lot", 3), ("a fair amount", 3), ("fairly", 3), ("often", 3), ("most of the time", 3),
    ("somewhat", 3), ("rather", 3),
    ("some", 2), ("sometimes", 2), ("a little", 2), ("only some", 2),
    ("not too", 1), ("not very", 1), ("not much", 1), ("rarely", 1), ("seldom", 1), ("hardly", 1),
    ("only a little", 1), ("not ", 1),
    ("not at all", 0), ("none at all", 0), ("none", 0), ("never", 0), ("no ", 0),
)
"""Amount and frequency steps by leading words; the longest matching lead wins."""
_INTEGER = re.compile(r"\A[-+]?\d+\Z")


def _pole_rank(text: str) -> float | None:
    """pole × intensity, None without a pole word."""
    if _NEUTRAL.search(text):
        return 0.0
    positive = bool(_POSITIVE.search(text))
    pole = -1 if _NEGATIVE.search(text) or (positive and _NOT.search(text)) else 1 if positive else 0
    if pole == 0:
        return None
    strong = _STRONG.search(text) and not _WEAK.search(text)
    return pole * (2.0 if strong else 1.0)


def _ladder_rank(text: str) -> float | None:
    leads = [(len(lead), value) for lead, value in _LADDER if text == lead.strip() or text.startswith(lead)]
    return float(max(leads)[1]) if leads else None


def rank(option: str) -> float | None:
    """An option's place on a verbal scale (None: no place)."""
    text = " ".join(option.lower().replace("’", "'").split())
    pole = _pole_rank(text)
    return pole if pole is not None else _ladder_rank(text)


def scale_positions(options: Sequence[str]) -> tuple[int, ...] | None:
    """The indices (survey order) of a question's options on its ordered scale, or None when the
    question is not one (module doc)."""
    on = [i for i, o in enumerate(options) if not (is_refusal(o) or is_volunteered(o))]
    if len(on) < 3:
        return None
    texts = [options[i] for i in on]
    inner = texts[1:-1]
    if all(_INTEGER.match(t) for t in inner):
        values = [int(t) for t in inner]
        if all(b == a + 1 for a, b in zip(values, values[1:])):
            return tuple(on)
    ranks = [rank(t) for t in texts]
    if any(r is None for r in ranks):
        return None
    steps = [b - a for a, b in zip(ranks, ranks[1:])]  # type: ignore[operator]
    return tuple(on) if all(s > 0 for s in steps) or all(s < 0 for s in steps) else None
