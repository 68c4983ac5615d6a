"""LocQA: open questions in 12 languages, one gold answer per locale (docs/benchmarks/locqa.md).

The published `locqa.json` is read from a local path or downloaded once from its source URL
into the cache; its sha256 is checked against `bench.sha256`, which defaults to the published
file's checksum, so a silently changed upstream file stops the run. A deliberately edited
local copy needs `bench.sha256=null` (or its own checksum).

Loading validates every template, language and locale where it enters. Locale keys are
normalised (two Chinese keys contain a newline) with the raw key kept; answers are kept
exactly as in the file, because the judgement tables report raw gold strings, and are compared
through `probe.prompts.parse.normalize_answer`. Prompts are generated, not letter-scored: there
is no answer cue.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from probe.benches.spec_header import DownloadedBench
from probe.benches.sources import MAX_DOWNLOAD_BYTES, fetch
from probe.config import Ge
from probe.errors import ProbeInputError
from probe.files import utf8_error
from probe.types import Prompt

SOURCE_URL = "https://raw.githubusercontent.com/google-research-datasets/locqa/main/locqa.json"
SOURCE_SHA256 = "932f69f6947b120312889afac1ec88926863eedf93e9ed00a444b88b5dc82025"
MODES: tuple[str, ...] = ("zero_shot", "three_shot", "explicit")
US_LANGUAGE, US_LOCALE = "English", "USA"
Mode = Literal["zero_shot", "three_shot", "explicit"]

EXEMPLAR_KEYS: tuple[str, ...] = (
    "question_label", "answer_label", "arith_q", "arith_a", "ocean_q", "ocean_a", "planet_q", "planet_a",
)
EXEMPLARS: dict[str, dict[str, str]] = {
    # Locale-neutral three-shot exemplars (2+2, largest ocean, planet closest to the Sun): the
    # answers are the same everywhere, so they show the answer format without hinting at a locale.
    "English": {"question_label": "Question", "answer_label": "Answer",
                "arith_q": "What is 2+2?", "arith_a": "4",
                "ocean_q": "What is the largest ocean on Earth?", "ocean_a": "The Pacific Ocean",
                "planet_q": "What planet is closest to the Sun?", "planet_a": "Mercury"},
    "Spanish": {"question_label": "Pregunta", "answer_label": "Respuesta",
                "arith_q": "¿Cuánto es 2+2?", "arith_a": "4",
                "ocean_q": "¿Cuál es el océano más grande de la Tierra?", "ocean_a": "El océano Pacífico",
                "planet_q": "¿Qué planeta está más cerca del Sol?", "planet_a": "Mercurio"},
    "French": {"question_label": "Question", "answer_label": "Réponse",
               "arith_q": "Combien font 2+2 ?", "arith_a": "4",
               "ocean_q": "Quel est le plus grand océan de la Terre ?", "ocean_a": "L'océan Pacifique",
               "planet_q": "Quelle planète est la plus proche du Soleil ?", "planet_a": "Mercure"},
    "German": {"question_label": "Frage", "answer_label": "Antwort",
               "arith_q": "Was ist 2+2?", "arith_a": "4",
               "ocean_q": "Was ist der größte Ozean der Erde?", "ocean_a": "Der Pazifische Ozean",
               "planet_q": "Welcher Planet ist der Sonne am nächsten?", "planet_a": "Merkur"},
    "Hebrew": {"question_label": "שאלה", "answer_label": "תשובה",
               "arith_q": "כמה זה 2+2?", "arith_a": "4",
               "ocean_q": "מהו האוקיינוס הגדול ביותר בכדור הארץ?", "ocean_a": "האוקיינוס השקט",
               "planet_q": "איזה כוכב לכת הוא הקרוב ביותר לשמש?", "planet_a": "כוכב חמה"},
    "Hindi": {"question_label": "प्रश्न", "answer_label": "उत्तर",
              "arith_q": "2+2 कितना होता है?", "arith_a": "4",
              "ocean_q": "पृथ्वी का सबसे बड़ा महासागर कौन सा है?", "ocean_a": "प्रशांत महासागर",
              "planet_q": "सूर्य के सबसे निकट कौन सा ग्रह है?", "planet_a": "बुध"},
    "Indonesian": {"question_label": "Pertanyaan", "answer_label": "Jawaban",
                   "arith_q": "Berapa 2+2?", "arith_a": "4",
                   "ocean_q": "Apa samudra terbesar di Bumi?", "ocean_a": "Samudra Pasifik",
                   "planet_q": "Planet apa yang paling dekat dengan Matahari?", "planet_a": "Merkurius"},
    "Italian": {"question_label": "Domanda", "answer_label": "Risposta",
                "arith_q": "Quanto fa 2+2?", "arith_a": "4",
                "ocean_q": "Qual è l'oceano più grande della Terra?", "ocean_a": "L'Oceano Pacifico",
                "planet_q": "Qual è il pianeta più vicino al Sole?", "planet_a": "Mercurio"},
    "Japanese": {"question_label": "質問", "answer_label": "答え",
                 "arith_q": "2+2はいくつですか？", "arith_a": "4",
                 "ocean_q": "地球で最も大きい海は何ですか？", "ocean_a": "太平洋",
                 "planet_q": "太陽に最も近い惑星はどれですか？", "planet_a": "水星"},
    "Korean": {"question_label": "질문", "answer_label": "답변",
               "arith_q": "2+2는 얼마인가요?", "arith_a": "4",
               "ocean_q": "지구에서 가장 큰 바다는 무엇인가요?", "ocean_a": "태평양",
               "planet_q": "태양에 가장 가까운 행성은 무엇인가요?", "planet_a": "수성"},
    "Portuguese": {"question_label": "Pergunta", "answer_label": "Resposta",
                   "arith_q": "Quanto é 2+2?", "arith_a": "4",
                   "ocean_q": "Qual é o maior oceano da Terra?", "ocean_a": "O Oceano Pacífico",
                   "planet_q": "Qual planeta é o mais próximo do Sol?", "planet_a": "Mercúrio"},
    "Chinese": {"question_label": "问题", "answer_label": "答案",
                "arith_q": "2+2等于几？", "arith_a": "4",
                "ocean_q": "地球上最大的海洋是什么？", "ocean_a": "太平洋",
                "planet_q": "哪颗行星离太阳最近？", "planet_a": "水星"},
}


@dataclass(frozen=True)
class LocQASpec(DownloadedBench):
    """The `bench:` config block of LocQA: open questions in 12 languages, one gold answer per locale."""

    name: str = "locqa"
    kind: str = "locqa"
    path: str | None = None
    """A local locqa.json; null downloads `url` once into the cache."""
    url: str = SOURCE_URL
    sha256: str | None = SOURCE_SHA256
    """Expected checksum, checked for a local `path` too; null accepts a locally edited copy."""
    mode: Mode = "zero_shot"
    """zero_shot (the question alone) | three_shot (base vs instruct) | explicit (locale stated)."""
    languages: tuple[str, ...] = ()
    """Languages to keep (file names, e.g. `Japanese`); empty keeps all."""
    categories: tuple[str, ...] = ()
    """Categories to keep (e.g. `Law`); empty keeps all."""
    limit: Annotated[int, Ge(1)] | None = None
    """Ask only the first N templates (after the filters; smoke tests); null = all."""


@dataclass(frozen=True)
class LocaleAnswer:
    """One locale's gold answer to one translated question."""

    locale: str
    """Whitespace-normalised key (`China (Chinese)`), for tables and prompts."""
    locale_raw: str
    """The key exactly as in the file (`China\\n(Chinese)`), for display and provenance."""
    answer: str
    """Exactly as in the file (trailing spaces, `N/A` included); compare via `normalize_answer`."""


