"""A run stopped by SIGINT (Ctrl-C) or SIGTERM (a scheduler, `kill`) says how to resume it.

Everything a run computed before the signal is in its checkpointed parts (`probe.results.parts`),
and the same command into the same directory resumes from them. A default run directory is
timestamped, so "the same command" would start afresh: the line printed names the directory
(`hydra.run.dir=…`) beside the run's own overrides.
"""

from __future__ import annotations

import re
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

# Hydra overrides that belong to launching a sweep, not to the run being resumed.
_LAUNCH_KEYS = ("hydra.run.dir", "hydra.mode", "hydra.sweep.", "hydra.job.num", "hydra.job.id", "hydra.launcher",
                "hydra.sweeper", "hydra/launcher", "hydra/sweeper")
_PLAIN_VALUE = re.compile(r"[\w./:@%~+-]+")
"""Characters Hydra's override grammar reads unquoted in a value (paths with spaces need quotes)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like SIGINT's KeyboardInterrupt so both unwind the same way (locks let
    go, part files closed) and end with the resume line."""

    signum = signal.SIGTERM


def resume_command(launcher: Sequence[str], task: Sequence[str], hydra: Sequence[str], out_dir: Path) -> str:
    """The shell command that reruns this run into `out_dir`: `launcher` (e.g. `python -m probe`),
    the run's task overrides, the user's Hydra overrides other than those of a sweep launch,
    then `hydra.run.dir=<out_dir>`."""
    kept = [o for o in hydra if not o.lstrip("+~").startswith(_LAUNCH_KEYS)]
    path = str(out_dir)
    value = path if _PLAIN_VALUE.fullmatch(path) else "'" + path.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return shlex.join([*launcher, *task, *kept, f"hydra.run.dir={value}"])


def launcher_argv() -> list[str]:
    """How this process was started, up to its arguments: `python -m probe` or the `probe`
    script as typed; `python -m probe` when another program launched it (a submitit job)."""
    n = len(sys.orig_argv) - len(sys.argv) + 1  # not positive when called from another program's process
    prefix = list(sys.orig_argv[:n]) if n > 0 else []
    if prefix and (prefix[-2:] == ["-m", "probe"] or Path(prefix[-1]).name == "probe"):
        return prefix
    return ["python", "-m", "probe"]


@contextmanager
def resume_hint(command: Callable[[], str]) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM stop the run with one line on stderr,
    `probe: interrupted by SIGINT; resume with: <command()>`, and exit status 128 + the signal
    number (130, 143), as a shell reports a process the signal ended."""
    main = threading.current_thread() is threading.main_thread()  # only the main thread may set handlers
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main else None
    try:
        yield
    except KeyboardInterrupt as e:
        signum = e.signum if isinstance(e, Terminated) else signal.SIGINT
        print(f"probe: interrupted by {signum.name}; resume with: {command()}", file=sys.stderr, flush=True)
        sys.exit(128 + int(signum))
    finally:
        if main:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated()
