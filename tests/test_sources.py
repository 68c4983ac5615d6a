"""Benchmark downloads: cached by URL, checksummed before caching, bounded by a timeout."""

from __future__ import annotations

import hashlib
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probe.benches.sources import fetch
from probe.errors import ProbeInputError

BODY = b'{"data": 1}\n'


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        _Handler.hits.append(self.path)
        if self.path.startswith("/slow"):
            time.sleep(3)
        if self.path.startswith("/missing"):
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Handler.hits = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_download_is_cached_by_url_and_checksummed(server: str, tmp_path: Path) -> None:
    digest = hashlib.sha256(BODY).hexdigest()
    a = fetch(None, f"{server}/v1/data.json", digest, tmp_path)
    assert a.read_bytes() == BODY and a.name == "data.json"
    assert fetch(None, f"{server}/v1/data.json", digest, tmp_path) == a and _Handler.hits == ["/v1/data.json"]
    # same file name at another address: fetched again, into its own cache entry
    b = fetch(None, f"{server}/v2/data.json", digest, tmp_path)
    assert b != a and _Handler.hits == ["/v1/data.json", "/v2/data.json"]
    with pytest.raises(ProbeInputError, match="does not match bench.sha256"):
        fetch(None, f"{server}/v3/data.json", "0" * 64, tmp_path)
    assert len(list(tmp_path.glob("*/data.json"))) == 2  # the bad copy was never cached


def test_http_errors_and_stalls_are_input_errors(server: str, tmp_path: Path) -> None:
    with pytest.raises(ProbeInputError, match="HTTP 404"):
        fetch(None, f"{server}/missing/x.json", None, tmp_path)
    t0 = time.perf_counter()
    with pytest.raises(ProbeInputError, match="ReadTimeout"):
        fetch(None, f"{server}/slow/x.json", None, tmp_path, timeout_s=0.5)
    assert time.perf_counter() - t0 < 2.5
    assert not list(tmp_path.rglob("x.json"))