@dataclass(frozen=True)
class LocQAQuestion:
    """One template in one language, with the gold answer of every locale of that language."""

    template: str
    """The English template: the file's top-level key, the question's identity across languages."""
    category: str
    language: str
    question: str
    """`translated_question`, stripped."""
    answers: tuple[LocaleAnswer, ...]
    us_answer: str
    """The template's English `USA` answer (raw), the reference for B_US in every language."""


@dataclass(frozen=True)
class LocQAPrompt:
    """One prompt to generate for: a question in one mode (and, explicit mode, one locale)."""

    prompt_id: int
    template: str
    category: str
    language: str
    mode: Mode
    locale: str | None
    """Explicit mode: the normalised locale stated in the prompt; otherwise None."""
    question: str
    message: str
    """The final user text: the question, or `Locale: {locale}. {question}`."""
    exemplars: tuple[tuple[str, str], ...] = ()
    """Three-shot (question, answer) pairs in the prompt's language; empty otherwise."""
    labels: tuple[str, str] = ("Question", "Answer")
    """The question/answer labels of base-model text, in the prompt's language."""

    def to_prompt(self) -> Prompt:
        """The generic record rendering, backends and the results writer take: exemplars as chat
        turns for instruct models, `Question: …\nAnswer: …` blocks (labels in the language)
        ending in `Answer:` for base models; the LocQA columns ride along in `design`."""
        q_label, a_label = self.labels
        blocks = [f"{q_label}: {q}\n{a_label}: {a}" for q, a in self.exemplars]
        blocks.append(f"{q_label}: {self.message}\n{a_label}:")
        return Prompt(
            prompt_id=self.prompt_id, item_id=f"{self.template} | {self.language}", order=(), groups=(),
            message=self.message, prefix_key=f"{self.template}|{self.language}", category=self.category,
            shots=self.exemplars, base_text="\n\n".join(blocks),
            design=(("template", self.template), ("language", self.language), ("mode", self.mode),
                    ("locale", self.locale)),
        )


