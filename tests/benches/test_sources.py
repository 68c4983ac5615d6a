"""Benchmark downloads: cached by URL, checksummed before caching, bounded by a timeout."""

from __future__ import annotations

import hashlib
import json
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


class _Hostile(http.server.BaseHTTPRequestHandler):
    """`/endless`: bytes until the client hangs up; `/big`: an honest Content-Length over the cap;
    `/junk`: a small file that is no bench file; `/ok`: a valid one (BODY)."""

    sent = 0

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        if self.path.startswith("/big"):
            self.send_header("Content-Length", str(10 << 30))
        self.end_headers()
        try:
            if self.path.startswith("/junk"):
                self.wfile.write(b"not json at all\n" * 1000)
            elif self.path.startswith("/ok"):
                self.wfile.write(BODY)
            elif self.path.startswith("/drip"):  # a byte every 0.1 s: no single read ever times out
                for _ in range(200):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            else:
                while _Hostile.sent < 200 << 20:  # stops at 200 MiB if nobody hangs up
                    self.wfile.write(b"x" * (1 << 16))
                    _Hostile.sent += 1 << 16
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    _Hostile.sent = 0
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _json_only(path: Path) -> None:
    """A stand-in bench loader: valid JSON or an input error naming the file."""
    try:
        json.loads(path.read_text())
    except ValueError as e:
        raise ProbeInputError(f"{path}: invalid JSON ({e})") from None


def _cached_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if not p.is_dir()]


def test_an_endless_download_stops_at_the_cap_and_leaves_nothing(hostile: str, tmp_path: Path) -> None:
    with pytest.raises(ProbeInputError, match=r"larger than bench.max_download_bytes=1048576 bytes"):
        fetch(None, f"{hostile}/endless/data.json", None, tmp_path, _json_only, max_bytes=1 << 20)
    assert _Hostile.sent < 64 << 20  # the client hung up near the cap, not after the server's 200 MiB
    with pytest.raises(ProbeInputError, match=r"Content-Length 10737418240 is larger than bench.max_download_bytes"):
        fetch(None, f"{hostile}/big/data.json", None, tmp_path, _json_only, max_bytes=1 << 20)
    assert _cached_files(tmp_path) == [] and list(tmp_path.iterdir()) == []


def test_a_dripping_download_stops_at_its_deadline_and_leaves_nothing(hostile: str, tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(ProbeInputError, match="took longer than 1 s"):
        fetch(None, f"{hostile}/drip/data.json", None, tmp_path, _json_only, timeout_s=0.5, deadline_s=1.0)
    assert time.monotonic() - start < 3.0  # not the 20 s the server would drip for
    assert _cached_files(tmp_path) == []


def test_an_invalid_download_is_parsed_before_it_is_cached(hostile: str, tmp_path: Path) -> None:
    with pytest.raises(ProbeInputError, match=r"download of .*/junk/data.json is not a valid bench file, so it was "
                                              r"not cached: .*data.json: invalid JSON"):
        fetch(None, f"{hostile}/junk/data.json", None, tmp_path, _json_only)
    assert _cached_files(tmp_path) == []
    good = fetch(None, f"{hostile}/ok/data.json", None, tmp_path, _json_only)
    assert good.read_bytes() == BODY
    assert json.loads((good.parent / "data.json.download.json").read_text())["sha256"] == hashlib.sha256(BODY).hexdigest()


def test_a_symlinked_file_source_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "mirror" / "data.json"
    link.parent.mkdir()
    link.symlink_to("/etc/passwd")
    with pytest.raises(ProbeInputError, match=r"data.json is a symbolic link \(to /etc/passwd\); probe does not "
                                              "follow links into its cache"):
        fetch(None, link.as_uri(), None, tmp_path / "cache", _json_only)
    assert not (tmp_path / "cache").exists() or _cached_files(tmp_path / "cache") == []


def test_a_cached_file_edited_after_download_is_detected(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Without bench.sha256, the sha256 recorded at download time guards the cached copy."""
    source = tmp_path / "data.json"
    source.write_bytes(BODY)
    cached = fetch(None, source.as_uri(), None, tmp_path / "cache", _json_only)
    cached.write_bytes(b'{"data": 2}\n')  # edited in the cache
    with caplog.at_level("WARNING", logger="probe.benches.sources"):
        again = fetch(None, source.as_uri(), None, tmp_path / "cache", _json_only)
    assert again == cached and again.read_bytes() == BODY  # the edit was not used: downloaded again
    assert "changed since it was downloaded" in caplog.text
    # an entry from before records existed is adopted (an offline machine keeps its cache), and
    # guarded from then on
    (cached.parent / "data.json.download.json").unlink()
    caplog.clear()
    with caplog.at_level("WARNING", logger="probe.benches.sources"):
        assert fetch(None, source.as_uri(), None, tmp_path / "cache", _json_only) == cached
    assert "adopting it as is" in caplog.text and (cached.parent / "data.json.download.json").is_file()
    cached.unlink()
    cached.symlink_to(source)  # nor is a link planted in the cache
    caplog.clear()
    with caplog.at_level("WARNING", logger="probe.benches.sources"):
        assert fetch(None, source.as_uri(), None, tmp_path / "cache", _json_only).read_bytes() == BODY
    assert "is not a regular file" in caplog.text and not cached.is_symlink()


def test_max_download_bytes_is_a_checked_option_outside_the_run_key() -> None:
    from probe.benches.ccd.data import CCDSpec
    from probe.benches.locqa.data import LocQASpec
    from probe.config import build
    from probe.pipeline.provenance import BENCH_TRANSPORT

    for spec in (CCDSpec, LocQASpec):
        assert build(spec, {"max_download_bytes": 1000}, "bench").max_download_bytes == 1000
        assert spec().max_download_bytes == 2 << 30
        with pytest.raises(ProbeInputError, match="bench.max_download_bytes"):
            build(spec, {"max_download_bytes": 0}, "bench")
        with pytest.raises(ProbeInputError, match="bench.max_download_bytes"):
            build(spec, {"max_download_bytes": "lots"}, "bench")
    assert "max_download_bytes" in BENCH_TRANSPORT
