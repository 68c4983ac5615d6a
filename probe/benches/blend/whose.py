"""BLEnD's whose-answer reading (`bench.mode=whose_answer`): which country's annotated answer a
model prefers, with no country named and under each country's cue (docs/benchmarks/blend.md).

For each question id the 16 English versions (`Translation` of the questions files) differ
only in the country phrase. The *neutral form* removes it: the versions' common prefix and
suffix must enclose exactly the country's name (underscores read as spaces), the prefix must end
in a preposition (`in`, `from`, `of`, `across`, `throughout`, `at`, optionally `the`) and the
suffix must not continue the name (`'s`); then `prefix-without-the-phrase + suffix` with spacing
and the space before `?` tidied (`What do people from US usually eat?` → `What do people usually
eat?`; a leading `In US, who …?` becomes `Who …?`). A question whose versions differ beyond the
name, or whose name is not such a phrase, has no clean neutral form: it is listed
(`no_neutral`) and skipped. The common prefix and suffix back off to whole words, since names
can share letters (`UK`, `US`).

A question qualifies by the source's multiple-choice rule: every country's pair kept, and each
country's most-voted annotation (ties: the first in the file) has at least two votes and an
English wording. The candidates are those annotations' first English wordings; countries whose
answers match after normalisation (case, surrounding space and punctuation) share one candidate,
scored once. Each question is asked 17 times: the neutral form (condition `neutral`, no target)
and each country's own English version (condition `cued`, target that country).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from probe.benches.blend.data import COUNTRIES, BlendData, BlendQuestion
from probe.types import Item, Option, Prompt

LETTERS16: tuple[str, ...] = tuple("ABCDEFGHIJKLMNOP")
"""One letter per country: the letter prompt lists each country's answer (a shared one at each of its countries)."""
MIN_VOTES = 2
"""Votes a top answer needs (the source's multiple-choice rule)."""
_PREPOSITION = re.compile(r"(?:^|\s)(?:in|from|of|across|throughout|at)(?: the)? $", re.IGNORECASE)


def display(country: str) -> str:
    """The country as the questions name it (`North_Korea` → `North Korea`)."""
    return country.replace("_", " ")


def normalise(answer: str) -> str:
    """The key two countries' answers are the same candidate under: case-folded, spaces
    collapsed, surrounding punctuation dropped."""
    return " ".join(answer.casefold().split()).strip(" .,;:!?\"'")


def neutral_form(versions: Mapping[str, str]) -> str | None:
    """The question with no country named, from its English versions (country → question), or
    None when they differ beyond the country's name or the name is no removable phrase."""
    texts = list(versions.values())
    prefix = os.path.commonprefix(texts)
    prefix = prefix[:prefix.rfind(" ") + 1]  # names can share letters ("UK", "US"): back off to whole words
    room = min(len(t) for t in texts) - len(prefix)  # the suffix may not overlap the prefix
    suffix = os.path.commonprefix([t[::-1] for t in texts])[:room][::-1]
    suffix = suffix[next((i for i, ch in enumerate(suffix) if not ch.isalnum()), len(suffix)):]
    if any(t[len(prefix):len(t) - len(suffix)] != display(c) for c, t in versions.items()):
        return None
    if prefix.casefold() in ("in ", "in the ") and suffix.startswith(", "):  # "In US, who …?" → "Who …?"
        return suffix[2:3].upper() + suffix[3:]
    phrase = _PREPOSITION.search(prefix)
    if phrase is None or (suffix and suffix[0] not in " ?,.!"):  # `'s`, or a longer word: not a phrase to drop
        return None
    head = prefix[:phrase.start()].rstrip()
    text = f"{head} {suffix}"
    text = re.sub(r"\s+([?,.!])", r"\1", " ".join(text.split()))
    return text if head else None


@dataclass(frozen=True)
class WhoseQuestion:
    """One qualifying question: its neutral form, each country's English version and candidate."""

    qid: str
    topic: str
    neutral: str
    cued: Mapping[str, str]
    """Country → its English version of the question."""
    candidates: tuple[str, ...]
    """Distinct candidate answers, in the order of the first country that gave each."""
    of_country: Mapping[str, int]
    """Country → index of its top answer in `candidates`."""