def resolve_source(spec: LocQASpec, cache_dir: Path) -> Path:
    """The JSON to read: `spec.path`, or the cached download of `spec.url` (fetched once, parsed
    before it is cached), checked against `spec.sha256` (the published file's by default)."""
    return fetch(spec.path, spec.url, spec.sha256, cache_dir / "locqa", load_questions,
                 spec.max_download_bytes)


def normalize_locale(key: str) -> str:
    """A locale key with runs of whitespace (newlines included) collapsed to one space."""
    return " ".join(key.split())


def first_templates(questions: Sequence[LocQAQuestion], limit: int | None) -> list[LocQAQuestion]:
    """The questions of the first `limit` templates in file order (all when None)."""
    keep = set(list(dict.fromkeys(q.template for q in questions))[:limit])
    return [q for q in questions if q.template in keep]


def load_questions(
    path: Path, languages: Sequence[str] = (), categories: Sequence[str] = ()
) -> list[LocQAQuestion]:
    """Read and validate locqa.json; one question per (template, language), in file order.

    Errors name the file, the template, the language and the field. Filters must name
    languages/categories present in the file, so a typo cannot silently select nothing.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"), object_pairs_hook=_no_duplicates(path))
    except json.JSONDecodeError as e:
        raise ProbeInputError(
            f"{path}: invalid or truncated JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except UnicodeDecodeError:
        raise ProbeInputError(f"{path}: not valid UTF-8 ({utf8_error(path)})") from None
    except RecursionError:  # `[[[[…` thousands deep: the parser's recursion limit, not a traceback
        raise ProbeInputError(f"{path}: JSON nested too deeply to read; expected a JSON object of templates") from None
    if not isinstance(data, dict) or not data:
        raise ProbeInputError(f"{path}: expected a non-empty JSON object of templates, got {type(data).__name__}")
    questions = [q for template, obj in data.items() for q in _template(path, template, obj)]
    for name, wanted, present in (("languages", languages, [q.language for q in questions]),
                                  ("categories", categories, [q.category for q in questions])):
        unknown = sorted(set(wanted) - set(present))
        if unknown:
            raise ProbeInputError(f"bench.{name}: {unknown} not in {path}; it has {list(dict.fromkeys(present))}")
    return [q for q in questions
            if (not languages or q.language in languages) and (not categories or q.category in categories)]


def _no_duplicates(path: Path):
    """A JSON object hook that rejects repeated keys, which `json` would silently drop."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ProbeInputError(f"{path}: duplicate key {key!r} in one JSON object")
            out[key] = value
        return out
    return hook


