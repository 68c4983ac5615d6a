"""The Python API over a run directory, for follow-up studies (no model needed): `load_run` gives
a `probe.results.run.Run` with the bench's metrics attached, so `run.recompute_metrics` works;
`run.patching()` gives an activation-patching run's raw results and `patching_table(run, …)` the
share of the cue's effect restored per layer; `steering_vectors(run_dir, layer)` the per-culture
vectors a steered run adds, from a run's captured activations."""

from __future__ import annotations

from pathlib import Path

from probe.metrics.patching import patching_table, restored_share
from probe.metrics.steering import steering_vectors
from probe.pipeline.stored_run import open_run
from probe.results.run import Run

__all__ = ["Run", "load_run", "patching_table", "restored_share", "steering_vectors"]


def load_run(path: str | Path) -> Run:
    """Load a run directory of any bench (letter, generation or open-answer mode), with its
    bench's metrics attached for `recompute_metrics`."""
    return open_run(Path(path))[0]
