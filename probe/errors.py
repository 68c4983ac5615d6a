"""The one exception type for bad input; the entry point turns it into a clean non-zero exit."""

from __future__ import annotations

import errno
import reprlib
from collections.abc import Iterator
from contextlib import contextmanager

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 2, 120, 80
_SHORT.maxlist = _SHORT.maxdict = _SHORT.maxtuple = _SHORT.maxset = 4
_MAX_REPR = 240


class ProbeInputError(Exception):
    """Invalid user input: a data file, a config value, a tokenizer that cannot score letters.

    Messages name the file (or model), the row and the field, with what was expected and
    what was found, so the user can fix the input without reading a traceback.
    """


@contextmanager
def os_errors(what: str, fix: str) -> Iterator[None]:
    """At a known step that touches the file system (create the run directory, load a model,
    write the cache), an `OSError` is the user's to fix, not a bug: it becomes a one-line
    `ProbeInputError` — `what`, the system's reason and path, and `fix`. Only `OSError`: any
    other exception is a bug and keeps its traceback."""
    try:
        yield
    except OSError as e:
        reason = e.strerror or (str(e).strip().splitlines() or [type(e).__name__])[0]
        where = f" ({e.filename})" if e.filename and str(e.filename) not in what else ""
        raise ProbeInputError(f"{what}: {reason}{where}; {fix}") from e


def bounded_repr(value: object) -> str:
    """`repr(value)` kept short (strings cut to ~120 characters, containers to 4 entries and 2
    levels deep, the whole to ~240 characters), for messages naming a user's value: a megabyte value, or a YAML alias bomb
    whose full repr would not fit in memory, never becomes the error line."""
    text = _SHORT.repr(value)
    return text if len(text) <= _MAX_REPR else text[:_MAX_REPR] + "…"


def printable(text: str) -> str:
    """`text` safe to print to a terminal: every control or other non-printable character (an
    escape sequence that would clear the screen or set the title, a newline that would split a
    one-line message or a table row, a lone surrogate) written as its Python escape instead."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


_NO_ROOM = frozenset({errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)})


_READ_ONLY = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def no_room(e: OSError) -> ProbeInputError | None:
    """A full disk, a quota or a file-size limit (`ulimit -f`) met while writing — or a place
    probe may not write at all (a read-only file system, a directory without write permission) —
    as the one-line error the user can act on (None: another `OSError`, a bug's to show in full).
    Every file probe writes goes through a temporary name, so what was written before stays whole."""
    where = f" ({e.filename})" if e.filename else ""
    if e.errno in _READ_ONLY:
        verb = "cannot write" if e.errno == errno.EROFS else "cannot read or write"
        return ProbeInputError(f"{verb}{where}: {e.strerror or e}; probe writes its outputs (a re-analysis, a page, "
                               "a resumed run's parts) beside a run's files: copy the run to a place you may write, "
                               "or make it writable, and run the same command there")
    if e.errno not in _NO_ROOM:
        return None
    return ProbeInputError(f"cannot write{where}: {e.strerror or e}; free space or raise the limit, then rerun the "
                           "same command (finished parts are kept)")
