"""Whole-file writes that a reader never sees half-done, never through a link, and checksums.

Every file probe writes goes to a temporary name in the same directory and is renamed into
place, so a killed process leaves either the old file, the new file, or a `.tmp` that readers
ignore — never a truncated file under the final name. Files are created without following
symbolic links: a link planted where probe writes (`report.md` → a file elsewhere, `figures/` →
another directory) is refused with one line, never written through.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import json
import math
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from probe.errors import ProbeInputError, os_errors

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def check_name(value: object, key: str) -> str:
    """`value` if it can name one directory (`runs/<bench.name>/…`): letters, digits, `.`, `_`,
    `+`, `-`, not starting with a dot — so no `/`, no `..`, no control character can take a run
    outside its place. Else a one-line `ProbeInputError` naming `key`."""
    text = str(value)
    if not _NAME.fullmatch(text) or len(text) > 100:
        raise ProbeInputError(f"{key}: expected a name of letters, digits, '.', '_', '+' or '-' (not starting with "
                              f"a dot, at most 100 characters; it names a directory), got {_short(text)}")
    return text


def _short(text: str) -> str:
    return repr(text) if len(text) <= 60 else f"{text[:60]!r}… ({len(text)} characters)"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def refuse_link(path: Path) -> None:
    """Raise `ProbeInputError` if `path` is a symbolic link (probe never writes through one)."""
    if os.path.islink(path):
        raise ProbeInputError(f"{path} is a symbolic link (to {os.readlink(path)}); probe writes its own files and "
                              "never through a link: remove the link or choose another output directory")


def refuse_links_inside(root: Path) -> None:
    """Raise `ProbeInputError` naming the first symbolic link anywhere below `root` (`root` itself
    may be one: the user chose it). Links are not followed while looking."""
    for top, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(dirs + files):
            refuse_link(Path(top) / name)


def make_dirs(path: Path) -> Path:
    """`mkdir -p path`, refusing a symbolic link where the directory `path` should be."""
    refuse_link(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def open_nofollow(path: Path, flags: int, mode: str) -> IO[Any]:
    """`open(path, mode)` with `os.open` flags, failing on a symbolic link at `path` instead of
    following it (for files written in place: the run lock, a resumable temporary file)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            refuse_link(path)
        raise
    return os.fdopen(fd, mode)


@contextmanager
def open_new(path: Path, tag: str = "") -> Iterator[IO[bytes]]:
    """A binary file to write `path` through: a temporary file created exclusively (never through
    a link) in the same directory, renamed over `path` when the block ends without an error and
    removed when it raises. A symbolic link at `path` is refused before anything is written.
    `tag` goes into the temporary name, so writers in several processes that may write one file
    at once (a shared cache) each use their own."""
    path = Path(path)
    refuse_link(path)
    tmp = path.with_name(f".{path.name}{tag}.tmp")
    tmp.unlink(missing_ok=True)  # a killed writer's leftover (or a planted link: unlink removes the link)
    f = os.fdopen(os.open(tmp, _NEW, 0o666), "wb")
    try:
        with f:
            yield f
        replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def open_user_file(path: Path, command: str) -> Iterator[IO[bytes]]:
    """A new file the user named (`--out FILE`), written as `open_new` writes: claimed first (an
    existing file, directory or link there is refused with one line, so nothing of the user's or
    of a run is overwritten), then written to a temporary name and renamed into place, so a full
    disk or a file-size limit leaves no partial file and ends in one line, not a traceback."""
    path = Path(path)
    if os.path.lexists(path):
        kind = "a symbolic link" if os.path.islink(path) else "a directory" if path.is_dir() else "a file"
        raise ProbeInputError(f"{path} exists ({kind}); {command} writes only a new file, so nothing there is "
                              "overwritten: choose another name or remove it first")
    with os_errors(f"{command}: cannot write {path}", "free space, raise the file-size limit or choose another place"):
        make_dirs(path.parent)
        with open_new(path) as f:
            yield f


def replace(tmp: Path, path: Path) -> None:
    """Rename a finished temporary file over `path`, refusing a symbolic link there."""
    refuse_link(path)
    os.replace(tmp, path)


def atomic_write_bytes(path: Path, data: bytes, tag: str = "") -> None:
    """Write `data` to `path` through a temporary file and an atomic rename (see `open_new`)."""
    with open_new(path, tag) as f:
        f.write(data)


def write_text(path: Path, text: str, tag: str = "") -> None:
    """Write UTF-8 `text` to `path` atomically, never through a link."""
    atomic_write_bytes(path, text.encode("utf-8"), tag)


def write_json(path: Path, obj: Any) -> None:
    """JSON with NaN/inf written as null (they are not valid JSON)."""
    atomic_write_bytes(path, (json.dumps(_finite(obj), indent=2, sort_keys=False) + "\n").encode())


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def utf8_error(path: Path) -> str:
    """Where a file stops being valid UTF-8, as `line N, byte B (…)`, for input-error messages
    (a decoder's own offset counts from the start of its read buffer, not of the file)."""
    for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            return f"line {number}, byte {e.start + 1} of the line: {e.reason}"
    return "no invalid byte found on a second read"


@contextmanager
def wide_csv_fields(limit: int = 1 << 30) -> Iterator[None]:
    """The `csv` module's field size limit raised to `limit` while a reader runs, then restored.
    The limit is process-wide: a reader that left it raised would change what every other CSV
    reader of the process accepts (DiSCo refuses a field over the default limit, naming its line)."""
    old = csv.field_size_limit(min(sys.maxsize, limit))
    try:
        yield
    finally:
        csv.field_size_limit(old)
