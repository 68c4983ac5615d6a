"""An OpenAI-compatible chat endpoint as the LLM judge's model (`judge=http`), on httpx.

httpx rather than the openai SDK: the SDK retries and follows redirects on its own terms, while
a judge that holds an API key needs each of these under its control —
- no redirects: a 3xx stops the run with the target named (a redirect to another host would
  otherwise carry the `Authorization` header there); point `judge.base_url` at the final URL;
- one wall-clock deadline per request (`timeout_s`), from connecting to the last body byte, and
  a cap on the response size read into memory (see `HTTPChat` for how the deadline is kept);
- HTTP 401/403/404 stop the run at once with what to check (key variable, URL, model), instead
  of thousands of requests that all fail;
- 429/5xx, timeouts, connection errors and malformed bodies are retried with exponential backoff,
  waiting at least what `Retry-After` asks; requests are spaced to `requests_per_minute` and run
  `concurrency` at a time.
The API key is read from the environment variable `api_key_env` at request time and is never
stored in a config, manifest or log. A request that still fails returns a marker text, which the
judge's validator rejects, so the verdict is recorded as `judge_error` — never dropped.
"""

from __future__ import annotations

import email.utils
import json
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
import httpx

from probe.errors import ProbeInputError
from probe.judges.base import FAILED_REQUEST
from probe.judges.credentials import split_credentials

RETRYABLE = {408, 409, 425, 429, 500, 502, 503, 504}
FATAL = {401: "the key was refused: check the variable judge.api_key_env names",
         403: "the key may not use this endpoint or model: check judge.api_key_env and judge.model",
         404: "no such endpoint or model: check judge.base_url (…/v1) and judge.model"}
MAX_RETRY_AFTER_S = 300.0
"""The longest `Retry-After` honoured; a longer one is treated as this."""


class JudgeEndpointError(ProbeInputError):
    """The endpoint refuses every request (401/403/404, or a redirect): the run stops."""


