"""Judges: turn free text into validated, structured verdicts, chosen by `judge.name`.

This package is the mechanism: the interface, the LLM judge, the HTTP client and the registry.
What a judge is asked (judge tasks) and the deterministic judges belong to the benches, which
register them in `probe.judges.registry` when imported.

A judge answers `JudgeRequest`s with `JudgeResult`s in the same order. Every result is kept:
an output that stays invalid after the retries becomes `error` (stored as `judge_error`),
never a dropped row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from probe.config import Ge, Gt, Le, build
from probe.errors import ProbeInputError
from probe.judges.base import Judge, JudgeRequest, JudgeResult
from probe.judges.http import HTTPChat, HTTPChatSpec
from probe.judges.llm import LLMJudge
from probe.judges.registry import deterministic_judge, judge_names

__all__ = ["Judge", "JudgeRequest", "JudgeResult", "JudgeSpec", "make_judge"]


@dataclass(frozen=True)
class JudgeSpec:
    """The `judge:` config block."""

    name: str | None = None
    """llm: a model judges; http: an OpenAI-compatible endpoint judges; any other name: a
    deterministic judge a bench registered (offline; each has its own entry in the judge group);
    null (`judge=auto`, the default): the bench's own default judge (`probe ls judges`)."""
    model: str | None = None
    """LLM judge: a model config name, hub id or local directory (None = the run's own model);
    HTTP judge: the API's model."""
    retries: Annotated[int, Ge(0)] = 2
    """Re-asks (with the validation error) before a verdict is recorded as judge_error."""
    max_new_tokens: Annotated[int, Ge(1)] = 128
    """Longest judge reply, in tokens."""
    base_url: str | None = None
    """HTTP judge: an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."""
    api_key_env: str = "OPENAI_API_KEY"
    """HTTP judge: the environment variable holding the API key (the key is never stored)."""
    timeout_s: Annotated[float, Gt(0)] = 60.0
    """HTTP judge: seconds per request."""
    max_http_retries: Annotated[int, Ge(0)] = 4
    """HTTP judge: retries (exponential backoff) on connection errors, timeouts, 429/5xx, bad bodies."""
    requests_per_minute: Annotated[float, Ge(0)] = 0.0
    """HTTP judge: rate limit; 0 = none."""
    concurrency: Annotated[int, Ge(1)] = 4
    """HTTP judge: requests in flight at once (under the rate limit)."""
    max_response_bytes: Annotated[int, Ge(1024)] = 1 << 20
    """HTTP judge: a longer response body is a failed request, never read whole."""
    max_error_rate: Annotated[float, Ge(0), Le(1)] = 0.05
    """Share of verdicts that may fail (judge_error) before the run stops with a non-zero exit."""


def make_judge(cfg: JudgeSpec | Mapping[str, Any], chat: Any = None) -> Judge:
    """`judge.name`: `llm` (needs `chat`, a generator with `.chat(messages) -> texts`, e.g.
    `probe.backends.generate.HFGenerator`), `http`, or a deterministic judge a bench registered
    (its module must have been imported)."""
    spec = cfg if isinstance(cfg, JudgeSpec) else build(JudgeSpec, cfg, "judge")
    name = spec.name
    if name is None:  # a run resolves `judge=auto` to its bench's default before it asks for a judge
        raise ProbeInputError(f"judge.name: no judge named; expected one of {list(judge_names())}")
    if name == "http":
        if not spec.base_url or not spec.model:
            raise ProbeInputError("judge=http needs judge.base_url and judge.model")
        judge = LLMJudge(HTTPChat(HTTPChatSpec(
            base_url=spec.base_url, model=spec.model, api_key_env=spec.api_key_env, timeout_s=spec.timeout_s,
            max_retries=spec.max_http_retries, requests_per_minute=spec.requests_per_minute,
            max_tokens=spec.max_new_tokens, concurrency=spec.concurrency,
            max_response_bytes=spec.max_response_bytes)), retries=spec.retries, name="http")
        return judge
    if name == "llm":
        if chat is None:
            raise ProbeInputError("judge=llm needs a model to run on (judge.model or the run's model)")
        return LLMJudge(chat, retries=spec.retries)
    judge = deterministic_judge(name)
    if judge is None:
        raise ProbeInputError(f"judge.name: unknown judge {name!r}; available: {list(judge_names())}")
    return judge
