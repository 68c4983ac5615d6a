"""Claiming a run directory: probe's directories only, one writer at a time, one configuration
per directory.

A directory is probe's to write when it is new or empty, or when it already holds a probe run
(its results key, `run_key.json`): anything else — a user's `report.md`, another tool's
`.hydra/` — is refused with one line before a file is written, and so is a symbolic link
anywhere inside (probe never writes through one; see `probe.files`). A run holds an exclusive lock on `<run>/.lock` (fcntl) from its claim to its end, so a second
process writing the same directory is refused with one line instead of corrupting it. The
results key (`run_key.json`) names everything that changes a stored number; a directory
holding another key is refused, and nothing in it is touched. Options that never change stored
results (the analysis options, progress bars, shard size, judge transport settings) are not in
the key: a finished run rerun with other analysis options is re-analysed from its tables.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from probe.errors import ProbeInputError
from probe.files import open_nofollow, refuse_link, refuse_links_inside
from probe.results.layout import LOCK, METRICS, RUN_KEY, is_finished
from probe.results.run_key import DIGESTS, as_stored, changed_inputs, read_run_key, without_digests, write_run_key

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

    Raises `ProbeInputError` (nothing written) when the directory is not probe's (`check_ours`),
    when another process holds it, or when it holds a run of another configuration.
    """
    check_ours(out)
    out.mkdir(parents=True, exist_ok=True)
    existed = os.path.lexists(out / LOCK)
    lock = open_nofollow(out / LOCK, os.O_RDWR | os.O_CREAT | os.O_APPEND, "a+")
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
            (out / LOCK).unlink(missing_ok=True)  # a refused claim leaves the directory as it was
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
        raise
    if state != "done":  # who holds it, for the message a second writer gets
        lock.seek(0)
        lock.truncate()
        lock.write(f"probe pid {os.getpid()}\n")
        lock.flush()
    return Claim(out, state, lock)


def check_ours(out: Path) -> None:
    """Raise `ProbeInputError` unless `out` is probe's to write: missing, empty (a `.lock` of a
    claim killed before it wrote its key aside), or holding a probe run's `run_key.json`; and
    holding no symbolic link. Hydra writes nothing there first: probe's config sets
    `hydra.output_subdir: null` and logs to the console, and probe records `.hydra/` itself."""
    if not os.path.lexists(out):
        return
    if not out.is_dir():
        raise ProbeInputError(f"{out} is not a directory; choose a new or empty output directory")
    refuse_link(out / RUN_KEY)
    if not (out / RUN_KEY).is_file():
        foreign = sorted(set(os.listdir(out)) - {LOCK})
        if METRICS in foreign:
            raise ProbeInputError(f"{out} already holds a finished run without a results key ({METRICS}); "
                                  "choose another output directory")
        if foreign:
            shown = ", ".join(foreign[:5]) + (f", … ({len(foreign)} entries)" if len(foreign) > 5 else "")
            raise ProbeInputError(f"{out} holds files that are not a probe run's ({shown}); probe writes only into "
                                  "a new or empty directory or one of its own runs (run_key.json): choose another "
                                  "output directory")
    refuse_links_inside(out)


def _state(out: Path, key: dict[str, Any]) -> State:
    check_ours(out)  # again, under the lock
    key = as_stored(key)
    stored = read_run_key(out)
    if stored is not None:
        if stored != key:
            _refuse_changed_inputs(out, stored, key)
            diff = sorted(k for k in set(stored) | set(key) if stored.get(k) != key.get(k))
            raise ProbeInputError(f"{out} holds a run with a different configuration (differs in {diff}); "
                                  "choose another output directory")
        return "done" if is_finished(out) else "resume"
    write_run_key(out, key)
    return "new"


def _refuse_changed_inputs(out: Path, stored: dict[str, Any], key: dict[str, Any]) -> None:
    """Where the configuration is the same but the inputs read are not, say which: the data or the
    weights changed since the run started, or its key predates the data digest (an older probe)."""
    if without_digests(stored) != without_digests(key):
        return  # another configuration: the caller names what differs
    changed = changed_inputs(stored, key)
    if changed:
        raise ProbeInputError(f"{out}: {changed} changed since this run started (stored vs now); its stored scores "
                              "belong to the old inputs, so it is not resumed: restore them, or choose another "
                              "output directory")
    for block, name in DIGESTS:
        if name not in stored.get(block, {}) and name in key.get(block, {}):
            what = "bench data" if block == "bench" else "model weights"
            raise ProbeInputError(f"{out}: this run was started by an older probe, whose run key holds no digest of "
                                  f"the {what} ({block}.{name}), so its stored scores cannot be tied to today's "
                                  f"{what} and it is not resumed: choose another output directory")
