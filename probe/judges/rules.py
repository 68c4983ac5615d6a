"""LocQA judging (SPEC §4): the three judge tasks and the deterministic `rules` judge.

Tasks (registered in `probe.judges.tasks.TASKS`; every judge's output passes the validator):

- `semantic_match`, once per template × language. Payload `{"question"?, "us_answer",
  "answers": {locale: raw answer}}` → `{"matches": [locales], "dropped": [...]}`: the locales
  whose answer means the same as the US answer.
- `implicit`, once per response. Payload `{"question"?, "response", "language", "us_answer",
  "gold_answers": [raw strings, US + local]}` → `{"mentioned_answers": [raw gold strings],
  "framing_style": "US_COMPARISON" | "NEUTRAL", "dropped": [...]}`.
- `explicit`, once per (response, locale). Payload `{"question"?, "response", "locale",
  "locale_answer", "us_answer"}` → `{"match_locale": bool, "mentions_us_answer": bool}`.

"Unknown answers are dropped and flagged" (SPEC §4): an entry of `matches` or
`mentioned_answers` that names no locale / gold answer of the payload is removed from the
list and reported under `dropped`, so a verdict is kept and the caller can count the flags.
A wrong shape (not an object, a missing key, a non-string entry, an unknown framing label, a
non-boolean flag) raises ValueError, which the LLM judge retries and then records as
`judge_error`.

The `rules` judge is the offline baseline: string and number matching on normalised text,
no semantics. It cannot see that `Lunes` means `Monday`, or that "not 911" does not offer
911, and single-letter or yes/no answers (`A`, `No`) match any such word in a response. Use
the LLM judge for reported numbers; this one makes runs and tests reproducible without one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from probe.judges import JudgeRequest, JudgeResult

FRAMINGS: tuple[str, ...] = ("US_COMPARISON", "NEUTRAL")
NA_FORMS: frozenset[str] = frozenset({"n/a"})
"""Normalised spellings of the data file's "no such thing here" answer."""


def normalize_answer(text: str) -> str:
    """The comparison form of an answer: NFKC, case-folded, whitespace trimmed and collapsed.

    Same rule as `probe.benches.locqa.normalize_answer` (kept self-contained here). NFKC maps
    full-width digits/letters to ASCII; it runs again after case folding because folding can
    produce sequences NFKC would still change.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.split())


def is_na(answer: str) -> bool:
    """True for the data file's `N/A` answer (any case/width/spacing)."""
    return normalize_answer(answer) in NA_FORMS


# --- the three judge tasks: prompts and validators -----------------------------------------

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


def _gold(payload: Mapping[str, Any]) -> list[str]:
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
        f"{_quoted(_gold(payload))}\n\n"
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
    gold = {normalize_answer(g): g for g in _gold(payload)}
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


# --- deterministic matching -----------------------------------------------------------------

_SPACED = "0-9a-zA-Z\u00c0-\u024f"
"""Characters of scripts that separate words by spaces (digits, Latin): a match of an answer
beginning or ending in one of them must not run into another. Other scripts (CJK, Hangul,
Hebrew, Devanagari) glue particles and prefixes to words (東京都です, 서울은, בירושלים), so
their answers match as substrings."""
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


def _fold_digits(text: str) -> str:
    """Any Unicode decimal digit (Devanagari २, Arabic-Indic ٢, ...) as its ASCII digit; NFKC
    has already mapped full-width ones."""
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() and not ch.isascii() else ch for ch in text)


def _pattern(needle: str) -> str:
    """Regex for `needle` as a whole word/number: boundaries only where its end characters
    belong to a space-separated script; digits also refuse a decimal continuation (21 ≠ 21.5)."""
    left = right = ""
    if re.match(f"[{_SPACED}]", needle[0]):
        left = f"(?<![{_SPACED}])" + (r"(?<!\d[.,])" if needle[0].isdigit() else "")
    if re.match(f"[{_SPACED}]", needle[-1]):
        right = f"(?![{_SPACED}])" + (r"(?![.,]\d)" if needle[-1].isdigit() else "")
    return left + re.escape(needle) + right


def mentions(response: str, answer: str) -> bool:
    """Whether the normalised `answer` occurs in the normalised `response` (whole word/number
    in space-separated scripts, substring otherwise; digits compared in ASCII).

    `N/A` is never mentioned: it records that a locale has no such thing, which a response says
    in words ("there is no…"), while a literal "N/A" in a response is a placeholder, not a
    claim; substring matching would only produce false hits.
    """
    needle = _fold_digits(normalize_answer(answer))
    if not needle or needle in NA_FORMS:
        return False
    return re.search(_pattern(needle), _fold_digits(normalize_answer(response))) is not None


