"""LocQA's judging: its three judge tasks (prompts, validators, verdict columns), what it asks
the judge of a run, and the deterministic `rules` judge; tasks and judge registered on import.

Tasks (every judge's output passes the validator):

- `semantic_match`, once per template × language. Payload `{"question"?, "us_answer",
  "answers": {locale: raw answer}}` → `{"matches": [locales], "dropped": [...]}`: the locales
  whose answer means the same as the US answer.
- `implicit`, once per response. Payload `{"question"?, "response", "language", "us_answer",
  "gold_answers": [raw strings, US + local]}` → `{"mentioned_answers": [raw gold strings],
  "framing_style": "US_COMPARISON" | "NEUTRAL", "dropped": [...]}`.
- `explicit`, once per (response, locale). Payload `{"question"?, "response", "language"?,
  "locale", "locale_answer", "us_answer"}` → `{"match_locale": bool, "mentions_us_answer": bool}`.

Unknown answers are dropped and flagged: an entry of `matches` or `mentioned_answers` that
names no locale / gold answer of the payload is removed from the list and reported under
`dropped`, so a verdict is kept and the caller can count the flags. A wrong shape (not an
object, a missing key, a non-string entry, an unknown framing label, a non-boolean flag)
raises ValueError, which the LLM judge retries and then records as `judge_error`.

Semantic matches read only the data file, never the evaluated model's answers, so they are
marked cacheable: a sweep asks the judge once per (judge, template, language) and reuses it.

The `rules` judge is the offline baseline: string and number matching on normalised text
(`probe.benches.locqa.rules`), no semantics. It cannot see that `Lunes` means `Monday`, or that
"not 911" does not offer 911, and yes/no answers (`No`) match any such word in a response. Use
the LLM judge for reported numbers; this one makes runs and tests reproducible without one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from probe.benches.locqa.data import LocQAQuestion
from probe.benches.locqa.rules import frames_us, mentions, same_answer
from probe.benches.task import JudgeJob, PreparedBench
from probe.judges.base import JudgeRequest, JudgeResult
from probe.judges.registry import JudgeTask, judge_task, register_judge, register_task
from probe.prompts.parse import normalize_answer

FRAMINGS: tuple[str, ...] = ("US_COMPARISON", "NEUTRAL")


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


JUDGEMENT_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("template", pa.string()), pa.field("language", pa.string()),
    pa.field("dimensions", pa.list_(pa.string())), *IMPLICIT.columns, *SEMANTIC_MATCH.columns, *EXPLICIT.columns,
)
"""The `judgements.parquet` columns of a LocQA run between `prompt_id, task` and the judge's: the
template and language a verdict is about, then the verdict columns of its three tasks. The
null `dimensions` column is CCD's verdict column: LocQA and CCD runs have always been written
in one shared layout (the README's results contract), kept so that stored files stay as they were."""


def judge_jobs(bench: PreparedBench, generations: Sequence[Mapping[str, Any]]) -> list[JudgeJob]:
    """Semantic matching per question, then a verdict per generated answer (`answer` column).

    Only the questions and prompts among `generations` are judged: a shard of a run
    (`bench.shard`) judges its own, and the merged verdicts are the unsharded run's."""
    answers = {g["prompt_id"]: g["answer"] for g in generations}
    prompts = [p for p in bench.prompts if p.prompt_id in answers]
    asked = {(p.value("template"), p.value("language")) for p in prompts}
    questions: Sequence[LocQAQuestion] = [q for q in bench.items if (q.template, q.language) in asked]
    jobs = [JudgeJob(JudgeRequest(SEMANTIC_MATCH.name, {"question": q.question, "us_answer": q.us_answer,
                                                      "answers": {a.locale: a.answer for a in q.answers}}),
                     {"prompt_id": None, "task": SEMANTIC_MATCH.name, "template": q.template, "language": q.language},
                     cacheable=True) for q in questions]
    by_key = {(q.template, q.language): q for q in questions}
    for p in prompts:
        template, language, mode, locale = (p.value(k) for k in ("template", "language", "mode", "locale"))
        q, response = by_key[(template, language)], answers[p.prompt_id]
        row = {"prompt_id": p.prompt_id, "template": template, "language": language}
        if mode == "explicit":
            local = next(a.answer for a in q.answers if a.locale == locale)
            jobs.append(JudgeJob(JudgeRequest(EXPLICIT.name, {
                "question": q.question, "response": response, "language": q.language, "locale": locale,
                "locale_answer": local,
                "us_answer": q.us_answer}), {**row, "task": EXPLICIT.name}))
        else:
            jobs.append(JudgeJob(JudgeRequest(IMPLICIT.name, {
                "question": q.question, "response": response, "language": q.language, "us_answer": q.us_answer,
                "gold_answers": [a.answer for a in q.answers]}), {**row, "task": IMPLICIT.name}))
    return jobs


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
            out.append(JudgeResult(judge_task(r.task).validate(raw, r.payload), None, self.name))
        return out


def _rule_semantic(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"matches": [loc for loc, ans in p["answers"].items() if same_answer(ans, p["us_answer"])]}


def _rule_implicit(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"mentioned_answers": [g for g in gold_answers(p) if mentions(p["response"], g, p.get("language"))],
            "framing_style": "US_COMPARISON" if frames_us(p["response"], p.get("language")) else "NEUTRAL"}


def _rule_explicit(p: Mapping[str, Any]) -> dict[str, Any]:
    language = p.get("language")
    return {"match_locale": mentions(p["response"], p["locale_answer"], language),
            "mentions_us_answer": mentions(p["response"], p["us_answer"], language)}


_RULES = {"semantic_match": _rule_semantic, "implicit": _rule_implicit, "explicit": _rule_explicit}

register_judge(RulesJudge.name, RulesJudge)
