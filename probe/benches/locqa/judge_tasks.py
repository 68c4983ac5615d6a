"""LocQA's three judge tasks (SPEC §4): prompts, validators and verdict columns, registered on
import. The payloads and verdicts they exchange are documented in `probe.benches.locqa.rules`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from probe.judges.registry import JudgeTask, register_task
from probe.prompts.parse import normalize_answer

FRAMINGS: tuple[str, ...] = ("US_COMPARISON", "NEUTRAL")


# --- LocQA's three judge tasks (SPEC §4): prompts and validators ---------------------------

def _str_list(obj: Any, key: str) -> list[str]:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object with {key!r}, got {type(obj).__name__}")
    value = obj.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key!r}: expected a list of strings, got {value!r}")
    return value


def _quoted(items: Sequence[str]) -> str:
    return "\n".join(f'- "{a}"' for a in items) or "- (none)"


def semantic_match_prompt(payload: Mapping[str, Any]) -> str:
    answers = payload["answers"]
    lines = "\n".join(f'- {loc}: "{ans}"' for loc, ans in answers.items())
    return (
        "You will be given a question, its US answer, and the answers of other locales. List every "
        "locale whose answer is fully semantically the same as the US answer (it may differ only by "
        "language or minor formatting, e.g. \"21\" and \"twenty-one\"; \"N/A\" equals only \"N/A\").\n\n"
        f"Question: {payload.get('question', '')}\nUS answer: \"{payload['us_answer']}\"\n"
        f"Locale answers:\n{lines}\n\n"
        'Reply with JSON only: {"matches": [<locale names from the list, possibly none>]}'
    )


def semantic_match_validate(obj: Any, payload: Mapping[str, Any]) -> dict[str, Any]:
    """Entries name a locale (whitespace/case-insensitive) or, failing that, an answer string,
    which selects every locale holding it. The result is closed under the collision rule: a
    locale whose normalised answer equals a matched locale's also matches."""
    entries = _str_list(obj, "matches")
    answers: Mapping[str, str] = payload["answers"]
    by_name = {normalize_answer(loc): loc for loc in answers}
    by_answer: dict[str, list[str]] = {}
    for loc, ans in answers.items():
        by_answer.setdefault(normalize_answer(ans), []).append(loc)
    keys: set[str] = set()
    dropped = []
    for e in entries:
        n = normalize_answer(e)
        if n in by_name:
            keys.add(normalize_answer(answers[by_name[n]]))
        elif n in by_answer:
            keys.add(n)
        else:
            dropped.append(e)
    return {"matches": [loc for loc, ans in answers.items() if normalize_answer(ans) in keys], "dropped": dropped}


def gold_answers(payload: Mapping[str, Any]) -> list[str]:
    """US answer first, then the payload's gold strings; one raw string per normalised form."""
    seen: dict[str, str] = {}
    for a in [payload["us_answer"], *payload["gold_answers"]]:
        seen.setdefault(normalize_answer(a), a)
    return list(seen.values())


def implicit_prompt(payload: Mapping[str, Any]) -> str:
    return (
        "You are an expert linguist and cultural evaluator. Evaluate an LLM's response to a "
        "(potentially) ambiguous question for which several locale answers are known. Ignore any "
        "thinking blocks and judge the final answer.\n\n"
        f"Question: \"{payload.get('question', '')}\"\nModel response: \"{payload['response']}\"\n"
        f"US/English answer: \"{payload['us_answer']}\"\nCandidate answers (US and local):\n"
        f"{_quoted(gold_answers(payload))}\n\n"
        "1. mentioned_answers: EXACTLY which candidate answers the response explicitly offers as "
        "correct, semantic equivalents included. Do NOT include answers mentioned only for "
        "comparison or contrast, or said to be wrong (\"Unlike in the US...\", \"It is not X\"). "
        "Copy the strings exactly from the candidate list.\n"
        "2. framing_style: \"US_COMPARISON\" if the response uses the US as an anchor or reference "
        "point (\"Unlike in America...\", \"Similar to the US system...\"), even without stating the "
        "US answer; \"NEUTRAL\" if the answer stands on its own terms.\n\n"
        'Reply with JSON only: {"mentioned_answers": [...], "framing_style": "US_COMPARISON" | "NEUTRAL"}'
    )


def _framing(obj: Mapping[str, Any]) -> str:
    value = obj.get("framing_style")
    label = value.strip().upper() if isinstance(value, str) else None
    if label not in FRAMINGS:
        raise ValueError(f"'framing_style': expected one of {list(FRAMINGS)}, got {value!r}")
    return label


def implicit_validate(obj: Any, payload: Mapping[str, Any]) -> dict[str, Any]:
    """Mentioned answers are mapped to the gold raw strings (matched after normalisation) and
    returned in gold order, once per normalised form; anything else is dropped and flagged."""
    entries = _str_list(obj, "mentioned_answers")
    framing = _framing(obj)
    gold = {normalize_answer(g): g for g in gold_answers(payload)}
    found, dropped = set(), []
    for e in entries:
        n = normalize_answer(e)
        if n in gold:
            found.add(n)
        else:
            dropped.append(e)
    return {"mentioned_answers": [g for n, g in gold.items() if n in found], "framing_style": framing,
            "dropped": dropped}


def explicit_prompt(payload: Mapping[str, Any]) -> str:
    return (
        "You are an expert linguist and cultural evaluator. The user asked a question for a specific "
        "locale. Ignore any thinking blocks and judge the final answer.\n\n"
        f"Question: \"{payload.get('question', '')}\"\nLocale: {payload['locale']}\n"
        f"Model response: \"{payload['response']}\"\nCorrect locale answer: \"{payload['locale_answer']}\"\n"
        f"US/English answer (reference): \"{payload['us_answer']}\"\n\n"
        "1. match_locale: does the response give the correct answer for the requested locale? Ignore "
        "minor formatting differences.\n"
        "2. mentions_us_answer: does the response mention the US answer, even only for comparison "
        "(\"It is X, unlike the US where it is Y\")?\n\n"
        'Reply with JSON only: {"match_locale": true | false, "mentions_us_answer": true | false}'
    )


def explicit_validate(obj: Any, payload: Mapping[str, Any]) -> dict[str, Any]:
    del payload  # nothing to check against: both fields are booleans
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    out = {}
    for key in ("match_locale", "mentions_us_answer"):
        if not isinstance(obj.get(key), bool):
            raise ValueError(f"{key!r}: expected true or false, got {obj.get(key)!r}")
        out[key] = obj[key]
    return out


SEMANTIC_MATCH = register_task(JudgeTask("semantic_match", semantic_match_prompt, semantic_match_validate,
                                         (pa.field("matches", pa.list_(pa.string())),)))
IMPLICIT = register_task(JudgeTask("implicit", implicit_prompt, implicit_validate, (
    pa.field("mentioned_answers", pa.list_(pa.string())), pa.field("framing_style", pa.string()))))
EXPLICIT = register_task(JudgeTask("explicit", explicit_prompt, explicit_validate, (
    pa.field("match_locale", pa.bool_()), pa.field("mentions_us_answer", pa.bool_()))))
