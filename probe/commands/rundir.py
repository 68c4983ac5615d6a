"""The directories a launch makes for its runs, and taking them away again when a run is refused.

Hydra names a run directory before probe reads the config (`hydra.run.dir`, a timestamp by
default), and `probe.commands.hydra_callbacks.RunDirCheck` creates it then. A run refused
before anything of it was written would leave that directory empty behind; `discard` removes
it, with the parents this launch made that it leaves empty. A directory that held anything
before the launch (earlier results to resume) is never removed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

MADE: list[Path] = []
"""Directories this process created (absolute, in creation order): only these, or their
descendants, can be known to hold nothing from before."""
HYDRA_ONLY = frozenset({".hydra"})
"""What Hydra itself writes into a new run directory (`hydra.output_subdir`) before probe runs."""


def make_dirs(path: str | Path) -> None:
    """`mkdir -p path`, remembering each directory it creates (`MADE`)."""
    target = _absolute(path)
    missing = [d for d in (*reversed(target.parents), target) if not d.exists()]
    target.mkdir(parents=True, exist_ok=True)
    MADE.extend(missing)


def discard(out: Path) -> bool:
    """After a refusal: remove `out` when it is empty, or when this launch made it and it holds only
    Hydra's `.hydra/`, then the parents this launch made that are left empty. True when this
    launch made `out` and keeps it because it holds files of this run (the caller says so); a
    directory that held files before the launch is left as it was (False: nothing new was left)."""
    out = _absolute(out)
    if not out.is_dir() or out.is_symlink():
        return False
    names = {p.name for p in out.iterdir()}
    if names and not any(d == out or d in out.parents for d in MADE):
        return False
    if names and not names <= HYDRA_ONLY:
        return True
    if names:
        shutil.rmtree(out)
    else:
        out.rmdir()
    for parent in out.parents:
        if parent not in MADE or any(parent.iterdir()):
            break
        parent.rmdir()
    return False


def _absolute(path: str | Path) -> Path:
    """`path` made absolute and normalised as Hydra makes `hydra.runtime.output_dir` (`..` folded)."""
    return Path(os.path.abspath(path))
