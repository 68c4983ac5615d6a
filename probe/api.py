"""The Python API over a run directory, for follow-up studies (no model needed): `load_run` gives
a `probe.results.run.Run` with the bench's metrics attached, so `run.recompute_metrics` works."""

from __future__ import annotations

from pathlib import Path

from probe.pipeline.analyze import open_run
from probe.results.run import Run

__all__ = ["Run", "load_run"]


def load_run(path: str | Path) -> Run:
    """Load a run directory of any bench (letter, generation or open-answer mode), with its
    bench's metrics attached for `recompute_metrics`."""
    return open_run(Path(path))[0]
