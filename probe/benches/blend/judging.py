"""BLEnD's judge task and its deterministic `blend_rules` judge (registered on import).

Task `blend_short_answer`, once per generated answer. Payload `{"question", "response",
"language", "gold_answers": [the annotated answers of that country, in the prompt's language]}`
→ `{"correct": bool, "matched_answers": [gold strings the response gives], "dropped": [...]}`.
An answer is correct when it gives any annotated answer (the paper's rule). The validator maps
the entries of `matched_answers` onto the gold strings after normalisation, drops (and flags)
any other, and requires `correct` to agree: true exactly when something matched.

The `blend_rules` judge matches strings, offline and reproducibly. Normalisation (`normalize`):
Unicode NFKC, case folding, every punctuation or symbol character (Unicode categories P and S)
replaced by a space, runs of whitespace collapsed. A gold answer matches when its normalised form
occurs in the normalised response — as a whole word sequence when it is written only in scripts
that separate words by spaces (Latin, Greek, Cyrillic, Armenian, Georgian, Ethiopic, digits), as
a substring otherwise (Chinese, Korean, Arabic, Persian, Bengali: particles and prefixes attach to
words). Example: the response "Jollof rice, usually." matches the gold answer "jollof rice"; the
response "rice" does not match "jollof rice". No lemmatisation or translation: it undercounts
answers phrased differently; use `judge=llm` or `judge=http` for reported numbers.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from probe.benches.task import JudgeJob, PreparedBench
from probe.judges.base import JudgeRequest, JudgeResult
from probe.judges.registry import JudgeTask, register_judge, register_task

_SPACED_SCRIPTS = ("LATIN", "GREEK", "CYRILLIC", "ARMENIAN", "GEORGIAN", "ETHIOPIC", "DIGIT")
"""Unicode name prefixes of characters whose scripts separate words by spaces."""


def normalize(text: str) -> str:
    """NFKC, case-folded, punctuation and symbols as spaces, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    spaced = "".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in folded)
    return " ".join(spaced.split())


def _spaced(needle: str) -> bool:
    return all(ch == " " or unicodedata.name(ch, "").split(" ")[0] in _SPACED_SCRIPTS for ch in needle)


def gives(response: str, answer: str) -> bool:
    """Whether `response` gives the gold `answer` (see the module docstring)."""
    needle, hay = normalize(answer), normalize(response)
    if not needle:
        return False
    if _spaced(needle):
        return f" {needle} " in f" {hay} "
    return needle in hay


def unique_gold(answers: Sequence[str]) -> list[str]:
    """The gold strings, once per normalised form (first wording kept), blank ones left out."""
    seen: dict[str, str] = {}
    for a in answers:
        if normalize(a):
            seen.setdefault(normalize(a), a)
    return list(seen.values())


def short_answer_prompt(payload: Mapping[str, Any]) -> str:
    gold = "\n".join(f'- "{a}"' for a in unique_gold(payload["gold_answers"])) or "- (none)"
    return (
        "You are checking a short answer to a question about everyday culture against the answers "
        "that people of that country gave. Ignore any thinking blocks and judge the final answer.\n\n"
        f"Question: \"{payload.get('question', '')}\"\nModel response: \"{payload['response']}\"\n"
        f"Annotated answers:\n{gold}\n\n"
        "1. matched_answers: EXACTLY which annotated answers the response gives as its answer, semantic "
        "equivalents and other spellings included. Copy the strings exactly from the list.\n"
        "2. correct: true if matched_answers is not empty, else false.\n\n"
        'Reply with JSON only: {"correct": true | false, "matched_answers": [...]}'
    )


def short_answer_validate(obj: Any, payload: Mapping[str, Any]) -> dict[str, Any]:
    """Matched answers mapped to the gold strings after normalisation (others dropped and
    flagged); `correct` must be a boolean that says whether anything matched."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    entries, correct = obj.get("matched_answers"), obj.get("correct")
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ValueError(f"'matched_answers': expected a list of strings, got {entries!r}")
    if not isinstance(correct, bool):
        raise ValueError(f"'correct': expected true or false, got {correct!r}")
    gold = {normalize(g): g for g in unique_gold(payload["gold_answers"])}
    found = {normalize(e) for e in entries if normalize(e) in gold}
    dropped = [e for e in entries if normalize(e) not in gold]
    if correct != bool(found):
        raise ValueError(f"'correct' is {str(correct).lower()} but matched_answers holds "
                         f"{len(found)} annotated answer(s)")
    return {"correct": correct, "matched_answers": [g for n, g in gold.items() if n in found], "dropped": dropped}


SHORT_ANSWER = register_task(JudgeTask("blend_short_answer", short_answer_prompt, short_answer_validate, (
    pa.field("correct", pa.bool_()), pa.field("matched_answers", pa.list_(pa.string())))))


class BlendRulesJudge:
    """Deterministic BLEnD judge: normalised string matching (`gives`), offline."""

    name = "blend_rules"

    def judge(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """One verdict per request, through the task's validator."""
        out = []
        for r in requests:
            if r.task != SHORT_ANSWER.name:
                out.append(JudgeResult(None, f"blend_rules judge has no rules for task {r.task!r}", self.name))
                continue
            matched = [g for g in unique_gold(r.payload["gold_answers"]) if gives(r.payload["response"], g)]
            raw = {"correct": bool(matched), "matched_answers": matched}
            out.append(JudgeResult(SHORT_ANSWER.validate(raw, r.payload), None, self.name))
        return out


register_judge(BlendRulesJudge.name, BlendRulesJudge)


def judge_jobs(bench: PreparedBench, generations: Sequence[Mapping[str, Any]]) -> list[JudgeJob]:
    """One `blend_short_answer` verdict per generated answer (`answer` column), against the
    annotated answers of the prompt's country in the prompt's language."""
    answers = {g["prompt_id"]: g["answer"] for g in generations}
    by_pair = {(q.qid, q.country): q for q in bench.items}
    jobs = []
    for p in bench.prompts:
        if p.prompt_id not in answers:
            continue
        qid, country, language, template = (str(p.value(k)) for k in ("question_id", "country", "language",
                                                                    "template"))
        q = by_pair[(qid, country)]
        payload = {"question": q.question if language == "local" and q.question else q.en_question,
                   "response": answers[p.prompt_id], "language": language, "gold_answers": list(q.gold(language))}
        row = {"prompt_id": p.prompt_id, "task": SHORT_ANSWER.name, "question_id": qid, "country": country,
               "language": language, "template": template}
        jobs.append(JudgeJob(JudgeRequest(SHORT_ANSWER.name, payload), row))
    return jobs


JUDGEMENT_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("question_id", pa.string()), pa.field("country", pa.string()), pa.field("language", pa.string()),
    pa.field("template", pa.string()), *SHORT_ANSWER.columns)
"""The bench columns of a BLEnD `judgements.parquet`: what identifies a verdict, then its fields."""