def _template(path: Path, template: str, obj: Any) -> list[LocQAQuestion]:
    where = f"{path}: template {template!r}"
    if not template.strip():
        raise ProbeInputError(f"{where}: empty template key")
    if not isinstance(obj, dict):
        raise ProbeInputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    category = obj.get("category")
    if not isinstance(category, str) or not category.strip():
        raise ProbeInputError(f"{where}, field 'category': expected a non-empty string, got {category!r}")
    langs = obj.get("languages")
    if not isinstance(langs, dict) or not langs:
        raise ProbeInputError(f"{where}, field 'languages': expected a non-empty object, got {langs!r}")
    parsed = {lang: _language(f"{where}, language {lang!r}", lv) for lang, lv in langs.items()}
    us = next((a.answer for a in parsed.get(US_LANGUAGE, ("", ()))[1] if a.locale == US_LOCALE), None)
    if us is None:
        raise ProbeInputError(
            f"{where}, language {US_LANGUAGE!r}, field 'answers': no {US_LOCALE!r} answer "
            "(the US reference answer every language is compared with)"
        )
    return [LocQAQuestion(template=template, category=category.strip(), language=lang, question=question,
                          answers=answers, us_answer=us) for lang, (question, answers) in parsed.items()]


def _language(where: str, obj: Any) -> tuple[str, tuple[LocaleAnswer, ...]]:
    if not isinstance(obj, dict):
        raise ProbeInputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    question = obj.get("translated_question")
    if not isinstance(question, str) or not question.strip():
        raise ProbeInputError(f"{where}, field 'translated_question': expected a non-empty string, got {question!r}")
    answers = obj.get("answers")
    if not isinstance(answers, dict) or not answers:
        raise ProbeInputError(f"{where}, field 'answers': expected a non-empty object locale → answer, got {answers!r}")
    out: dict[str, LocaleAnswer] = {}
    for raw, answer in answers.items():
        locale = normalize_locale(raw)
        field = f"{where}, field 'answers', locale {raw!r}"
        if not locale:
            raise ProbeInputError(f"{field}: empty locale key")
        if locale in out:
            raise ProbeInputError(f"{field}: same locale as {out[locale].locale_raw!r} after normalisation")
        if not isinstance(answer, str) or not answer.strip():
            raise ProbeInputError(f"{field}: expected a non-empty answer string ('N/A' if none), got {answer!r}")
        out[locale] = LocaleAnswer(locale=locale, locale_raw=raw, answer=answer)
    return question.strip(), tuple(out.values())


def build_prompts(questions: Sequence[LocQAQuestion], spec: LocQASpec) -> list[LocQAPrompt]:
    """Prompts of `spec.mode`, ids sequential in template → language → locale order.

    zero_shot and three_shot: one prompt per question; explicit: one per (question, locale).
    """
    if spec.mode not in MODES:
        raise ProbeInputError(f"bench.mode: expected one of {list(MODES)}, got {spec.mode!r}")
    prompts: list[LocQAPrompt] = []
    for q in questions:
        ex = EXEMPLARS.get(q.language)
        if ex is None and spec.mode == "three_shot":
            raise ProbeInputError(f"bench.mode=three_shot: no exemplars for language {q.language!r} "
                                  f"(template {q.template!r}); languages with exemplars: {list(EXEMPLARS)}")
        labels = (ex["question_label"], ex["answer_label"]) if ex else ("Question", "Answer")
        shots = tuple((ex[f"{k}_q"], ex[f"{k}_a"]) for k in ("arith", "ocean", "planet")) \
            if ex and spec.mode == "three_shot" else ()
        # The explicit control names the locale in English (the paper's wording) in every language.
        targets = [(a.locale, f"Locale: {a.locale}. {q.question}") for a in q.answers] \
            if spec.mode == "explicit" else [(None, q.question)]
        for locale, message in targets:
            prompts.append(LocQAPrompt(
                prompt_id=len(prompts), template=q.template, category=q.category, language=q.language,
                mode=spec.mode, locale=locale, question=q.question, message=message, exemplars=shots,
                labels=labels,
            ))
    return prompts


def language_locales(questions: Sequence[LocQAQuestion]) -> Mapping[str, tuple[str, ...]]:
    """Normalised locales of each language (first-seen order): C_L of the metrics."""
    seen: dict[str, dict[str, None]] = {}
    for q in questions:
        seen.setdefault(q.language, {}).update(dict.fromkeys(a.locale for a in q.answers))
    return {lang: tuple(locs) for lang, locs in seen.items()}
