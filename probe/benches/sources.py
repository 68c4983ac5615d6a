"""Benchmark files from a local path or their published URL, downloaded once and checksummed.

Downloads go through httpx (already probe's HTTP client for judges): a connect/read timeout so
a stalled server cannot hang a cluster job, transport-level retries for refused connections,
and redirects followed (release hosts redirect to storage). The cache is keyed by the URL, so a
changed `bench.url` never silently reuses a file fetched from another address.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import httpx

from probe.errors import ProbeInputError
from probe.files import sha256_file

TIMEOUT_S = 60.0
"""Seconds without progress (connect or read) before a download fails."""


def fetch(path: str | None, url: str, sha256: str | None, cache_dir: Path, timeout_s: float = TIMEOUT_S) -> Path:
    """`path` if given, else the cached download of `url` (fetched once into
    `cache_dir/<hash of url>/<file name>`).

    The checksum is verified whenever `sha256` is set, and a download is verified *before* it is
    renamed into the cache, so a bad copy is never cached; the rename is atomic, so a concurrent
    run sees either no file or the whole file.
    """
    if path:
        local = Path(path).expanduser()
        if not local.is_file():
            raise ProbeInputError(f"bench.path: {local} does not exist or is not a file")
    else:
        key = hashlib.sha256(url.encode()).hexdigest()[:16]
        local = cache_dir / key / (Path(httpx.URL(url).path).name or "download")
        if not local.is_file():
            _download(url, local, sha256, timeout_s)
    _check(local, sha256, str(local))
    return local


def _download(url: str, local: Path, sha256: str | None, timeout_s: float) -> None:
    local.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=local.parent, prefix=".download-")
    if url.startswith("file://"):  # a mirror on a shared file system (air-gapped clusters)
        os.close(fd)
        try:
            source = Path(url2pathname(urlparse(url).path))
            if not source.is_file():
                raise ProbeInputError(f"download of {url}: no such file")
            shutil.copyfile(source, tmp)
            _check(Path(tmp), sha256, f"download of {url}")
            os.replace(tmp, local)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return
    try:
        transport = httpx.HTTPTransport(retries=3)
        with os.fdopen(fd, "wb") as f, httpx.Client(transport=transport, timeout=timeout_s,
                                                    follow_redirects=True) as client:
            with client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise ProbeInputError(f"download of {url}: HTTP {response.status_code}; set bench.path to a "
                                          "local copy, or check bench.url")
                for chunk in response.iter_bytes():
                    f.write(chunk)
        _check(Path(tmp), sha256, f"download of {url}")
        os.replace(tmp, local)
    except httpx.HTTPError as e:
        raise ProbeInputError(f"download of {url} failed ({type(e).__name__}: {e}); set bench.path to a local "
                              "copy, or retry") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _check(path: Path, expected: str | None, what: str) -> None:
    if expected and (actual := sha256_file(path)) != expected.lower():
        raise ProbeInputError(f"{what}: sha256 {actual} does not match bench.sha256 {expected} "
                              "(set bench.sha256=null to accept a modified copy)")