class _Retry(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class _GiveUp(Exception):
    """A failure retrying cannot fix (a 4xx other than the fatal ones, an oversized body)."""


@dataclass(frozen=True)
class HTTPChatSpec:
    """How to reach an OpenAI-compatible `/chat/completions` endpoint."""

    base_url: str
    """E.g. `http://127.0.0.1:8000/v1`; `/chat/completions` is appended."""
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    """Wall-clock deadline of one request (one attempt), from connecting to the last body byte."""
    max_retries: int = 4
    backoff_s: float = 1.0
    requests_per_minute: float = 0.0
    """0 = no limit."""
    max_tokens: int = 256
    concurrency: int = 4
    """Requests in flight at once."""
    max_response_bytes: int = 1 << 20
    """A longer response body is a failed request (never read whole into memory)."""


class HTTPChat:
    """`.chat(messages) -> texts` over an OpenAI-compatible `/chat/completions` endpoint.

    Why async inside a synchronous call: httpx's timeouts are per operation — the read timeout
    restarts with every chunk received — so a server that answers `HTTP/1.1 200 OK` and then
    drips one header or body byte every half second never trips one, and a blocked synchronous
    read cannot be interrupted from outside its thread. An anyio cancel scope (`fail_after`)
    around the whole exchange is one deadline over connect, send, headers and body: it cancels
    the request wherever it waits, and httpcore closes the connection it cancels, so nothing
    half-read returns to the pool. Each `chat` call runs its requests as tasks of one event loop
    (`anyio.run`), `concurrency` at a time; a fatal endpoint error cancels the rest.
    """

    def __init__(self, spec: HTTPChatSpec, sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 clock: Callable[[], float] = time.monotonic,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.spec, self._sleep, self._clock, self._transport = spec, sleep, clock, transport
        self._last_request = -float("inf")
        self.attempts = 0
        """Requests sent, retries included (for tests and logs)."""

    def chat(self, messages: Sequence[str]) -> list[str]:
        """One reply per message, in order; `concurrency` requests in flight. A fatal endpoint
        error (`JudgeEndpointError`) stops everything: requests in flight are cancelled and
        requests not yet sent are not sent."""
        try:
            return anyio.run(self._chat, list(messages))
        except BaseExceptionGroup as group:  # a task group reports its tasks' errors as a group
            fatal, _ = group.split(JudgeEndpointError)
            raise (_first(fatal) if fatal else group) from None

    async def _chat(self, messages: list[str]) -> list[str]:
        replies = [""] * len(messages)
        slots, throttle = anyio.Semaphore(max(1, self.spec.concurrency)), anyio.Lock()

        async def one(i: int, client: httpx.AsyncClient) -> None:
            async with slots:
                replies[i] = await self._one(client, throttle, messages[i])

        # The per-operation timeout is the deadline too: it is never the one that fires first.
        async with httpx.AsyncClient(follow_redirects=False, transport=self._transport,
                                     timeout=httpx.Timeout(self.spec.timeout_s)) as client:
            async with anyio.create_task_group() as tasks:
                for i in range(len(messages)):
                    tasks.start_soon(one, i, client)
        return replies

    async def _throttle(self, lock: anyio.Lock) -> None:
        async with lock:  # the rate limit holds across the concurrent requests
            if self.spec.requests_per_minute > 0:
                wait = self._last_request + 60.0 / self.spec.requests_per_minute - self._clock()
                if wait > 0:
                    await self._sleep(wait)
            self._last_request = self._clock()
            self.attempts += 1

    async def _one(self, client: httpx.AsyncClient, throttle: anyio.Lock, message: str) -> str:
        last, retry_after = "", None
        for attempt in range(self.spec.max_retries + 1):
            if attempt:
                await self._sleep(max(self.spec.backoff_s * 2 ** (attempt - 1), retry_after or 0.0))
            await self._throttle(throttle)
            try:
                return await self._post(client, message)
            except _Retry as e:
                last, retry_after = str(e), e.retry_after
            except _GiveUp as e:
                last = str(e)
                break
        return f"{FAILED_REQUEST}{attempt + 1} attempt(s): {last}>"

    async def _post(self, client: httpx.AsyncClient, message: str) -> str:
        body = {"model": self.spec.model, "messages": [{"role": "user", "content": message}],
                "temperature": 0, "max_tokens": self.spec.max_tokens}
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.spec.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url, auth = split_credentials(self.spec.base_url.rstrip("/") + "/chat/completions")
        try:
            with anyio.fail_after(self.spec.timeout_s):
                async with client.stream("POST", url, json=body, headers=headers,
                                         **({"auth": auth} if auth else {})) as resp:
                    self._check_status(resp, url)
                    data = await self._read_capped(resp)
        except TimeoutError:
            raise _Retry(f"timed out: no complete response within {self.spec.timeout_s:g} s (judge.timeout_s)") from None
        except (httpx.TimeoutException, httpx.TransportError) as e:
            raise _Retry(f"{type(e).__name__}: {e}") from None
        try:
            return str(json.loads(data)["choices"][0]["message"]["content"])
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError) as e:
            raise _Retry(f"malformed response ({type(e).__name__})") from None

    def _check_status(self, resp: httpx.Response, url: str) -> None:
        status = resp.status_code
        if resp.is_redirect:
            raise JudgeEndpointError(
                f"judge endpoint {url} answered HTTP {status} redirecting to {resp.headers.get('location')!r}; "
                "probe does not follow redirects (the API key must not travel to another address): set "
                "judge.base_url to the final endpoint")
        if status in FATAL:
            raise JudgeEndpointError(f"judge endpoint {url} answered HTTP {status}: {FATAL[status]}")
        if status in RETRYABLE:
            raise _Retry(f"HTTP {status}", _retry_after(resp.headers.get("retry-after")))
        if status >= 400:
            raise _GiveUp(f"HTTP {status}")

    async def _read_capped(self, resp: httpx.Response) -> bytes:
        data = bytearray()
        async for chunk in resp.aiter_bytes():
            data += chunk
            if len(data) > self.spec.max_response_bytes:
                raise _GiveUp(f"response larger than {self.spec.max_response_bytes} bytes")
        return bytes(data)


def _first(group: BaseExceptionGroup) -> BaseException:
    """The first leaf exception of a (possibly nested) exception group."""
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta seconds or an HTTP date), capped."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