def same_answer(a: str, b: str) -> bool:
    """Normalised string equality, or equal numbers when both are plain numbers ("5" == "5.0").

    Only whole answers that are numbers compare numerically ("5 years" vs "5.0 years" do not);
    `N/A` equals `N/A` (two locales lacking the same thing do share that answer).
    """
    x, y = _fold_digits(normalize_answer(a)), _fold_digits(normalize_answer(b))
    if x == y:
        return True
    return bool(_NUMBER.fullmatch(x) and _NUMBER.fullmatch(y) and float(x) == float(y))


US_WORDS: dict[str, tuple[str, ...]] = {
    # Regexes on the normalised (case-folded) response. English ones are tried in every
    # language (models often name "USA" in English); "usa" (Spanish/Italian "uses") and "us"
    # are left to the case-sensitive CASED_US_WORDS. Continent names ("América" in Spanish and
    # Portuguese, "Amerika Latin") are left out: they rarely mean the US.
    "English": (r"united states", r"america(?:n|ns)?", r"u\.s\.(?:a\.)?"),
    "Spanish": (r"estados unidos", r"estadounidenses?", r"ee\.? ?uu\.?", r"norteamerican[oa]s?"),
    "French": (r"[ée]tats[- ]unis", r"am[ée]ricain(?:e|s|es)?"),
    "German": (r"vereinigten? staaten", r"amerika", r"(?:us-)?amerikanisch\w*"),
    "Hebrew": ("ארצות הברית", "ארה\"ב", "ארה״ב", "אמריק"),
    "Hindi": ("संयुक्त राज्य", "अमेरिक", "अमरीक"),
    "Indonesian": (r"amerika serikat", r"amerika"),
    "Italian": (r"stati uniti", r"americ(?:a|an[oaie])", r"statunitens[ei]"),
    "Japanese": ("アメリカ", "米国", "合衆国"),
    "Korean": ("미국", "아메리카"),
    "Portuguese": (r"estados unidos", r"(?:norte-)?american[oa]s?"),
    "Chinese": ("美国", "美國", "美利坚", "美利堅"),
}
CASED_US_WORDS: dict[str, tuple[str, ...]] = {
    # Regexes on the NFKC (not case-folded) response: acronyms that are ordinary words in
    # lower case ("us", Spanish "usa", Indonesian "as").
    "English": (r"US", r"USA", r"U\.S\.A?\.?"),
    "Indonesian": (r"AS",),
    "Portuguese": (r"EUA",),
}


def _bounded(word: str) -> str:
    left = f"(?<![{_SPACED}])" if re.match(f"[{_SPACED}]", word[0]) else ""
    right = f"(?![{_SPACED}])" if re.match(f"[{_SPACED}]", word[-1]) else ""
    return f"{left}(?:{word}){right}"


def frames_us(response: str, language: str | None) -> bool:
    """Whether the response names the US / America, in English or in `language`'s words."""
    folded, nfkc = normalize_answer(response), unicodedata.normalize("NFKC", response)
    langs = ["English"] + ([language] if language and language != "English" else [])
    for lang in langs:
        if any(re.search(_bounded(w), folded) for w in US_WORDS.get(lang, ())):
            return True
        if any(re.search(_bounded(w), nfkc) for w in CASED_US_WORDS.get(lang, ())):
            return True
    return False


class RulesJudge:
    """Deterministic LocQA judge (normalised string and number matching), offline.

    - semantic_match: a locale matches when `same_answer(its answer, US answer)`.
    - implicit: a gold answer is mentioned when `mentions(response, answer)`; framing is
      `US_COMPARISON` when `frames_us(response, language)` — any naming of the US counts,
      since string rules cannot tell an anchor from a passing mention.
    - explicit: `match_locale = mentions(response, locale answer)`, `mentions_us_answer =
      mentions(response, US answer)`.
    """

    name = "rules"

    def judge(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        from probe.judges.tasks import TASKS  # tasks.py imports this module for the validators

        out = []
        for r in requests:
            rule = _RULES.get(r.task)
            if rule is None:
                out.append(JudgeResult(None, f"rules judge has no rules for task {r.task!r}", self.name))
                continue
            try:
                raw = rule(r.payload)
            except KeyError as e:
                out.append(JudgeResult(None, f"task {r.task!r}: payload lacks field {e}", self.name))
                continue
            out.append(JudgeResult(TASKS[r.task].validate(raw, r.payload), None, self.name))
        return out


def _rule_semantic(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"matches": [loc for loc, ans in p["answers"].items() if same_answer(ans, p["us_answer"])]}


def _rule_implicit(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"mentioned_answers": [g for g in _gold(p) if mentions(p["response"], g)],
            "framing_style": "US_COMPARISON" if frames_us(p["response"], p.get("language")) else "NEUTRAL"}


def _rule_explicit(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"match_locale": mentions(p["response"], p["locale_answer"]),
            "mentions_us_answer": mentions(p["response"], p["us_answer"])}


_RULES = {"semantic_match": _rule_semantic, "implicit": _rule_implicit, "explicit": _rule_explicit}
