"""What LocQA asks its judge (SPEC §4): semantic matching once per template × language, then one
implicit (or, in explicit mode, explicit) verdict per response.

Semantic matches read only the data file, never the evaluated model's answers, so they are
marked cacheable: a sweep asks the judge once per (judge, template, language) and reuses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from probe.benches.locqa.data import LocQAQuestion
from probe.benches.task import JudgeJob, PreparedBench
from probe.benches.locqa.judge_tasks import EXPLICIT, IMPLICIT, SEMANTIC_MATCH
from probe.judges.base import JudgeRequest


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
