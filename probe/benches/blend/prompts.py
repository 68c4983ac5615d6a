"""BLEnD's short-answer prompts (the paper's protocol): each question of each country in its
local language and in English, in every chosen template; `{q}` is replaced by the question.

The local-language prompt fills the template's `Translation` with the local question; the English
one fills `English` with the English question. Countries whose local language is English
(`ENGLISH_COUNTRIES`) are asked once, as `local`. A question whose local text is blank is asked
in English only; `skipped_local` counts those pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from probe.benches.blend.data import ENGLISH_COUNTRIES, BlendData, BlendQuestion
from probe.types import Prompt

LANGUAGES: tuple[str, ...] = ("local", "en")


@dataclass(frozen=True)
class ShortAnswerPrompts:
    """The prompts and the pairs left without a local-language prompt."""

    prompts: tuple[Prompt, ...]
    skipped_local: tuple[str, ...]
    """`{question id}|{country}` of each pair whose local question is blank."""


def languages_of(q: BlendQuestion) -> tuple[str, ...]:
    """The languages `q` is asked in."""
    if q.country in ENGLISH_COUNTRIES:
        return ("local",)
    return LANGUAGES if q.question else ("en",)


def build(data: BlendData, templates: Sequence[str]) -> ShortAnswerPrompts:
    """Prompts in template → country → question → language order, ids from 0."""
    prompts: list[Prompt] = []
    for tid in templates:
        for q in data.questions:
            template = data.templates[(q.country, tid)]
            for language in languages_of(q):
                english = language == "en" or (q.country in ENGLISH_COUNTRIES and not q.question)
                text = (template.english if language == "en" else template.local).replace(
                    "{q}", q.en_question if english else q.question)
                prompts.append(_prompt(len(prompts), q, tid, language, text))
    skipped = tuple(f"{q.qid}|{q.country}" for q in data.questions if "local" not in languages_of(q))
    return ShortAnswerPrompts(tuple(prompts), skipped)


def _prompt(prompt_id: int, q: BlendQuestion, template: str, language: str, text: str) -> Prompt:
    """The generic record: a question id × country is the item; its design fields are the table's columns."""
    return Prompt(prompt_id=prompt_id, item_id=f"{q.qid}|{q.country}", order=(), groups=(), message=text,
                  prefix_key=f"{template}|{q.country}|{language}", category=q.topic,
                  design=(("question_id", q.qid), ("country", q.country), ("language", language),
                         ("template", template), ("kept", "true" if q.kept else "false")))
