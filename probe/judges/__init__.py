"""Judges: turn free text into validated, structured verdicts (rationale dimensions now; the
LocQA matching tasks plug into the same interface).

A judge answers `JudgeRequest`s with `JudgeResult`s in the same order. Every result is kept:
an output that stays invalid after the retries becomes `error` (stored as `judge_error`),
never a dropped row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from probe.errors import ProbeInputError


@dataclass(frozen=True)
class JudgeRequest:
    task: str
    """A task name from `probe.judges.tasks.TASKS`."""
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class JudgeResult:
    output: dict[str, Any] | None
    """The validated verdict, or None when the judge failed."""
    error: str | None
    judge: str


class Judge(Protocol):
    name: str

    def judge(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """One result per request, in order."""
        ...


@dataclass(frozen=True)
class JudgeSpec:
    """The `judge:` config block."""

    name: str = "keyword"
    model: str | None = None
    """LLM judge: a model config name (None = the run's own model); HTTP judge: the API's model."""
    retries: int = 2
    max_new_tokens: int = 128
    base_url: str | None = None
    """HTTP judge: an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."""
    api_key_env: str = "OPENAI_API_KEY"
    """HTTP judge: the environment variable holding the API key (the key is never stored)."""
    timeout_s: float = 60.0
    max_http_retries: int = 4
    requests_per_minute: float = 0.0


def make_judge(cfg: Mapping[str, Any], chat: Any = None) -> Judge:
    """`judge.name`: `keyword` (GLOBE dimensions, offline), `rules` (LocQA tasks, offline) or
    `llm` (needs `chat`, a generator
    with `.chat(messages) -> texts`, e.g. `probe.backends.generate.HFGenerator`)."""
    from probe.config import build

    spec = build(JudgeSpec, cfg, "judge")
    name = spec.name
    if name == "keyword":
        from probe.judges.keyword import KeywordJudge

        return KeywordJudge()
    if name == "rules":
        from probe.judges.rules import RulesJudge

        return RulesJudge()
    if name == "http":
        from probe.judges.http import HTTPChat, HTTPChatSpec
        from probe.judges.llm import LLMJudge

        if not spec.base_url or not spec.model:
            raise ProbeInputError("judge=http needs judge.base_url and judge.model")
        judge = LLMJudge(HTTPChat(HTTPChatSpec(
            base_url=spec.base_url, model=spec.model, api_key_env=spec.api_key_env, timeout_s=spec.timeout_s,
            max_retries=spec.max_http_retries, requests_per_minute=spec.requests_per_minute,
            max_tokens=spec.max_new_tokens)), retries=spec.retries, name="http")
        return judge
    if name == "llm":
        from probe.judges.llm import LLMJudge

        if chat is None:
            raise ProbeInputError("judge=llm needs a model to run on (judge.model or the run's model)")
        return LLMJudge(chat, retries=spec.retries)
    raise ProbeInputError(f"judge.name: unknown judge {name!r}; available: ['http', 'keyword', 'llm', 'rules']")
