"""The OpenAI-compatible HTTP judge: failure injection on a local handler, and a real local server."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest

from probe.judges import JudgeRequest, make_judge
from probe.judges.http import HTTPChat, HTTPChatSpec

VALID = {"choices": [{"message": {"role": "assistant",
                                  "content": '{"dimensions": ["Future Orientation"]}'}}]}


class Script(BaseHTTPRequestHandler):
    """Answers the i-th request with the i-th planned behaviour; records headers and bodies."""

    plan: list[str] = []
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Script.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        step = Script.plan.pop(0) if Script.plan else "ok"
        if step == "timeout":
            time.sleep(1.5)
        if step == "500":
            self.send_response(500)
            self.end_headers()
            return
        payload = b"{not json" if step == "badjson" else json.dumps(VALID).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    Script.plan, Script.seen = [], []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Script)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_failures_are_retried_then_parsed(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_TEST_KEY", "sk-test-123")
    Script.plan = ["500", "badjson", "timeout", "ok"]
    chat = HTTPChat(HTTPChatSpec(base_url=server, model="m", api_key_env="PROBE_TEST_KEY", timeout_s=0.5,
                                 backoff_s=0.01, max_retries=4))
    assert chat.chat(["hello"]) == ['{"dimensions": ["Future Orientation"]}']
    assert chat.attempts == 4
    assert Script.seen[0]["path"] == "/v1/chat/completions" and Script.seen[0]["auth"] == "Bearer sk-test-123"
    assert Script.seen[0]["body"]["messages"] == [{"role": "user", "content": "hello"}]
    assert Script.seen[0]["body"]["model"] == "m" and Script.seen[0]["body"]["temperature"] == 0


def test_persistent_failure_becomes_a_judge_error(server: str) -> None:
    Script.plan = ["500"] * 20
    judge = make_judge({"name": "http", "base_url": server, "model": "m", "timeout_s": 0.5,
                        "max_http_retries": 1, "retries": 1})
    [r] = judge.judge([JudgeRequest("globe_dimensions", {"rationale": "It plans for the future."})])
    assert r.output is None and r.judge == "http"
    assert r.error.startswith("request failed: http error after 2 attempt(s)") and "HTTP 500" in r.error
    assert len(Script.seen) == 4  # 2 judge attempts × (1 + 1 HTTP retry)


def test_valid_reply_through_the_judge(server: str) -> None:
    judge = make_judge({"name": "http", "base_url": server, "model": "m"})
    [r] = judge.judge([JudgeRequest("globe_dimensions", {"rationale": "x"})])
    assert r.output == {"dimensions": ["Future Orientation"]} and r.error is None


def test_rate_limit_spaces_requests() -> None:
    now = [0.0]
    sleeps: list[float] = []

    async def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    chat = HTTPChat(HTTPChatSpec(base_url="http://x/v1", model="m", requests_per_minute=60), sleep=sleep,
                    clock=lambda: now[0])

    async def three() -> None:
        lock = anyio.Lock()
        for _ in range(3):
            await chat._throttle(lock)

    anyio.run(three)
    assert sleeps == [1.0, 1.0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("openai") is None,
                    reason="transformers serve needs transformers[serving] (fastapi, uvicorn, openai)")
def test_real_local_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`transformers serve` on loopback with the tiny model: request, reply and validation end to end."""
    from probe.models.tiny import TinySpec, tiny_model_dir

    model_dir = str(tiny_model_dir(TinySpec(), tmp_path / "tiny"))
    port = _free_port()
    cli = Path(sys.executable).with_name("transformers")
    proc = subprocess.Popen([str(cli), "serve", model_dir, "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("transformers serve did not start")
        monkeypatch.setenv("PROBE_TEST_KEY", "sk-never-written")
        chat = HTTPChat(HTTPChatSpec(base_url=f"http://127.0.0.1:{port}/v1", model=model_dir,
                                     api_key_env="PROBE_TEST_KEY", max_tokens=8, timeout_s=60))
        [reply] = chat.chat(["Reply with JSON."])
        assert reply and not reply.startswith("<http error") and chat.attempts == 1
        judge = make_judge({"name": "http", "base_url": f"http://127.0.0.1:{port}/v1", "model": model_dir,
                            "retries": 1, "max_new_tokens": 8})
        [r] = judge.judge([JudgeRequest("globe_dimensions", {"rationale": "Family first."})])
        # a random tiny model cannot write the JSON: the verdict is a recorded error, not a crash
        assert r.output is None and r.error.startswith("invalid after 2 attempts") and r.judge == "http"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