@dataclass(frozen=True)
class WhoseDesign:
    """The qualifying questions and what was left out."""

    questions: tuple[WhoseQuestion, ...]
    n_questions: int
    """Question ids read."""
    not_qualifying: tuple[str, ...]
    """Ids failing the multiple-choice rule (a dropped pair, a top answer with < 2 votes or no English)."""
    no_neutral: tuple[str, ...]
    """Qualifying ids with no clean neutral form (module docstring), skipped."""


def top_answer(q: BlendQuestion) -> str | None:
    """The country's most-voted English answer (first of a tie), None below `MIN_VOTES` or without English."""
    if not q.annotations:
        return None
    best = max(q.annotations, key=lambda a: a.count)  # max keeps the first of equal counts
    return best.en_answers[0] if best.count >= MIN_VOTES and best.en_answers else None


def design(data: BlendData) -> WhoseDesign:
    """The whose-answer questions of `data` (which must hold all 16 countries), in file order."""
    by_qid: dict[str, dict[str, BlendQuestion]] = {}
    for q in data.questions:
        by_qid.setdefault(q.qid, {})[q.country] = q
    out, failing, no_neutral = [], [], []
    for qid, per in by_qid.items():
        tops = {c: top_answer(per[c]) for c in COUNTRIES}
        if not all(per[c].kept for c in COUNTRIES) or any(t is None for t in tops.values()):
            failing.append(qid)
            continue
        neutral = neutral_form({c: per[c].en_question for c in COUNTRIES})
        if neutral is None:
            no_neutral.append(qid)
            continue
        keys: dict[str, int] = {}
        candidates: list[str] = []
        for c in COUNTRIES:
            key = normalise(str(tops[c]))
            if key not in keys:
                keys[key] = len(candidates)
                candidates.append(str(tops[c]))
        out.append(WhoseQuestion(qid=qid, topic=per[COUNTRIES[0]].topic, neutral=neutral,
                                 cued={c: per[c].en_question for c in COUNTRIES}, candidates=tuple(candidates),
                                 of_country={c: keys[normalise(str(tops[c]))] for c in COUNTRIES}))
    return WhoseDesign(tuple(out), len(by_qid), tuple(failing), tuple(no_neutral))


def items(d: WhoseDesign) -> list[Item]:
    """One item per question: its distinct candidates as options (group: the first country giving it)."""
    return [Item(item_id=q.qid, question=q.neutral, category=q.topic,
                 options=tuple(Option(key=str(i), text=t, group=next(c for c in COUNTRIES if q.of_country[c] == i))
                               for i, t in enumerate(q.candidates))) for q in d.questions]


def prompts(d: WhoseDesign) -> list[Prompt]:
    """The neutral prompt then the 16 cued ones of each question; letter i is country i's answer."""
    out: list[Prompt] = []
    for q in d.questions:
        order = tuple(q.of_country[c] for c in COUNTRIES)
        for target, question in ((None, q.neutral), *((c, q.cued[c]) for c in COUNTRIES)):
            out.append(Prompt(prompt_id=len(out), item_id=q.qid, order=order, groups=COUNTRIES,
                              message=letter_message(question, [q.candidates[o] for o in order]),
                              prefix_key=f"{q.qid}|{target}", category=q.topic,
                              design=(("condition", "neutral" if target is None else "cued"), ("target", target),
                                      ("rotation", 0), ("question", question))))
    return out


def letter_message(question: str, answers: Sequence[str]) -> str:
    """The letter prompt (not the protocol: the reading is the cloze text's; see docs/benchmarks/blend.md)."""
    lines = [f"Question: {question}", "Options:", *(f"{LETTERS16[i]}. {a}" for i, a in enumerate(answers)),
             'Return ONLY valid JSON in exactly this format: {"answer_choice":"X"} (where X is one of A to P).']
    return "\n".join(lines)


def text_message(item: Item, prompt: Prompt, form: str) -> str:
    """The cloze reading's user message: the question alone (neutral, or naming the cued country)."""
    return str(prompt.value("question"))
