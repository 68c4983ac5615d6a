"""An OpenAI-compatible chat endpoint as the LLM judge's model (`judge=http`), on httpx.

httpx rather than the openai SDK: the SDK retries and follows redirects on its own terms, while
a judge that holds an API key needs each of these under its control —
- no redirects: a 3xx stops the run with the target named (a redirect to another host would
  otherwise carry the `Authorization` header there); point `judge.base_url` at the final URL;
- a deadline per request (`timeout_s`) over the whole exchange, so a server dripping one byte a
  second cannot hold a request open, and a cap on the response size read into memory;
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
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from probe.errors import ProbeInputError

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
    """Deadline of one request, connection to last byte."""
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
    """`.chat(messages) -> texts` over an OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(self, spec: HTTPChatSpec, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, transport: httpx.BaseTransport | None = None) -> None:
        self.spec, self._sleep, self._clock = spec, sleep, clock
        self._client = httpx.Client(follow_redirects=False, transport=transport,
                                    timeout=httpx.Timeout(spec.timeout_s))
        self._lock = threading.Lock()
        self._last_request = -float("inf")
        self._stop = threading.Event()
        self.attempts = 0
        """Requests sent, retries included (for tests and logs)."""

    def chat(self, messages: Sequence[str]) -> list[str]:
        """One reply per message, in order; `concurrency` requests in flight. A fatal endpoint
        error (`JudgeEndpointError`) stops everything."""
        pool = ThreadPoolExecutor(max_workers=max(1, self.spec.concurrency))
        futures = [pool.submit(self._one, m) for m in messages]
        try:
            return [f.result() for f in futures]
        except BaseException:
            self._stop.set()  # requests not yet sent are not sent
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _throttle(self) -> None:
        with self._lock:  # the rate limit holds across the worker threads
            if self.spec.requests_per_minute > 0:
                wait = self._last_request + 60.0 / self.spec.requests_per_minute - self._clock()
                if wait > 0:
                    self._sleep(wait)
            self._last_request = self._clock()
            self.attempts += 1

    def _one(self, message: str) -> str:
        last, retry_after = "", None
        for attempt in range(self.spec.max_retries + 1):
            if self._stop.is_set():
                raise JudgeEndpointError("judge requests stopped after a fatal endpoint error")
            if attempt:
                self._sleep(max(self.spec.backoff_s * 2 ** (attempt - 1), retry_after or 0.0))
            self._throttle()
            try:
                return self._post(message)
            except JudgeEndpointError:
                self._stop.set()  # before this worker takes the next message
                raise
            except _Retry as e:
                last, retry_after = str(e), e.retry_after
            except _GiveUp as e:
                last = str(e)
                break
        return f"<http error after {attempt + 1} attempt(s): {last}>"

    def _post(self, message: str) -> str:
        body = {"model": self.spec.model, "messages": [{"role": "user", "content": message}],
                "temperature": 0, "max_tokens": self.spec.max_tokens}
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.spec.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.spec.base_url.rstrip("/") + "/chat/completions"
        deadline = self._clock() + self.spec.timeout_s
        try:
            with self._client.stream("POST", url, json=body, headers=headers) as resp:
                self._check_status(resp, url)
                data = self._read_capped(resp, deadline)
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

    def _read_capped(self, resp: httpx.Response, deadline: float) -> bytes:
        data = bytearray()
        for chunk in resp.iter_bytes():
            data += chunk
            if len(data) > self.spec.max_response_bytes:
                raise _GiveUp(f"response larger than {self.spec.max_response_bytes} bytes")
            if self._clock() > deadline:
                raise _Retry(f"no complete response within {self.spec.timeout_s:g} s")
        return bytes(data)


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
