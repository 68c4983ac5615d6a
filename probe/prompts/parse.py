"""Reading generated answers: forced-choice letters (the generation fallback,
docs/concepts/exact-distributions.md), thinking blocks, and the comparison form of open answers.

Order: the JSON `answer_choice` the prompt asks for, then `SELECTED OPTION: X`, then a lone
letter. A letter outside the item's letters, or no match, is `None` (kept and counted as
invalid, never dropped).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

# The letter must not run on into a word: `{"answer_choice":"Apple` is not an answer "A".
_JSON = re.compile(r'"answer_choice"\s*:\s*"\s*([A-Za-z])(?![A-Za-z])')
_SELECTED = re.compile(r"SELECTED\s+OPTION\s*:\s*\**\s*\(?([A-Za-z])(?![A-Za-z])", re.IGNORECASE)
_LONE = re.compile(r"^\W*([A-Za-z])\W*$")
_RATIONALE = re.compile(r"RATIONALE\s*:\s*(.+)", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class ParsedAnswer:
    letter: str | None
    """An upper-case letter of the item, or None when the output is invalid."""
    rationale: str | None


def parse_answer(text: str, letters: Sequence[str]) -> ParsedAnswer:
    """Parse a full answer text (answer cue included) into a letter and an optional rationale."""
    rationale_match = _RATIONALE.search(text)
    rationale = rationale_match.group(1).strip() or None if rationale_match else None
    for pattern in (_JSON, _SELECTED, _LONE):
        m = pattern.search(text.strip())
        if m:
            letter = m.group(1).upper()
            return ParsedAnswer(letter if letter in letters else None, rationale)
    return ParsedAnswer(None, rationale)


# Reasoning models wrap their deliberation in think tags; only the answer after it is judged.
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


def strip_thinking(text: str) -> str:
    """The answer without `<think>…</think>` blocks (an unclosed block is removed to the end)."""
    return _THINK.sub("", text).strip()


def normalize_answer(text: str) -> str:
    """The comparison form of an open answer: NFKC, case-folded, trimmed, whitespace collapsed.

    NFKC maps full-width digits and narrow no-break spaces to ASCII; it runs again after case
    folding because folding can produce sequences NFKC would still change.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.split())
