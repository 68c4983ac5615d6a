"""The `judge:` config block and the typed judge kinds its name selects.

As a backend's or an intervention's name selects its spec class, a judge's name selects its
`JudgeKind`: whether it needs a local model to run on, which of the block's keys it reads (the
config tree's entry for it shows those), its identity for the run key, and how it is made. `llm`
and `http` are kinds of their own (a model reads the judge task's prompt); every other name is a
deterministic judge a bench registered (`probe.judges.registry`). Code outside this package asks
the kind (`spec.kind.needs_local_model`), never compares the name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Annotated, Any, ClassVar, Protocol

from probe.config import Ge, Gt, Le
from probe.errors import ProbeInputError
from probe.judges.base import Judge
from probe.judges.credentials import redacted
from probe.judges.http import HTTPChat, HTTPChatSpec
from probe.judges.llm import LLMJudge
from probe.judges.registry import deterministic_judge, judge_names


TRANSPORT_KEYS: tuple[str, ...] = ("api_key_env", "timeout_s", "max_http_retries", "requests_per_minute",
                                   "concurrency", "max_response_bytes")
"""The `judge:` keys of the HTTP transport (`JudgeSpec.transport`): how an endpoint's verdicts are
fetched, never what they say, so they stay out of the run key and a run resumed with other timeouts
or limits keeps its verdicts."""


@dataclass(frozen=True)
class JudgeSpec:
    """The `judge:` config block: the judge's own settings, the HTTP endpoint and its transport
    (`TRANSPORT_KEYS`, flat in the config as `judge.timeout_s=…`, one block as `transport`), then the
    run's tolerance for failed verdicts."""

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

    @property
    def kind(self) -> JudgeKind:
        """The typed kind its name selects (`judge_kind`)."""
        return judge_kind(self.name)

    @property
    def transport(self) -> HTTPChatSpec:
        """The HTTP judge's endpoint and transport as the client takes them (`judge=http`, checked first)."""
        judge_kind("http").check(self)
        assert self.base_url is not None and self.model is not None
        return HTTPChatSpec(base_url=self.base_url, model=self.model, api_key_env=self.api_key_env,
                            timeout_s=self.timeout_s, max_retries=self.max_http_retries,
                            requests_per_minute=self.requests_per_minute, max_tokens=self.max_new_tokens,
                            concurrency=self.concurrency, max_response_bytes=self.max_response_bytes)


RUN_POLICY = ("max_error_rate",)
"""`judge:` keys about the run, not the judge: how many failed verdicts stop it."""


class JudgeKind(Protocol):
    """What a judge name selects."""

    name: str
    needs_local_model: bool
    """Whether it runs on a model this process loads (`judge.model` or the run's own)."""
    keys: tuple[str, ...]
    """The `judge:` keys it reads (its config-tree entry shows these)."""

    def check(self, spec: JudgeSpec) -> None:
        """Refuse a block it cannot run with, before anything is generated."""

    def identity(self, spec: JudgeSpec, model: Mapping[str, Any]) -> dict[str, Any]:
        """Its record for the verdict cache and the manifest; `model`: the model an LLM judge runs on."""

    def make(self, spec: JudgeSpec, chat: Any = None) -> Judge:
        """The judge (`chat`: a generator with `.chat(messages) -> texts`, for a judge on a local model)."""


def _record(spec: JudgeSpec) -> dict[str, Any]:
    """The block without the key's variable name, a URL's user info (a credential) redacted."""
    record = {k: v for k, v in asdict(spec).items() if k != "api_key_env"}
    if record.get("base_url"):
        record["base_url"] = redacted(record["base_url"])
    return record


@dataclass(frozen=True)
class LLMKind:
    """A model this process loads reads the judge task's prompt."""

    name: ClassVar[str] = "llm"
    needs_local_model: ClassVar[bool] = True
    keys: ClassVar[tuple[str, ...]] = ("name", "model", "retries", "max_new_tokens", *RUN_POLICY)

    def check(self, spec: JudgeSpec) -> None:
        return None

    def identity(self, spec: JudgeSpec, model: Mapping[str, Any]) -> dict[str, Any]:
        return {**_record(spec), "model": dict(model)}  # the judge is its model: a verdict depends on it

    def make(self, spec: JudgeSpec, chat: Any = None) -> Judge:
        if chat is None:
            raise ProbeInputError("judge=llm needs a model to run on (judge.model or the run's model)")
        return LLMJudge(chat, retries=spec.retries)


@dataclass(frozen=True)
class HTTPKind:
    """An OpenAI-compatible endpoint reads the judge task's prompt."""

    name: ClassVar[str] = "http"
    needs_local_model: ClassVar[bool] = False
    keys: ClassVar[tuple[str, ...]] = (*LLMKind.keys, "base_url", *TRANSPORT_KEYS)

    def check(self, spec: JudgeSpec) -> None:
        if not (spec.base_url and spec.model):  # else found only once all is generated
            raise ProbeInputError("judge=http needs judge.base_url and judge.model")

    def identity(self, spec: JudgeSpec, model: Mapping[str, Any]) -> dict[str, Any]:
        return _record(spec)

    def make(self, spec: JudgeSpec, chat: Any = None) -> Judge:
        return LLMJudge(HTTPChat(spec.transport), retries=spec.retries, name=self.name)


@dataclass(frozen=True)
class RegisteredKind:
    """A deterministic judge a bench registered under `name` (offline, no model)."""

    name: str
    needs_local_model: ClassVar[bool] = False
    keys: ClassVar[tuple[str, ...]] = ("name",)

    def check(self, spec: JudgeSpec) -> None:
        return None

    def identity(self, spec: JudgeSpec, model: Mapping[str, Any]) -> dict[str, Any]:
        return _record(spec)

    def make(self, spec: JudgeSpec, chat: Any = None) -> Judge:
        judge = deterministic_judge(self.name)
        if judge is None:
            raise ProbeInputError(f"judge.name: unknown judge {self.name!r}; available: {list(judge_names())}")
        return judge


MODEL_KINDS: dict[str, JudgeKind] = {k.name: k for k in (LLMKind(), HTTPKind())}
"""The kinds in which a model reads the judge task's prompt (`probe.judges.registry.MECHANISMS`)."""


def judge_kind(name: str | None) -> JudgeKind:
    """The kind `judge.name` selects; a run resolves `judge=auto` (null) to its bench's default first."""
    if name is None:
        raise ProbeInputError(f"judge.name: no judge named; expected one of {list(judge_names())}")
    return MODEL_KINDS.get(name) or RegisteredKind(name)


def make_judge(cfg: JudgeSpec | Mapping[str, Any], chat: Any = None) -> Judge:
    """The judge `judge.name` selects: `llm` (needs `chat`, a generator with `.chat(messages) ->
    texts`, e.g. `probe.backends.generate.HFGenerator`), `http`, or a deterministic judge a bench
    registered (its module must have been imported)."""
    from probe.config import build  # the block from a plain mapping, checked like the config

    spec = cfg if isinstance(cfg, JudgeSpec) else build(JudgeSpec, cfg, "judge")
    return spec.kind.make(spec, chat)
