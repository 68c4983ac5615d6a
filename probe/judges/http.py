"""An OpenAI-compatible chat endpoint as the LLM judge's model (`judge=http`).

The API key is read from the environment variable named by `api_key_env` at request time and
is never stored in a config, manifest or log. Transient failures (connection errors, timeouts,
HTTP 429/5xx, malformed bodies) are retried with exponential backoff; requests are spaced to
`requests_per_minute`. A request that still fails returns a marker text, which the judge's
validator rejects, so the verdict is recorded as `judge_error` — never dropped.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

RETRYABLE = {408, 409, 425, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class HTTPChatSpec:
    base_url: str
    """E.g. `http://127.0.0.1:8000/v1`; `/chat/completions` is appended."""
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_s: float = 1.0
    requests_per_minute: float = 0.0
    """0 = no limit."""
    max_tokens: int = 256


class HTTPChat:
    """`.chat(messages) -> texts` over an OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(self, spec: HTTPChatSpec, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.spec, self._sleep, self._clock = spec, sleep, clock
        self._last_request = -float("inf")
        self.attempts = 0
        """Requests sent, retries included (for tests and logs)."""

    def chat(self, messages: Sequence[str]) -> list[str]:
        return [self._one(m) for m in messages]

    def _throttle(self) -> None:
        if self.spec.requests_per_minute > 0:
            wait = self._last_request + 60.0 / self.spec.requests_per_minute - self._clock()
            if wait > 0:
                self._sleep(wait)
        self._last_request = self._clock()

    def _request(self, message: str) -> urllib.request.Request:
        body = json.dumps({"model": self.spec.model, "messages": [{"role": "user", "content": message}],
                           "temperature": 0, "max_tokens": self.spec.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.spec.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return urllib.request.Request(self.spec.base_url.rstrip("/") + "/chat/completions", data=body,
                                      headers=headers, method="POST")

    def _one(self, message: str) -> str:
        last = ""
        for attempt in range(self.spec.max_retries + 1):
            if attempt:
                self._sleep(self.spec.backoff_s * 2 ** (attempt - 1))
            self._throttle()
            self.attempts += 1
            try:
                with urllib.request.urlopen(self._request(message), timeout=self.spec.timeout_s) as resp:
                    return str(json.loads(resp.read())["choices"][0]["message"]["content"])
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}"
                if e.code not in RETRYABLE:
                    break
            except (urllib.error.URLError, TimeoutError, socket.timeout, ConnectionError) as e:
                last = f"{type(e).__name__}: {e}"
            except (json.JSONDecodeError, KeyError, IndexError, TypeError) as e:
                last = f"malformed response ({type(e).__name__})"
        return f"<http error after {attempt + 1} attempt(s): {last}>"
