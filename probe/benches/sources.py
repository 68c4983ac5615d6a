"""Benchmark files from a local path or their published URL, downloaded once and checksummed."""

from __future__ import annotations

import os
import tempfile
import urllib.request
from pathlib import Path

from probe.errors import ProbeInputError
from probe.files import sha256_file


def fetch(path: str | None, url: str, sha256: str | None, cache_dir: Path) -> Path:
    """`path` if given, else the cached download of `url` (fetched once into `cache_dir`).

    The checksum is verified whenever `sha256` is set, and a download is verified *before* it is
    renamed into the cache, so a bad copy is never cached; the rename is atomic, so a concurrent
    run sees either no file or the whole file.
    """
    if path:
        local = Path(path).expanduser()
        if not local.is_file():
            raise ProbeInputError(f"bench.path: {local} does not exist or is not a file")
    else:
        local = cache_dir / Path(url).name
        if not local.is_file():
            local.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=local.parent, prefix=".download-")
            os.close(fd)
            try:
                urllib.request.urlretrieve(url, tmp)  # noqa: S310 (a configured https source)
                _check(Path(tmp), sha256, f"download of {url}")
                os.replace(tmp, local)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    _check(local, sha256, str(local))
    return local


def _check(path: Path, expected: str | None, what: str) -> None:
    if expected and (actual := sha256_file(path)) != expected.lower():
        raise ProbeInputError(f"{what}: sha256 {actual} does not match bench.sha256 {expected} "
                              "(set bench.sha256=null to accept a modified copy)")
