"""Claiming a run directory: one writer at a time, one configuration per directory.

A run holds an exclusive lock on `<run>/.lock` (fcntl) from its claim to its end, so a second
process writing the same directory is refused with one line instead of corrupting it. The
results key (`run_key.json`) names everything that changes a stored number; a directory
holding another key is refused, and nothing in it is touched. Options that never change stored
results (the analysis options, progress bars, shard size, judge transport settings) are not in
the key: a finished run rerun with other analysis options is re-analysed from its tables.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from probe.errors import ProbeInputError
from probe.files import write_json

State = Literal["new", "resume", "done"]


@dataclass
class Claim:
    """A held claim on a run directory (released when the process ends or `release` is called)."""

    out: Path
    state: State
    """new: nothing was there; resume: an unfinished run of this key; done: finished (`DONE`)."""
    lock: IO[str]

    def release(self) -> None:
        """Drop the lock (also dropped automatically when the process exits, even on SIGKILL)."""
        fcntl.flock(self.lock, fcntl.LOCK_UN)
        self.lock.close()


def claim(out: Path, key: dict[str, Any]) -> Claim:
    """Lock `out` and compare its results key with `key`; write the key only for a new run.

    Raises `ProbeInputError` (nothing written) when another process holds the directory, when it
    holds a run of another configuration, or when it holds a finished run made before run keys.
    """
    out.mkdir(parents=True, exist_ok=True)
    existed = (out / ".lock").exists()
    lock = open(out / ".lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "another process"
        lock.close()
        raise ProbeInputError(f"{out} is being written by {holder}; wait for it to finish or choose another "
                              "output directory") from None
    try:
        state = _state(out, key)
    except BaseException:
        if not existed:
            (out / ".lock").unlink(missing_ok=True)  # a refused claim leaves the directory as it was
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
        raise
    if state != "done":  # who holds it, for the message a second writer gets
        lock.seek(0)
        lock.truncate()
        lock.write(f"probe pid {os.getpid()}\n")
        lock.flush()
    return Claim(out, state, lock)


def _state(out: Path, key: dict[str, Any]) -> State:
    key_path = out / "run_key.json"
    key = json.loads(json.dumps(key))  # the JSON round trip makes tuples lists, as stored
    if key_path.is_file():
        stored = json.loads(key_path.read_text())
        if stored != key:
            diff = sorted(k for k in set(stored) | set(key) if stored.get(k) != key.get(k))
            raise ProbeInputError(f"{out} holds a run with a different configuration (differs in {diff}); "
                                  "choose another output directory")
        return "done" if (out / "DONE").is_file() else "resume"
    if (out / "metrics.json").exists():
        raise ProbeInputError(f"{out} already holds a finished run (metrics.json); choose another output dir")
    write_json(key_path, key)
    return "new"
