"""LLM judge on any backend model that can chat: prompt → JSON → validate, retry, else error."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from probe.judges.base import JudgeRequest, JudgeResult, failed_request
from probe.judges.registry import judge_task


class LLMJudge:
    name = "llm"

    def __init__(self, chat: Any, retries: int = 2, name: str = "llm") -> None:
        self.name = name
        self.chat = chat
        """Anything with `.chat(messages: list[str]) -> list[str]`."""
        self.retries = retries

    def judge(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Batched: each round sends every still-unanswered request, with the previous
        validation error appended so the model can correct itself."""
        results: list[JudgeResult | None] = [None] * len(requests)
        errors: list[str | None] = [None] * len(requests)
        pending = list(range(len(requests)))
        for _ in range(self.retries + 1):
            if not pending:
                break
            prompts = []
            for i in pending:
                r = requests[i]
                text = judge_task(r.task).prompt(r.payload)
                prompts.append(text if errors[i] is None else f"{text}\n\nYour previous reply was invalid: {errors[i]}")
            still = []
            for i, reply in zip(pending, self.chat.chat(prompts)):
                if (failed := failed_request(reply)) is not None:  # no reply to validate: say why, not "no JSON"
                    errors[i] = f"request failed: {failed}"
                    still.append(i)
                    continue
                try:
                    results[i] = JudgeResult(judge_task(requests[i].task).validate(extract_json(reply), requests[i].payload),
                                             None, self.name)
                except ValueError as e:
                    errors[i] = f"{e}; reply was {reply[:200]!r}"
                    still.append(i)
            pending = still
        for i in pending:
            failed = (errors[i] or "").startswith("request failed: ")
            error = errors[i] if failed else f"invalid after {self.retries + 1} attempts: {errors[i]}"
            results[i] = JudgeResult(None, error, self.name)
        return [r for r in results if r is not None]


def extract_json(text: str) -> Any:
    """The first JSON object in a judge's text (models wrap JSON in prose or code fences)."""
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[match.start():])
        except json.JSONDecodeError:
            continue
        return obj
    raise ValueError("no JSON object in the output")
