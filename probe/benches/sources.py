"""Benchmark files from a local path or their published URL, downloaded once and checksummed.

Downloads go through httpx (already probe's HTTP client for judges): a connect/read timeout so
a stalled server cannot hang a cluster job, transport-level retries for refused connections,
and redirects followed (release hosts redirect to storage). The cache is keyed by the URL, so a
changed `bench.url` never silently reuses a file fetched from another address.

What enters the cache is checked first, and what is in it is checked on every use:
- a download streams into a staging directory beside its cache entry, at most
  `max_bytes` (`bench.max_download_bytes`; a larger `Content-Length` is refused before any byte
  is read), then is checked against `bench.sha256` and parsed by the bench's loader, and only
  then renamed into place — a refused download leaves nothing in the cache;
- the sha256 of what was downloaded is recorded beside it (`<file>.download.json`) and compared on every
  use, so a cached file edited afterwards is noticed even when `bench.sha256` is not pinned: it
  is discarded (with a warning) and downloaded again; so is a cache entry that is a symbolic link.
  An entry from before records existed is adopted with a warning (deleting it could strand an
  offline machine);
- a `file://` source that is itself a symbolic link is refused, not followed: a link can point
  anywhere (`/etc/passwd`), and a mirror is better named by its real path. Directories on the
  way may be links (shared file systems are often mounted that way).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlparse
from urllib.request import url2pathname

import httpx

from probe.errors import ProbeInputError
from probe.files import sha256_file, write_json

log = logging.getLogger(__name__)

WEB_SCHEMES = ("http", "https")
"""URL schemes that name a host (a URL of these without one is refused)."""

TIMEOUT_S = 60.0
"""Seconds without progress (connect or read) before a download fails."""
DEADLINE_S = 1800.0
"""Wall-clock seconds one download may take in all: `TIMEOUT_S` bounds each read, so a server
that drips a byte at a time stays under it forever; this bounds the whole (a published bench
file of a few MB takes seconds)."""
MAX_DOWNLOAD_BYTES = 2 << 30
"""Default cap on one download (2 GiB): the published bench files are a few MB."""
RECORD_SUFFIX = ".download.json"
"""`<file><suffix>` beside each cached file: its URL, size and the sha256 of what was downloaded
(never the published file's own name, which is `<file>`)."""

Validate = Callable[[Path], object]
"""The bench's loader: raises `ProbeInputError` when the file is not a valid bench file."""


def data_digest(files: Sequence[Path]) -> str | None:
    """One sha256 over the data files a bench read: each file's name and the sha256 of its bytes,
    in the order given (None: it read none). Names are base names, so the same files moved
    elsewhere keep their digest (the bench config records where they were)."""
    if not files:
        return None
    listed = [[Path(f).name, sha256_file(Path(f))] for f in files]
    return hashlib.sha256(json.dumps(listed).encode()).hexdigest()


def fetch(path: str | None, url: str, sha256: str | None, cache_dir: Path, validate: Validate | None = None,
          max_bytes: int = MAX_DOWNLOAD_BYTES, timeout_s: float = TIMEOUT_S, deadline_s: float = DEADLINE_S) -> Path:
    """`path` if given, else the cached download of `url` (fetched once into
    `cache_dir/<hash of url>/<file name>`).

    The checksum is verified whenever `sha256` is set. A download is capped at `max_bytes`,
    verified and passed to `validate` *before* it is renamed into the cache, so a bad copy is
    never cached; the rename is atomic, so a concurrent run sees either no file or the whole
    file. A cached file must still have the sha256 recorded when it was downloaded.
    """
    if path:
        local = Path(path).expanduser()
        if not local.is_file():
            raise ProbeInputError(f"bench.path: {local} does not exist or is not a file")
    else:
        key = hashlib.sha256(url.encode()).hexdigest()[:16]
        local = cache_dir / key / (Path(_parse_url(url).path).name or "download")
        if not _intact(local):
            _download(url, local, sha256, validate, max_bytes, (timeout_s, deadline_s))
    _check(local, sha256, str(local))
    return local


def _parse_url(url: str) -> httpx.URL:
    """`url` parsed; one that is no URL (`::::`) or has no scheme (a bare path) is one line."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as e:
        raise ProbeInputError(f"bench.url: {url!r} is not a URL ({e}); expected http(s)://host/path or "
                              "file:///path") from None
    if not parsed.scheme or (parsed.scheme in WEB_SCHEMES and not parsed.host):
        raise ProbeInputError(f"bench.url: {url!r} is not an absolute URL; expected http(s)://host/path or "
                              "file:///path")
    return parsed


def _intact(local: Path) -> bool:
    """Whether the cache entry is a regular file with the sha256 recorded at its download; an
    entry that is not is removed (with a warning saying why) so it is downloaded again."""
    try:
        mode = os.lstat(local).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        raise ProbeInputError(f"cache entry {local} is a directory, not a downloaded file: remove it")
    try:
        recorded = json.loads(_record(local).read_text())["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        recorded = None
    if not stat.S_ISREG(mode):
        why = "is not a regular file (a symbolic link?)"
    elif recorded is None:
        # Written before downloads were recorded: its provenance cannot be checked, but deleting
        # it could strand an offline machine. Adopt it (the bench's own checks still run on it);
        # edits from now on are noticed.
        log.warning("cached download %s has no record of its download (an older cache); adopting it as is — "
                    "pin bench.sha256 to check its content", local)
        write_json(_record(local), {"file": local.name, "bytes": local.stat().st_size, "sha256": sha256_file(local),
                                    "adopted": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        return True
    elif (actual := sha256_file(local)) != recorded:
        why = f"changed since it was downloaded (sha256 {actual}, recorded {recorded})"
    else:
        return True
    log.warning("cached download %s %s; discarding it and downloading again", local, why)
    local.unlink()
    return False


def _record(local: Path) -> Path:
    return local.with_name(local.name + RECORD_SUFFIX)


def _download(url: str, local: Path, sha256: str | None, validate: Validate | None, max_bytes: int,
              timeouts: tuple[float, float]) -> None:
    timeout_s, deadline_s = timeouts
    local.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=local.parent, prefix=".download-"))
    tmp = staging / local.name  # the loader's messages then name the file as published
    try:
        with open(tmp, "wb") as out:
            size = _copy_capped(_chunks(url, max_bytes, timeout_s), out, url, (max_bytes, deadline_s))
        _check(tmp, sha256, f"download of {url}")
        if validate is not None:
            try:
                validate(tmp)
            except ProbeInputError as e:
                raise ProbeInputError(f"download of {url} is not a valid bench file, so it was not cached: {e}") from None
        write_json(_record(local), {"url": url, "file": local.name, "bytes": size, "sha256": sha256_file(tmp),
                                           "downloaded": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        os.replace(tmp, local)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not local.exists():
            with contextlib.suppress(OSError):  # an empty cache entry of a refused download
                local.parent.rmdir()


def _copy_capped(chunks: Iterator[bytes], out: BinaryIO, url: str, limits: tuple[int, float]) -> int:
    """Copy `chunks` to `out`, at most `limits[0]` bytes within `limits[1]` wall-clock seconds."""
    max_bytes, deadline_s = limits
    size, deadline = 0, time.monotonic() + deadline_s
    for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise ProbeInputError(f"download of {url} is larger than bench.max_download_bytes={max_bytes} bytes; "
                                  "raise bench.max_download_bytes if the file really is that large, or set bench.path "
                                  "to a local copy")
        if time.monotonic() > deadline:
            raise ProbeInputError(f"download of {url} took longer than {deadline_s:.0f} s ({size} bytes so far); set "
                                  "bench.path to a local copy, or retry")
        out.write(chunk)
    return size


def _chunks(url: str, max_bytes: int, timeout_s: float) -> Iterator[bytes]:
    """The bytes at `url` (http(s) or file), in chunks, as they arrive."""
    if url.startswith("file://"):  # a mirror on a shared file system (air-gapped clusters)
        yield from _file_chunks(url)
        return
    try:
        transport = httpx.HTTPTransport(retries=3)
        with httpx.Client(transport=transport, timeout=timeout_s, follow_redirects=True) as client:
            with client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise ProbeInputError(f"download of {url}: HTTP {response.status_code}; set bench.path to a "
                                          "local copy, or check bench.url")
                length = response.headers.get("content-length", "")
                if length.isdigit() and int(length) > max_bytes:  # refused before a byte is read
                    raise ProbeInputError(f"download of {url}: Content-Length {length} is larger than "
                                          f"bench.max_download_bytes={max_bytes}; raise it, or set bench.path to a "
                                          "local copy")
                yield from response.iter_bytes()
    except httpx.HTTPError as e:
        raise ProbeInputError(f"download of {url} failed ({type(e).__name__}: {e}); set bench.path to a local "
                              "copy, or retry") from None


def _file_chunks(url: str) -> Iterator[bytes]:
    source = Path(url2pathname(urlparse(url).path))
    if source.is_symlink():
        raise ProbeInputError(f"download of {url}: {source} is a symbolic link (to {os.readlink(source)}); probe "
                              "does not follow links into its cache: set bench.url to the file itself, or bench.path")
    try:  # O_NOFOLLOW: a link planted after the check above is refused too
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ProbeInputError(f"download of {url}: cannot open {source} ({e.strerror})") from None
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a device or a pipe could stream forever
            raise ProbeInputError(f"download of {url}: {source} is not a regular file")
        yield from iter(lambda: f.read(1 << 20), b"")


def _check(path: Path, expected: str | None, what: str) -> None:
    if expected and (actual := sha256_file(path)) != expected.lower():
        raise ProbeInputError(f"{what}: sha256 {actual} does not match bench.sha256 {expected} "
                              "(set bench.sha256=null to accept a modified copy)")
