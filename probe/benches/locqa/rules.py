"""The string-matching rules of LocQA's offline `rules` judge (`probe.benches.locqa.judging`):
whether a response mentions an answer, whether two answers are the same, whether a response
frames its answer against the US. String and number matching on normalised text, no
semantics. A one-letter Latin answer (`A`) is not counted where the letter is a one-letter word
of English or the response's language ("…has a similar expression"; see `mentions_letter`).
"""

from __future__ import annotations

import re
import unicodedata

from probe.prompts.parse import normalize_answer

NA_FORMS: frozenset[str] = frozenset({"n/a"})
"""Normalised spellings of the data file's "no such thing here" answer."""


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


def mentions(response: str, answer: str, language: str | None = None) -> bool:
    """Whether the normalised `answer` occurs in the normalised `response` (whole word/number
    in space-separated scripts, substring otherwise; digits compared in ASCII).

    `N/A` is never mentioned: it records that a locale has no such thing, which a response says
    in words ("there is no…"), while a literal "N/A" in a response is a placeholder, not a
    claim; substring matching would only produce false hits.

    A one-character Latin answer (`A`) follows `mentions_letter`: the letter is also a word
    ("…has a similar expression"), so whole-word matching alone would count articles.
    """
    needle = _fold_digits(normalize_answer(answer))
    if not needle or needle in NA_FORMS:
        return False
    if len(needle) == 1 and needle.isalpha() and re.match(f"[{_SPACED}]", needle):
        return mentions_letter(response, unicodedata.normalize("NFKC", answer).strip(), language)
    return re.search(_pattern(needle), _fold_digits(normalize_answer(response))) is not None


FUNCTION_LETTERS: dict[str, str] = {
    # One-letter words (lower case) of the LocQA languages written in Latin script: articles,
    # pronouns, prepositions, conjunctions, the French/Spanish auxiliaries, and the elided
    # articles and pronouns before an apostrophe (French l'/d'/j'..., Italian l'/d'/c'...).
    # German and Indonesian have none; English is always added (models often answer in it).
    "English": "ai",
    "Spanish": "aeouy",
    "French": "acdjlmnsty",
    "Italian": "acdeilmnostv",
    "Portuguese": "aeo",
}
CAPITAL_FUNCTION_LETTERS: dict[str, str] = {
    # Function words written in upper case anywhere in a sentence, so a capital proves nothing.
    "English": "I",
}
_QUOTES = "\"'`*\u2018\u2019\u201a\u201c\u201d\u201e\u00ab\u00bb\u2039\u203a\u300c\u300d\u300e\u300f"
"""Marks that set a letter off as a quoted name: straight and curly quotes, guillemets, CJK
corner brackets, backticks and Markdown emphasis (`**A**`)."""
_SENTENCE_START = re.compile(f"(?:^|[.!?:;\n\u3002\uff01\uff1f\uff1a])[\\s{_QUOTES}(\\-\u2022#>]*$")
_WORD_NEXT = re.compile(f"\\s+[{_SPACED}]")


def mentions_letter(response: str, letter: str, language: str | None) -> bool:
    """Whether `response` names the one-character Latin answer `letter` (e.g. `A`).

    The letter must stand alone (no Latin letter or digit either side) and be either
    - in quotes, case-sensitively (`"A"`, `'A'`, `«A»`, `「A」`, `**A**` for the answer `A`), or
    - not a one-letter function word of English or of `language` (`FUNCTION_LETTERS`): such a
      letter counts only in upper case, and then only when the article/pronoun reading is
      impossible: followed by no Latin word (`the answer is A.`, `A,`), or followed by one but
      neither at a sentence start nor always capitalised (`option A is right`; not `A similar
      idiom…`, nor English `I think…`).
    So "…has a similar idiomatic expression" never mentions `A`; the price is that a sentence
    opening with the letter as its subject ("A is the first letter") is not counted either.
    """
    langs = ["English"] + ([language] if language and language != "English" else [])
    function = "".join(FUNCTION_LETTERS.get(lang, "") for lang in langs)
    capital = "".join(CAPITAL_FUNCTION_LETTERS.get(lang, "") for lang in langs)
    text = unicodedata.normalize("NFKC", response)
    token = re.compile(f"(?<![{_SPACED}]){re.escape(letter)}(?![{_SPACED}])", re.IGNORECASE)
    for m in token.finditer(text):
        before, after, form = text[:m.start()], text[m.end():], m.group()
        if form == letter and _quoted(before, after):
            return True
        if form.casefold() not in function:
            return True
        # A lower-case function letter is the word; a capital one is the word when a Latin
        # word follows and it opens a sentence (or is always capitalised, like English I).
        if form.isupper() and (not _WORD_NEXT.match(after)
                               or (form not in capital and not _SENTENCE_START.search(before))):
            return True
    return False


def _quoted(before: str, after: str) -> bool:
    return bool(before) and bool(after) and before[-1] in _QUOTES and after[0] in _QUOTES


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
