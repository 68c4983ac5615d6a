"""The HTTP judge against hostile or broken endpoints: a redirect never carries the key away, a
drip-feeding server cannot hold a request past its deadline, a huge body is not read into
memory, Retry-After is honoured, a refused key stops the run at once, and requests run
`concurrency` at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import run_probe

from probe.judges.http import HTTPChat, HTTPChatSpec, JudgeEndpointError

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
OK = json.dumps({"choices": [{"message": {"content": '{"dimensions": []}'}}]}).encode()


class Endpoint(BaseHTTPRequestHandler):
    """Behaves as `mode` says; records every request it receives (with its Authorization header)."""

    mode = "ok"
    target = ""
    seen: list[str | None] = []
    in_flight = 0
    max_in_flight = 0
    lock = threading.Lock()
    calls = 0

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        cls = type(self)
        with cls.lock:
            cls.seen.append(self.headers.get("Authorization"))
            cls.calls += 1
            call = cls.calls
            cls.in_flight += 1
            cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)
        try:
            self._respond(cls.mode, call)
        finally:
            with cls.lock:
                cls.in_flight -= 1

    def _respond(self, mode: str, call: int) -> None:
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", type(self).target)
            self.end_headers()
        elif mode in ("401", "500"):
            self.send_response(int(mode))
            self.end_headers()
        elif mode == "retry_after" and call == 1:
            self.send_response(429)
            self.send_header("Retry-After", "3")
            self.end_headers()
        elif mode == "drip":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self._drip()
        elif mode == "drip_headers":  # the status line, then the headers one byte at a time
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            self._drip()
        elif mode == "huge":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            block = b"x" * (1 << 20)
            try:
                for _ in range(200):  # 200 MiB if anyone read it all
                    self.wfile.write(block)
            except (BrokenPipeError, ConnectionResetError):
                pass
        else:
            if mode == "slow":
                time.sleep(0.3)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(OK)

    def _drip(self) -> None:
        try:
            for _ in range(40):  # one byte every 0.5 s for 20 s: every socket read succeeds
                self.wfile.write(b"X")
                self.wfile.flush()
                time.sleep(0.5)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def log_message(self, *args: object) -> None:
        pass


def _serve(handler: type) -> tuple[ThreadingHTTPServer, str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


@pytest.fixture
def endpoint() -> Iterator[tuple[type, str]]:
    handler = type("Handler", (Endpoint,), {"seen": [], "calls": 0, "in_flight": 0, "max_in_flight": 0,
                                            "lock": threading.Lock()})
    httpd, url = _serve(handler)
    yield handler, url
    httpd.shutdown()


def _chat(url: str, **kw: object) -> HTTPChat:
    return HTTPChat(HTTPChatSpec(base_url=url, model="m", api_key_env="PROBE_TEST_KEY", backoff_s=0.01, **kw))


def test_a_redirect_never_carries_the_key_elsewhere(endpoint: tuple[type, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_TEST_KEY", "sk-secret")
    first, url = endpoint
    other = type("Other", (Endpoint,), {"seen": [], "calls": 0, "lock": threading.Lock()})
    httpd, other_url = _serve(other)
    try:
        first.mode, first.target = "redirect", other_url + "/chat/completions"
        with pytest.raises(JudgeEndpointError, match="redirecting to .* does not follow redirects"):
            _chat(url).chat(["hello"])
    finally:
        httpd.shutdown()
    assert first.seen == ["Bearer sk-secret"] and other.seen == []


@pytest.mark.parametrize("mode", ["drip", "drip_headers"])
def test_a_drip_feeding_server_cannot_hold_a_request(mode: str, endpoint: tuple[type, str]) -> None:
    """One wall-clock deadline per attempt, from connect to the last byte, whether the server
    drips the body or the headers (httpx's own read timeout restarts with every byte)."""
    handler, url = endpoint
    handler.mode = mode
    t0 = time.monotonic()
    [reply] = _chat(url, timeout_s=1.0, max_retries=1).chat(["hello"])
    elapsed = time.monotonic() - t0
    assert reply == "<http error after 2 attempt(s): timed out: no complete response within 1 s (judge.timeout_s)>"
    assert handler.calls == 2  # the retry policy still applies after a deadline
    assert 2.0 <= elapsed < 3.5, elapsed  # two attempts of a 1 s deadline, not the 20 s the server drips


def test_a_huge_body_is_not_read_into_memory(endpoint: tuple[type, str]) -> None:
    handler, url = endpoint
    handler.mode = "huge"
    tracemalloc.start()
    [reply] = _chat(url, max_retries=0, max_response_bytes=1 << 20).chat(["hello"])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "response larger than 1048576 bytes" in reply
    assert peak < 16 << 20, peak  # the 200 MiB body never lands in memory


def test_retry_after_is_honoured(endpoint: tuple[type, str]) -> None:
    handler, url = endpoint
    handler.mode = "retry_after"
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    chat = HTTPChat(HTTPChatSpec(base_url=url, model="m", backoff_s=0.01), sleep=sleep)
    assert chat.chat(["hello"]) == ['{"dimensions": []}']
    assert sleeps == [3.0] and handler.calls == 2


def test_a_refused_key_stops_at_the_first_request(endpoint: tuple[type, str]) -> None:
    handler, url = endpoint
    handler.mode = "401"
    with pytest.raises(JudgeEndpointError, match="HTTP 401: the key was refused: check the variable judge.api_key_env"):
        _chat(url, concurrency=1).chat(["a", "b", "c"])
    assert handler.calls == 1


def test_requests_run_concurrency_at_a_time(endpoint: tuple[type, str]) -> None:
    handler, url = endpoint
    handler.mode = "slow"
    replies = _chat(url, concurrency=3).chat([f"m{i}" for i in range(9)])
    assert replies == ['{"dimensions": []}'] * 9 and handler.max_in_flight == 3


LOCQA = {"What side of the road do people drive on?": {"category": "State", "languages": {
    "English": {"translated_question": "What side of the road do people drive on?",
                "answers": {"USA": "Right", "UK": "Left", "Australia": "Left"}},
    "Spanish": {"translated_question": "¿Por qué lado de la carretera se conduce?",
                "answers": {"Spain": "Derecha", "Mexico": "Derecha"}}}}}


def test_a_judge_that_cannot_answer_the_bench_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    data = tmp_path / "locqa.json"
    data.write_text(json.dumps(LOCQA), encoding="utf-8")
    env = {**os.environ, "PROBE_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["model=tiny", "bench=locqa", f"bench.path={data}",
                           "bench.sha256=null", "judge=keyword", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "judge=keyword cannot judge LocQA; its judges: judge=rules (the default: no judge option)" in proc.stderr
    assert not (tmp_path / "cache" / "tiny").exists()  # refused before any model was built or loaded


@pytest.mark.parametrize("mode, message", [
    ("401", "HTTP 401: the key was refused"),
    ("500", "judgements failed (more than judge.max_error_rate=0.05)"),
])
def test_a_failing_judge_fails_the_run(mode: str, message: str, endpoint: tuple[type, str], tmp_path: Path) -> None:
    handler, url = endpoint
    handler.mode = mode
    data = tmp_path / "locqa.json"
    data.write_text(json.dumps(LOCQA), encoding="utf-8")
    out = tmp_path / "run"
    env = {**os.environ, "PROBE_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["model=tiny", "bench=locqa", f"bench.path={data}",
                           "bench.sha256=null", "judge=http", f"judge.base_url={url}", "judge.model=m",
                           "judge.max_http_retries=0", "judge.retries=0", "backend.max_new_tokens=4",
                           f"hydra.run.dir={out}", "progress=false"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
    assert not (out / "DONE").exists() and not (out / "metrics.json").exists()
    if mode == "401":
        assert handler.calls <= 4  # judge.concurrency: what was in flight, then nothing more
    else:
        assert (out / "judgements.parquet").is_file()  # what it has is written
